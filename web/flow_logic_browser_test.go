package web_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
)

// The condition node's branches and the variable update node's updates,
// edited in the side panel in Chromium on the real engine: a condition
// built from the start's question, an operator and a value; a value that
// is no number for a length operator refused by the engine and named on
// its row; a condition and a branch deleted, the branch's edges following
// it; an update given by a reference and one typed as a number. The saved
// graph holds exactly what was built, and a debug run takes IF for a
// question about the sandbox and ELSE, with the updated variables, for
// another.
func TestFlowLogicEditors(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(`{"nodes":[
		{"nodeId":"start","type":"workflowStart","name":"Start"},
		{"nodeId":"check","type":"ifElseNode","name":"Check","inputs":{"ifElseList":[
			{"condition":"AND","list":[{"variable":"{{$VARIABLE_NODE_ID.mood$}}","condition":"isEmpty"}]},
			{"condition":"AND","list":[{"variable":"{{$VARIABLE_NODE_ID.mood$}}","condition":"isEmpty"}]}]}},
		{"nodeId":"yes","type":"answerNode","name":"Sandbox","inputs":{"text":"IF: about the sandbox"}},
		{"nodeId":"set","type":"variableUpdate","name":"Remember","inputs":{"updateList":[
			{"variable":"{{$VARIABLE_NODE_ID.mood$}}","value":"calm","valueType":"string","renderType":"input"}]}},
		{"nodeId":"no","type":"answerNode","name":"Other","inputs":{"text":"ELSE: {{$VARIABLE_NODE_ID.mood$}} / {{$VARIABLE_NODE_ID.visits$}}"}}],
		"edges":[{"source":"start","target":"check"},{"source":"check","target":"yes","sourceHandle":"ELSE IF 1"},
			{"source":"check","target":"set","sourceHandle":"ELSE"},{"source":"set","target":"no"}],
		"variables":[{"key":"mood","type":"string","label":"Mood","defaultValue":"calm"},{"key":"visits","type":"number","defaultValue":0}]}`), &g); err != nil {
		t.Fatal(err)
	}
	if err := e.apps.Put(ctx, apps.App{ID: "logic", Name: "Logic", OwnerID: "u:" + enginetest.AdminName, Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	tb.do(t, chromedp.Navigate(e.url+"/apps/logic/flow?lang=en"))
	q := strconv.Quote
	waitFor := func(cond string) {
		t.Helper()
		run(t, tb, poll[bool](`() => `+cond))
	}
	count := func(css string) string { return `document.querySelectorAll(` + q(css) + `).length` }
	texts := func(css string) string {
		t.Helper()
		return tb.js(t, `[...document.querySelectorAll(`+q(css)+`)].map((e) => e.textContent.trim()).join("|")`)
	}
	// pick chooses an option of a select as a person does; setText types a
	// new text into an input, replacing what it held, and leaves it (the
	// panel's inputs commit when they lose the focus).
	pick := func(css, value string) {
		t.Helper()
		waitFor(`document.querySelector(` + q(css) + `) !== null`)
		tb.js(t, `(() => { const s = document.querySelector(`+q(css)+`); s.value = `+q(value)+`; s.dispatchEvent(new Event("change", { bubbles: true })); return ""; })()`)
		waitFor(`document.querySelector(` + q(css) + `).value === ` + q(value))
	}
	setText := func(css, value string) {
		t.Helper()
		tb.js(t, `(() => { const i = document.querySelector(`+q(css)+`); i.focus(); Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(i, `+q(value)+`); i.dispatchEvent(new Event("input", { bubbles: true })); i.blur(); return ""; })()`)
	}
	leave := func() { tb.do(t, chromedp.Click(chromedp.CSS(`.panel h2`))) }
	// show scrolls the panel to what a screenshot is of.
	show := func(css string) { tb.js(t, `(document.querySelector(`+q(css)+`).scrollIntoView(), "")`) }
	showField := func(key string) { show(`.panel [data-field="` + key + `"]`) }
	waitFor(count(".react-flow__node") + ` === 5`)

	// The condition node: a block per branch, named as its handles are,
	// and what ELSE means.
	tb.openNode(t, "check")
	field := `.panel [data-field="ifElseList"] `
	waitFor(count(field+`[data-branch]`) + ` === 3`)
	if got := texts(field + `[data-branch] .branch-name`); got != "IF|ELSE IF 1|ELSE" {
		t.Errorf("the branches are %q, want IF|ELSE IF 1|ELSE", got)
	}
	if got := texts(field + `[data-branch="ELSE"] .hint`); !strings.Contains(got, "no branch above holds") {
		t.Errorf("ELSE says %q", got)
	}
	if n := tb.js(t, count(field+`.join`)+` + ""`); n != "0" {
		t.Errorf("%s branches offer a join with one condition each", n)
	}

	// A second condition in ELSE IF 1: the join is offered; the start's
	// question is text, so text and length operators, no order ones.
	elseIf := field + `[data-branch="ELSE IF 1"] `
	tb.do(t, chromedp.Click(chromedp.CSS(elseIf+`.add-condition`)))
	waitFor(count(elseIf+`[data-condition]`) + ` === 2`)
	waitFor(count(elseIf+`.join`) + ` === 1`)
	pick(`#cond-1-1-variable`, "{{$start.userChatInput$}}")
	ops := tb.js(t, `[...document.querySelectorAll("#cond-1-1-operator option")].map((o) => o.value).join(",")`)
	if !strings.Contains(ops, "include") || !strings.Contains(ops, "startWith") || !strings.Contains(ops, "lengthGreaterThan") || strings.Contains(ops, ",greaterThan,") {
		t.Errorf("the operators offered for the question are %s", ops)
	}
	if got := tb.js(t, `document.querySelector('#cond-1-1-operator option[value="include"]').textContent`); got != "contains" {
		t.Errorf("include reads %q", got)
	}
	// A length compared with a word: the engine refuses it, on its row.
	pick(`#cond-1-1-operator`, "lengthGreaterThan")
	tb.typeInto(t, `#cond-1-1-value`, "many")
	leave()
	waitFor(`document.querySelector("#cond-1-1-value").value === "many"`)
	tb.expected = []string{"status of 422"} // the refusal, on purpose
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.primary`)))
	waitFor(count(elseIf+`[data-condition="1"] .field-problem`) + ` === 1`)
	if msg := tb.text(t, elseIf+`[data-condition="1"] .field-problem`); !strings.Contains(msg, "compares with a number") {
		t.Errorf("the refused condition says %q", msg)
	}
	showField("ifElseList")
	e.screenshot(t, tb, "logic-condition-refused.png")

	// Made right: the question contains "sandbox". The value given as a
	// reference offers a pick of values instead of the text; isEmpty
	// takes no value.
	pick(`#cond-1-1-operator`, "include")
	// The refusal was of the node as it was: edited, the node and its
	// row no longer show it.
	waitFor(count(elseIf+`[data-condition="1"] .field-problem`) + ` === 0 && ` + count(`[data-node-id="check"] .step-problem`) + ` === 0`)
	setText(`#cond-1-1-value`, "sandbox")
	waitFor(`document.querySelector("#cond-1-1-value").value === "sandbox"`)
	pick(`#cond-1-0-operator`, "equalTo")
	pick(`#cond-1-0-given-as`, "reference")
	waitFor(`document.querySelector("#cond-1-0-value").tagName === "SELECT"`)
	pick(`#cond-1-0-operator`, "isNotEmpty")
	waitFor(`document.querySelector("#cond-1-0-value") === null && document.querySelector("#cond-1-0-given-as") === null`)
	pick(`#cond-1-join`, "OR")
	waitFor(`document.querySelector(` + q(elseIf+`.join-word`) + `).textContent === "or"`)
	showField("ifElseList")
	e.screenshot(t, tb, "logic-condition.png")
	tb.do(t, chromedp.EmulateViewport(390, 844))
	show(elseIf)
	e.screenshot(t, tb, "logic-condition-phone.png")
	show(elseIf + `[data-condition="1"]`)
	e.screenshot(t, tb, "logic-condition-phone-2.png")
	if w := tb.js(t, `(() => { const p = document.querySelector(".panel"); return p.scrollWidth > p.clientWidth ? "wider: " + p.scrollWidth + " > " + p.clientWidth : ""; })()`); w != "" {
		t.Errorf("at 390 px the panel scrolls sideways (%s)", w)
	}
	tb.do(t, chromedp.EmulateViewport(1280, 800))

	// The first condition of ELSE IF 1 and the IF branch go: ELSE IF 1 is
	// IF now, its edge with it.
	tb.do(t, chromedp.Click(chromedp.CSS(elseIf+`[data-condition="0"] .remove-condition`)))
	waitFor(count(elseIf+`[data-condition]`) + ` === 1`)
	tb.do(t, chromedp.Click(chromedp.CSS(field+`[data-branch="IF"] .remove-branch`)))
	waitFor(count(field+`[data-branch]`) + ` === 2`)
	if got := texts(`.react-flow__node[data-id="check"] .step-branch`); got != "IF|ELSE" {
		t.Errorf("the node's handles are %q, want IF|ELSE", got)
	}
	if got := tb.js(t, `document.querySelector("#cond-0-0-value").value`); got != "sandbox" {
		t.Errorf("the remaining branch's value is %q", got)
	}

	// The variable update: the mood takes the question (a reference);
	// a second row counts visits, typed as a number.
	tb.openNode(t, "set")
	updates := `.panel [data-field="updateList"] `
	waitFor(count(updates+`[data-update]`) + ` === 1`)
	if got := tb.js(t, `[...document.querySelectorAll("#update-0-variable option")].map((o) => o.value).join(",")`); got != ",{{$VARIABLE_NODE_ID.mood$}},{{$VARIABLE_NODE_ID.visits$}}" {
		t.Errorf("the variables offered are %q, want the app's two (not the system's)", got)
	}
	pick(`#update-0-given-as`, "reference")
	pick(`#update-0-value`, "{{$start.userChatInput$}}")
	tb.do(t, chromedp.Click(chromedp.CSS(updates+`.add-update`)))
	waitFor(count(updates+`[data-update]`) + ` === 2`)
	pick(`#update-1-variable`, "{{$VARIABLE_NODE_ID.visits$}}")
	tb.typeInto(t, `#update-1-value`, "3")
	leave()
	showField("updateList")
	e.screenshot(t, tb, "logic-update.png")
	tb.do(t, chromedp.EmulateViewport(390, 844))
	show(updates + `[data-update="1"]`)
	e.screenshot(t, tb, "logic-update-phone.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))

	save(t, tb, "All changes saved")
	got, err := e.apps.Get(ctx, "logic")
	if err != nil {
		t.Fatal(err)
	}
	input := func(node, key, want string) {
		t.Helper()
		for _, n := range got.Graph.Nodes {
			if n.NodeID != node {
				continue
			}
			var have, wanted any
			if err := json.Unmarshal(n.Inputs[key], &have); err != nil {
				t.Fatalf("%s.%s: %v", node, key, err)
			}
			_ = json.Unmarshal([]byte(want), &wanted)
			if !reflect.DeepEqual(have, wanted) {
				t.Errorf("saved %s.%s:\n got %s\nwant %s", node, key, n.Inputs[key], want)
			}
			return
		}
		t.Errorf("no node %s saved", node)
	}
	// The join chosen stays with the branch, though one condition needs none.
	input("check", "ifElseList", `[{"condition":"OR","list":[{"variable":"{{$start.userChatInput$}}","condition":"include","value":"sandbox","valueType":"input"}]}]`)
	input("set", "updateList", `[{"variable":"{{$VARIABLE_NODE_ID.mood$}}","value":"{{$start.userChatInput$}}","valueType":"string","renderType":"reference"},
		{"variable":"{{$VARIABLE_NODE_ID.visits$}}","value":3,"valueType":"number","renderType":"input"}]`)
	var edges []string
	for _, ed := range got.Graph.Edges {
		if ed.Source == "check" {
			edges = append(edges, ed.Target+"#"+ed.SourceHandle)
		}
	}
	if strings.Join(edges, ",") != "yes#IF,set#ELSE" {
		t.Errorf("the condition's saved edges are %v, want yes#IF, set#ELSE", edges)
	}

	// A debug run: a question about the sandbox takes IF, another ELSE,
	// where the updated variables answer.
	tb.do(t, chromedp.Click(chromedp.CSS(`.react-flow__pane`)))
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .debug-toggle`)), chromedp.WaitVisible(chromedp.CSS(`.debug-ask input`)))
	answers := `[...document.querySelectorAll(".debug-answer")].map((p) => p.textContent)`
	ask := func(question string, turns int) {
		t.Helper()
		tb.typeInto(t, `.debug-ask input`, question)
		waitFor(`!document.querySelector(".debug-ask button[type=submit]").disabled`)
		tb.do(t, chromedp.Click(chromedp.CSS(`.debug-ask button[type=submit]`)))
		// "…" while the run is on its way
		waitFor(answers + `.length === ` + strconv.Itoa(turns) + ` && !` + answers + `.includes("…")`)
	}
	ask("is the sandbox up?", 1)
	ask("hello world", 2)
	if got := tb.js(t, answers+`.join("|")`); got != "IF: about the sandbox|ELSE: hello world / 3" {
		t.Errorf("the debug run answered %q, want IF for the sandbox and ELSE with the updated variables", got)
	}
	e.screenshot(t, tb, "logic-debug.png")

	// In Chinese, the same editors (a condition added to show the join).
	tb.do(t, chromedp.Navigate(e.url+"/apps/logic/flow?lang=zh"))
	waitFor(count(".react-flow__node") + ` === 5`)
	tb.openNode(t, "check")
	waitFor(count(field+`[data-branch]`) + ` === 2`)
	if got := tb.js(t, `document.querySelector("#cond-0-0-operator").selectedOptions[0].textContent`); got != "包含" {
		t.Errorf("include reads %q in Chinese", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(field+`.add-condition`)))
	waitFor(count(field+`[data-branch="IF"] [data-condition]`) + ` === 2`)
	showField("ifElseList")
	e.screenshot(t, tb, "logic-condition-zh.png")
	tb.do(t, chromedp.EmulateViewport(390, 844))
	show(field + `[data-condition="1"]`)
	e.screenshot(t, tb, "logic-condition-zh-phone.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))
	tb.openNode(t, "set")
	waitFor(count(updates+`[data-update]`) + ` === 2`)
	showField("updateList")
	e.screenshot(t, tb, "logic-update-zh.png")
	tb.do(t, chromedp.EmulateViewport(390, 844))
	showField("updateList")
	e.screenshot(t, tb, "logic-update-zh-phone.png")
}

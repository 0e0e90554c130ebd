package web_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
)

// Building an app on the canvas from a start node alone, in Chromium on
// the real engine: a node found in the palette and added, its text set in
// the side panel with a value picked from what runs before it, connected
// by dragging from a handle to a handle, saved, and chatted with. A node
// nothing leads to is refused by the engine, named on the node itself;
// copy and paste, a note and a global variable are kept with the graph.
func TestFlowCanvasBuildsAnApp(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	var start nodes.Graph
	start.Nodes = []nodes.Node{{NodeID: "start", Type: "workflowStart", Name: "Start"}}
	if err := e.apps.Put(ctx, apps.App{ID: "built", Name: "Built on the canvas", OwnerID: "u:" + enginetest.AdminName, Graph: start}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	tb.do(t, chromedp.Navigate(e.url+"/apps/built/flow?lang=en"))
	count := func(css string) string { return `document.querySelectorAll(` + strconv.Quote(css) + `).length` }
	waitFor := func(cond string) {
		t.Helper()
		run(t, tb, poll[bool](`() => `+cond))
	}
	waitFor(count(".palette-item") + ` > 3`)
	waitFor(count(".react-flow__node") + ` === 1`)

	// The palette's search finds the answer node in either language's
	// words; a click adds it, selected, with its settings in the panel.
	tb.typeInto(t, ".palette-search", "sends a text")
	waitFor(count(".palette-item") + ` === 1`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.palette-item[data-type="answerNode"]`)))
	waitFor(count(".react-flow__node") + ` === 2`)
	waitFor(`document.querySelector(".panel #node-name") !== null`)
	if got := tb.js(t, `document.querySelector(".panel #node-name").value`); got != "Answer" {
		t.Errorf("the new node is named %q, want its type's label", got)
	}
	// Its text: typed, then a value picked from what runs before it. The
	// node is not connected yet, so nothing runs before it but the
	// variables; connect first.
	e.screenshot(t, tb, "canvas-added.png")
	tb.connect(t, "start", "", "answerNode1")
	waitFor(count(".react-flow__edge") + ` === 1`)
	tb.openNode(t, "answerNode1")
	waitFor(`document.querySelector('.panel [data-field="text"] textarea') !== null`)
	tb.typeInto(t, `.panel [data-field="text"] textarea`, "You said: ")
	tb.do(t, chromedp.Click(chromedp.CSS(`.panel #node-name`))) // the text is committed when it loses the focus
	// Pick the start's question from the list of values before the node.
	options := tb.js(t, `[...document.querySelectorAll('.panel [data-field="text"] .insert-reference option')].map((o) => o.textContent).join("|")`)
	if !strings.Contains(options, "Start · User question") {
		t.Errorf("the values to insert are %q, want the start's question among them", options)
	}
	tb.js(t, `(() => { const s = document.querySelector('.panel [data-field="text"] .insert-reference'); s.value = "{{$start.userChatInput$}}"; s.dispatchEvent(new Event("change", { bubbles: true })); return ""; })()`)
	waitFor(`document.querySelector('.panel [data-field="text"] textarea').value === "You said: {{$start.userChatInput$}}"`)
	save(t, tb, "All changes saved")
	got, err := e.apps.Get(ctx, "built")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Graph.Nodes) != 2 || string(got.Graph.Nodes[1].Inputs["text"]) != `"You said: {{$start.userChatInput$}}"` ||
		len(got.Graph.Edges) != 1 || got.Graph.Edges[0] != (nodes.Edge{Source: "start", Target: "answerNode1"}) {
		t.Fatalf("saved graph %+v", got.Graph)
	}

	// A node nothing leads to: the engine refuses the graph and the
	// canvas marks the node with what to do; nothing is saved.
	// A new search replaces the text (React reads the input event).
	tb.js(t, `(() => { const i = document.querySelector(".palette-search"); Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set.call(i, "AI chat"); i.dispatchEvent(new Event("input", { bubbles: true })); return ""; })()`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.palette-item[data-type="chatNode"]`)))
	waitFor(count(".react-flow__node") + ` === 3`)
	tb.expected = []string{"status of 422"} // the refusal, on purpose
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.primary`)))
	waitFor(`document.querySelector(".step-bad") !== null`)
	if msg := tb.text(t, `[data-node-id="chatNode1"] .step-problem`); !strings.Contains(msg, "nothing leads to this node") {
		t.Errorf("the refused node says %q", msg)
	}
	if bar := tb.text(t, ".problem"); !strings.Contains(bar, "refused") || !strings.Contains(bar, "Nothing was saved") {
		t.Errorf("the page says %q", bar)
	}
	if still, _ := e.apps.Get(ctx, "built"); len(still.Graph.Nodes) != 2 {
		t.Fatalf("a refused graph was saved: %+v", still.Graph)
	}
	e.screenshot(t, tb, "canvas-refused.png")

	// Copy and paste the selected node (Ctrl+C, Ctrl+V): a second one,
	// with a fresh id; then delete both and add a note.
	tb.openNode(t, "chatNode1")
	tb.do(t, chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	waitFor(count(`.react-flow__node[data-id="chatNode1_2"]`) + ` === 1`)
	tb.do(t, chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)), chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	waitFor(count(".react-flow__node") + ` === 2`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .add-note`)))
	waitFor(count(".note-card textarea") + ` === 1`)
	tb.typeInto(t, `.note-card textarea`, "Greets the user")
	tb.do(t, chromedp.Click(chromedp.CSS(`.palette-search`)))

	// A global variable, from the app's panel (nothing selected).
	tb.do(t, chromedp.Click(chromedp.CSS(`.react-flow__pane`)))
	waitFor(`document.querySelector(".panel .add-variable") !== null`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.panel .add-variable`)))
	waitFor(count(`.panel [data-variable="var1"]`) + ` === 1`)
	save(t, tb, "All changes saved")
	got, err = e.apps.Get(ctx, "built")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Graph.Notes) != 1 || got.Graph.Notes[0].Text != "Greets the user" || len(got.Graph.Variables) != 1 || got.Graph.Variables[0].Key != "var1" {
		t.Fatalf("saved notes %+v, variables %+v", got.Graph.Notes, got.Graph.Variables)
	}
	e.screenshot(t, tb, "canvas-built.png")
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/built/flow?lang=en"))
	waitFor(count(".react-flow__node") + ` === 3`)
	e.screenshot(t, tb, "canvas-built-phone.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))

	// The answer node tried by itself, with a value typed for its text;
	// the value is kept for the next try.
	tb.openNode(t, "answerNode1")
	tb.do(t, chromedp.Click(chromedp.CSS(`.try-node summary`)), chromedp.WaitVisible(chromedp.ID("try-inputs")))
	if got := run(t, tb, chromedp.Value(chromedp.ID("try-inputs"))); !strings.Contains(got, `"text": ""`) {
		t.Errorf("the inputs to type start as %q, want the referencing input", got)
	}
	tb.js(t, `(() => { const i = document.getElementById("try-inputs"); Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(i, '{"text": "typed by hand"}'); i.dispatchEvent(new Event("input", { bubbles: true })); return ""; })()`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.try-run`)))
	waitFor(`(document.querySelector(".try-result .debug-answer") || {}).textContent === "typed by hand"`)
	if got := tb.js(t, `localStorage.getItem("flowbox.try.built.answerNode1")`); !strings.Contains(got, "typed by hand") {
		t.Errorf("the typed inputs were not kept: %q", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.react-flow__pane`)))

	// Publish the draft as version 1 with a note; the list shows it.
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .versions-toggle`)), chromedp.WaitVisible(chromedp.ID("version-note")))
	tb.typeInto(t, "#version-note", "first cut")
	tb.do(t, chromedp.Click(chromedp.CSS(`.publish-version`)))
	waitFor(count(`.version-list li[data-version="1"] .badge`) + ` === 1`)
	if got := tb.text(t, `.versions [role=status]`); got != "Version 1 is published." {
		t.Errorf("after publishing the page says %q", got)
	}
	if app, _ := e.apps.Get(ctx, "built"); app.PublishedVersionID == "" {
		t.Error("the app has no published version after Publish")
	}
	e.screenshot(t, tb, "canvas-versions.png")
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .versions-toggle`)))

	// A debug run from the canvas: the answer, the nodes lit as they ran,
	// and the run details of both.
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .debug-toggle`)), chromedp.WaitVisible(chromedp.CSS(`.debug-ask input`)))
	tb.typeInto(t, `.debug-ask input`, "hello debug")
	tb.do(t, chromedp.Click(chromedp.CSS(`.debug-ask button[type=submit]`)))
	waitFor(`(document.querySelector(".debug-answer") || {}).textContent === "You said: hello debug"`)
	waitFor(count(`.react-flow__node[data-id="answerNode1"] .step-done`) + ` === 1 && ` + count(`.react-flow__node[data-id="start"] .step-done`) + ` === 1`)
	waitFor(count(".run-details .run-node") + ` === 2`)
	if got := tb.js(t, `[...document.querySelectorAll(".run-details .run-node")].map((li) => li.dataset.node).join(",")`); got != "start,answerNode1" {
		t.Errorf("the run details list %q, want start,answerNode1", got)
	}
	if got := tb.js(t, `document.querySelector('.run-node[data-node="answerNode1"] pre:last-of-type').textContent`); !strings.Contains(got, `"answerText": "You said: hello debug"`) {
		t.Errorf("the answer node's outputs in the run details: %s", got)
	}
	e.screenshot(t, tb, "canvas-debug.png")
	tb.do(t, chromedp.EmulateViewport(390, 844))
	e.screenshot(t, tb, "canvas-debug-phone.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))

	// The app answers as built; its variable is asked on the chat page
	// and reaches the run.
	built, err := e.apps.Get(ctx, "built")
	if err != nil {
		t.Fatal(err)
	}
	built.Graph.Nodes[1].Inputs["text"] = []byte(`"You said: {{$start.userChatInput$}} ({{$VARIABLE_NODE_ID.var1$}})"`)
	if err := e.apps.Put(ctx, built, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Chats run the published version: publish the changed draft.
	if _, err := e.apps.Publish(ctx, "built", apps.Publication{Note: "with the variable", AuthorID: "u:" + enginetest.AdminName}, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.openChat(t, tb, "built")
	tb.setValue(t, `#chat-variables [data-variable="var1"] input`, "blue")
	tb.send(t, "hello canvas")
	tb.waitAnswer(t, "You said: hello canvas (blue)")
	// The app's owner sees the turn's run details, live and after a reload.
	waitFor(count("#messages .run-details .run-node") + ` === 2`)
	e.screenshot(t, tb, "chat-variables.png")
	tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chat-form")))
	waitFor(count("#messages .run-details .run-node") + ` === 2`)
	if got := tb.js(t, `[...document.querySelectorAll("#messages .run-node")].map((li) => li.dataset.node).join(",")`); got != "start,answerNode1" {
		t.Errorf("the stored run details list %q", got)
	}
}

// A debug run that pauses at a user-select node: the canvas shows the
// options, and the one clicked takes its branch.
func TestFlowDebugAsks(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(`{"nodes":[
		{"nodeId":"start","type":"workflowStart","name":"Start"},
		{"nodeId":"pick","type":"userSelect","name":"Pick","inputs":{"description":"Tea or coffee?","userSelectOptions":[{"value":"Tea","key":"tea"},{"value":"Coffee","key":"coffee"}]}},
		{"nodeId":"t","type":"answerNode","name":"Tea","inputs":{"text":"Here is your tea"}},
		{"nodeId":"c","type":"answerNode","name":"Coffee","inputs":{"text":"Here is your coffee"}}],
		"edges":[{"source":"start","target":"pick"},{"source":"pick","target":"t","sourceHandle":"tea"},{"source":"pick","target":"c","sourceHandle":"coffee"}]}`), &g); err != nil {
		t.Fatal(err)
	}
	if err := e.apps.Put(ctx, apps.App{ID: "asks", Name: "Asks", OwnerID: "u:" + enginetest.AdminName, Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	tb.do(t, chromedp.Navigate(e.url+"/apps/asks/flow?lang=en"))
	run(t, tb, poll[bool](`() => document.querySelectorAll(".react-flow__node").length === 4`))
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .debug-toggle`)), chromedp.WaitVisible(chromedp.CSS(`.debug-ask input`)))
	tb.typeInto(t, `.debug-ask input`, "a drink please")
	tb.do(t, chromedp.Click(chromedp.CSS(`.debug-ask button[type=submit]`)))
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(`.debug-question-card .debug-option`)))
	if got := tb.text(t, `.debug-question-card p`); got != "Tea or coffee?" {
		t.Errorf("the question reads %q", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.debug-option:last-of-type`)))
	run(t, tb, poll[bool](`() => [...document.querySelectorAll(".debug-answer")].some((p) => p.textContent === "Here is your coffee")`))
	e.screenshot(t, tb, "canvas-debug-asks.png")
}

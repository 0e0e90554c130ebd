package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/nodes"
)

// TestFlowCanvasScenario is the builder's whole path, in Chromium on the
// real engine, as a FastGPT builder would take it: a new app from the app
// list; on its canvas a question classifier between the start and the
// agent, whose second class leads to a code node; both branches meet at
// an answer; the agent's sandbox switched on in its panel. Published as
// a version, the app is chatted with on the chat page (the agent runs a
// command in the chat's sandbox) and through the chat API with an app key
// made on its Publish page (the code runs, in the sandbox too); the run
// details list the nodes that ran, and only those.
func TestFlowCanvasScenario(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	tb := e.signIn(t, "alice")
	appID := e.newAppOnCanvas(t, tb, "Triage")
	count := func(css string) string { return `document.querySelectorAll(` + strconv.Quote(css) + `).length` }
	waitFor := func(cond string) {
		t.Helper()
		run(t, tb, poll[bool](`() => `+cond))
	}
	add := func(search, typ, id string) {
		t.Helper()
		tb.setValue(t, ".palette-search", search)
		tb.do(t, chromedp.Click(chromedp.CSS(`.palette-item[data-type="`+typ+`"]`)))
		waitFor(count(`.react-flow__node[data-id="`+id+`"]`) + ` === 1`)
		tb.tidy(t)
	}

	// The starter's edge from the start to the agent goes: the classifier
	// comes between them.
	waitFor(count(`[data-testid="rf__edge-start->agent"] path`) + ` > 0`)
	tb.settled(t)
	at := run(t, tb, chromedp.Evaluate[[]float64](`(() => {
		const p = document.querySelector('[data-testid="rf__edge-start->agent"] path');
		const m = p.getPointAtLength(p.getTotalLength() / 2);
		const q = new DOMPoint(m.x, m.y).matrixTransform(p.getScreenCTM());
		return [q.x, q.y];
	})()`))
	tb.do(t,
		chromedp.MouseClickXY(at[0], at[1]),
		chromedp.KeyEvent("\b"), // Backspace deletes the selected edge
	)
	waitFor(count(".react-flow__edge") + ` === 0`)

	add("classif", "classifyQuestion", "classifyQuestion1")
	// Its two classes, described and keyed; the keys name its branches.
	tb.openNode(t, "classifyQuestion1")
	tb.setValue(t, "#field-agents-0-value", "Run a shell command in the sandbox")
	tb.setValue(t, "#field-agents-0-key", "shell")
	tb.setValue(t, "#field-agents-1-value", "Compute a number with code")
	tb.setValue(t, "#field-agents-1-key", "compute")
	waitFor(count(`.react-flow__node[data-id="classifyQuestion1"] .react-flow__handle[data-handleid="compute"]`) + ` === 1`)
	tb.connect(t, "start", "", "classifyQuestion1")
	tb.connect(t, "classifyQuestion1", "shell", "agent")

	// The agent's sandbox, on.
	tb.openNode(t, "agent")
	tb.do(t, chromedp.Click(chromedp.ID("field-useAgentSandbox")))
	waitFor(`document.getElementById("field-useAgentSandbox").checked`)

	// The code node: Python whose main counts the words of the question,
	// given as a custom input picked from before the node, and returns the
	// result it declares.
	add("code", "code", "code1")
	tb.connect(t, "classifyQuestion1", "compute", "code1")
	tb.openNode(t, "code1")
	tb.setValue(t, "#field-codeType", "py")
	tb.setValue(t, `.panel [data-field="code"] textarea`, "def main(q):\n    return {'result': len(q.split())}\n")
	tb.do(t, chromedp.Click(chromedp.CSS(`.panel .add-custom`)))
	tb.setValue(t, "#custom-key-0", "2q") // not a name: said, not kept
	waitFor(`(document.querySelector('.panel [data-custom="input1"] .field-problem') || {}).textContent === "A name is letters, digits and _ (up to 64), not starting with a digit."`)
	tb.setValue(t, "#custom-key-0", "q")
	waitFor(count(`.panel [data-custom="q"]`) + ` === 1`)
	tb.setValue(t, `.panel [data-custom="q"] .custom-mode`, "reference")
	tb.setValue(t, "#custom-value-0", "{{$start.userChatInput$}}")
	tb.do(t, chromedp.Click(chromedp.CSS(`.panel .outputs button:last-child`)))
	tb.setValue(t, "#output-0", "result")
	tb.setValue(t, `.panel .outputs .row select`, "number")
	e.screenshot(t, tb, "canvas-code-panel.png")

	// The answer both branches meet at.
	add("answer", "answerNode", "answerNode1")
	tb.openNode(t, "answerNode1")
	tb.setValue(t, `.panel [data-field="text"] textarea`, "Handled as: {{$classifyQuestion1.cqResult$}}. {{$code1.result$}}")
	tb.connect(t, "agent", "", "answerNode1")
	tb.connect(t, "code1", "", "answerNode1")
	tb.tidy(t)
	save(t, tb, "All changes saved")
	e.screenshot(t, tb, "canvas-scenario.png")

	app, err := e.apps.Get(ctx, appID)
	if err != nil {
		t.Fatal(err)
	}
	wantEdges := []nodes.Edge{
		{Source: "start", Target: "classifyQuestion1"},
		{Source: "classifyQuestion1", Target: "agent", SourceHandle: "shell"},
		{Source: "classifyQuestion1", Target: "code1", SourceHandle: "compute"},
		{Source: "agent", Target: "answerNode1"},
		{Source: "code1", Target: "answerNode1"},
	}
	for _, w := range wantEdges {
		found := false
		for _, got := range app.Graph.Edges {
			found = found || got == w
		}
		if !found {
			t.Errorf("the saved graph has no edge %+v; its edges: %+v", w, app.Graph.Edges)
		}
	}
	if len(app.Graph.Edges) != len(wantEdges) {
		t.Errorf("the saved graph has %d edges, want %d: %+v", len(app.Graph.Edges), len(wantEdges), app.Graph.Edges)
	}
	for _, n := range app.Graph.Nodes {
		switch n.NodeID {
		case "agent":
			if string(n.Inputs["useAgentSandbox"]) != "true" {
				t.Errorf("the agent's useAgentSandbox is saved as %s", n.Inputs["useAgentSandbox"])
			}
		case "code1":
			if string(n.Inputs["codeType"]) != `"py"` || string(n.Inputs["q"]) != `"{{$start.userChatInput$}}"` || n.Inputs["input1"] != nil ||
				len(n.Outputs) != 1 || n.Outputs[0].Key != "result" || n.Outputs[0].Type != "number" {
				t.Errorf("the code node is saved as %s, outputs %+v", n.Inputs, n.Outputs)
			}
		}
	}

	// Publish it; chats run the published version.
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .versions-toggle`)), chromedp.WaitVisible(chromedp.ID("version-note")))
	tb.typeInto(t, "#version-note", "classifier, agent and code")
	tb.do(t, chromedp.Click(chromedp.CSS(`.publish-version`)))
	waitFor(count(`.version-list li[data-version="1"] .badge`) + ` === 1`)

	// The chat page: the shell class; the agent runs the command in the
	// chat's sandbox, its card shows the output, and the answer goes on
	// with the answer node's text.
	e.openChat(t, tb, appID)
	tb.send(t, "Run this shell command in the sandbox:\n$ echo built-on-the-canvas")
	tb.waitAnswer(t, "Handled as: Run a shell command in the sandbox.")
	if got := tb.js(t, `document.querySelector("#messages .tool-card [data-role=stdout]").textContent.trim()`); got != "built-on-the-canvas" {
		t.Errorf("the command's card shows %q, want the command's output", got)
	}
	// The owner sees the turn's run details: the nodes that ran, not the
	// code node of the branch not taken.
	waitFor(count("#messages .run-details .run-node") + ` === 4`)
	if got := tb.js(t, `[...document.querySelectorAll("#messages .run-node")].map((li) => li.dataset.node).join(",")`); got != "start,classifyQuestion1,agent,answerNode1" {
		t.Errorf("the run details list %q", got)
	}
	e.screenshot(t, tb, "chat-scenario.png")

	// An app key, made on the app's Publish page.
	tb.do(t,
		chromedp.Navigate(e.url+"/apps/"+appID+"/edit#publish"),
		chromedp.WaitVisible(chromedp.ID("new-app-key-name")),
		chromedp.SendKeys(chromedp.ID("new-app-key-name"), "backend"),
		chromedp.Click(chromedp.CSS(`#new-app-key button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("app-key-secret")),
	)
	secret := run(t, tb, chromedp.Value(chromedp.CSS(`#app-key-secret input`)))

	// The chat API with the key: the code class; the code runs and the
	// answer carries its result (the question's six words); detail gives
	// every node's record.
	body, _ := json.Marshal(map[string]any{"customUid": "program-1", "detail": true,
		"messages": []map[string]string{{"role": "user", "content": "Please compute a number with code"}}})
	req, err := http.NewRequest("POST", e.url+"/api/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the chat API with the app's key: %d %s", resp.StatusCode, raw)
	}
	var answer struct {
		Choices []struct {
			Message struct{ Content string }
		}
		ResponseData []nodes.NodeResponse
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(answer.Choices) != 1 || answer.Choices[0].Message.Content != "Handled as: Compute a number with code. 6" {
		t.Errorf("the API's answer: %s", raw)
	}
	var ran []string
	for _, r := range answer.ResponseData {
		ran = append(ran, r.NodeID)
		if r.NodeID == "code1" && (r.Outputs["result"] != float64(6) || r.Error != "") {
			t.Errorf("the code node's record: %+v", r)
		}
	}
	if strings.Join(ran, ",") != "start,classifyQuestion1,code1,answerNode1" {
		t.Errorf("the API's run details list %v", ran)
	}
}

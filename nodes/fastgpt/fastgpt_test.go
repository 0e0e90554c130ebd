package fastgpt_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/fastgpt"
)

// The fixtures under testdata are written in FastGPT's export shape
// ({nodes, edges, chatConfig}), modelled on its template apps. The
// templates under testdata/templates stand in for the node types this
// build may not have yet (in FastGPT's keys), so that the mapping of
// branches, texts and code is tested whatever the build has.

// withFixtures is the build's templates with the fixture templates of
// types in place of (or besides) the build's own.
func withFixtures(t *testing.T, types ...string) nodes.Templates {
	t.Helper()
	ts := templates(t)
	for _, typ := range types {
		data, err := os.ReadFile(filepath.Join("testdata", "templates", typ+".json"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := nodes.ParseTemplate(typ, data)
		if err != nil {
			t.Fatal(err)
		}
		ts[typ] = tmpl
	}
	return ts
}

// without is the build's templates without types (whether or not the
// build has them).
func without(t *testing.T, types ...string) nodes.Templates {
	ts := templates(t)
	for _, typ := range types {
		delete(ts, typ)
	}
	return ts
}

// importFile imports a fixture and fails unless the graph passes Validate.
func importFile(t *testing.T, name string, ts nodes.Templates) *fastgpt.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return importData(t, data, ts)
}

func importData(t *testing.T, data []byte, ts nodes.Templates) *fastgpt.Result {
	t.Helper()
	res, err := fastgpt.Import(data, ts)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if err := ts.Validate(&res.Graph); err != nil {
		t.Fatalf("the imported graph is invalid: %v", err)
	}
	return res
}

func node(t *testing.T, g nodes.Graph, id string) nodes.Node {
	t.Helper()
	for _, n := range g.Nodes {
		if n.NodeID == id {
			return n
		}
	}
	t.Fatalf("no node %q in %s", id, ids(g))
	return nodes.Node{}
}

func ids(g nodes.Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		out = append(out, n.NodeID+":"+n.Type)
	}
	return out
}

// wantInputs checks a node's inputs, as compact JSON.
func wantInputs(t *testing.T, n nodes.Node, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for k, raw := range n.Inputs {
		got[k] = string(raw)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("node %s inputs:\n got  %v\n want %v", n.NodeID, got, want)
	}
}

func wantEdges(t *testing.T, g nodes.Graph, want ...nodes.Edge) {
	t.Helper()
	if want == nil {
		want = []nodes.Edge{}
	}
	if !reflect.DeepEqual(g.Edges, want) {
		t.Errorf("edges:\n got  %+v\n want %+v", g.Edges, want)
	}
}

// field finds the report line of a node's field; reason must contain
// every part.
func wantField(t *testing.T, r fastgpt.Report, nodeID, field string, parts ...string) {
	t.Helper()
	for _, f := range r.Fields {
		if f.NodeID == nodeID && f.Field == field && containsAll(f.Reason, parts) {
			return
		}
	}
	t.Errorf("no report line for %s %s containing %q in %+v", nodeID, field, parts, r.Fields)
}

func noField(t *testing.T, r fastgpt.Report, nodeID, field string) {
	t.Helper()
	for _, f := range r.Fields {
		if f.NodeID == nodeID && f.Field == field {
			t.Errorf("unexpected report line %+v", f)
		}
	}
}

func wantSkipped(t *testing.T, r fastgpt.Report, nodeID, typ string, parts ...string) {
	t.Helper()
	for _, s := range r.Skipped {
		if s.NodeID == nodeID && s.Type == typ && containsAll(s.Reason, parts) {
			return
		}
	}
	t.Errorf("%s (%s) not skipped for %q: %+v", nodeID, typ, parts, r.Skipped)
}

func wantProblems(t *testing.T, r fastgpt.Report, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, p := range r.Problems {
		got[p.NodeID] = p.Message
	}
	if len(got) != len(want) {
		t.Errorf("problems %+v, want one each for %v", r.Problems, want)
	}
	for id, part := range want {
		if !strings.Contains(got[id], part) {
			t.Errorf("problem of %s: %q, want it to say %q", id, got[id], part)
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func imported(r fastgpt.Report) []string {
	var out []string
	for _, n := range r.Imported {
		out = append(out, n.NodeID+":"+n.Type+":"+n.Name)
	}
	return out
}

// start → classifyQuestion (two classes, and one whose key Flowbox
// refuses) → an answer, and → knowledge-base search (no such type) → a
// chat node; global variables of each FastGPT type; a comment.
func TestClassifier(t *testing.T) {
	res := importFile(t, "classify.json", withFixtures(t, "classifyQuestion"))
	g, r := res.Graph, res.Report

	if got, want := imported(r), []string{"448745:workflowStart:Start", "cq:classifyQuestion:Classify", "hello:answerNode:Greet", "chat:chatNode:Answer"}; !reflect.DeepEqual(got, want) {
		t.Errorf("imported %v, want %v", got, want)
	}
	if len(r.Skipped) != 1 {
		t.Errorf("skipped %+v, want only the search", r.Skipped)
	}
	wantSkipped(t, r, "search", "datasetSearchNode", "knowledge bases")
	// The class edges keep their class keys; the search's edges go with it.
	wantEdges(t, g, nodes.Edge{Source: "448745", Target: "cq"}, nodes.Edge{Source: "cq", Target: "hello", SourceHandle: "hi"})

	wantInputs(t, node(t, g, "cq"), map[string]string{
		"model":         `"gpt-4o-mini"`,
		"systemPrompt":  `"The user speaks {{$VARIABLE_NODE_ID.lang$}}."`,
		"history":       `6`,
		"userChatInput": `"{{$448745.userChatInput$}}"`,
		"agents":        `[{"key":"hi","value":"Greetings"},{"key":"other","value":"Anything else"}]`,
	})
	wantField(t, r, "cq", "agents[2]", "item 2 of agents is left out", "does not match pattern")
	wantInputs(t, node(t, g, "hello"), map[string]string{
		"text": `"Hello! You said {{$448745.userChatInput$}} ({{$cq.cqResult$}})."`,
	})
	chat := node(t, g, "chat")
	wantInputs(t, chat, map[string]string{
		"model":         `"flowbox-demo"`,
		"temperature":   `1`,
		"history":       `4`,
		"systemPrompt":  `"Answer in {{$VARIABLE_NODE_ID.lang$}} to {{$VARIABLE_NODE_ID.name$}}."`,
		"userChatInput": `"{{$448745.userChatInput$}}"`,
	})
	if p := chat.Position; p == nil || *p != (nodes.Position{X: 1200, Y: 200}) {
		t.Errorf("chat position %v, want FastGPT's (1200, 200)", p)
	}
	wantField(t, r, "chat", "temperature", "FastGPT's temperature 5", "is 1 on Flowbox's 0–2 scale")
	wantField(t, r, "chat", "maxToken", "field maxToken of node Answer (chatNode) is not used by Flowbox")
	wantField(t, r, "chat", "quoteQA", "not used by Flowbox", "knowledge")
	// FastGPT's own defaults and empty fields say nothing.
	noField(t, r, "chat", "isResponseAnswerText")
	noField(t, r, "chat", "quoteTemplate")
	noField(t, r, "", "chatConfig.scheduledTriggerConfig")
	noField(t, r, "userGuide", "questionGuide")
	wantField(t, r, "", "chatConfig.welcomeText", "welcome")

	want := []nodes.Variable{
		{Key: "lang", Label: "Language", Type: "select", Required: true, Options: []string{"en", "zh"}, Default: json.RawMessage(`"en"`)},
		{Key: "name", Type: "string", Description: "Who asks"},
		{Key: "count", Label: "Count", Type: "number", Default: json.RawMessage(`3`)},
		{Key: "strict", Label: "Strict", Type: "boolean", Default: json.RawMessage(`true`)},
		{Key: "ids", Label: "Ids", Type: "json", Default: json.RawMessage(`[1,2,3]`)},
		{Key: "tags", Label: "Tags", Type: "json"},
	}
	if !reflect.DeepEqual(g.Variables, want) {
		t.Errorf("variables:\n got  %+v\n want %+v", g.Variables, want)
	}
	wantField(t, r, "", "variables.tags", "multiple choice")
	wantField(t, r, "", "variables.语言", "not one Flowbox accepts", "left out")

	if want := []nodes.Note{{ID: "memo", Text: "Greets, or answers", Position: nodes.Position{X: 0, Y: 300}}}; !reflect.DeepEqual(g.Notes, want) {
		t.Errorf("notes %+v, want %+v", g.Notes, want)
	}
	wantProblems(t, r, map[string]string{"chat": "nothing leads to this node"})
}

// Without a template for classifyQuestion, the classifier is left out
// with its edges, the references to it leave the texts, and the nodes
// after it are named as unreachable.
func TestUnknownType(t *testing.T) {
	res := importFile(t, "classify.json", without(t, "classifyQuestion"))
	g, r := res.Graph, res.Report
	wantSkipped(t, r, "cq", "classifyQuestion", `Flowbox has no node type "classifyQuestion"`)
	wantSkipped(t, r, "search", "datasetSearchNode", "knowledge")
	wantEdges(t, g)
	wantInputs(t, node(t, g, "hello"), map[string]string{"text": `"Hello! You said {{$448745.userChatInput$}} ()."`})
	wantField(t, r, "hello", "text", "references removed from the value: {{$cq.cqResult$}}", `"Classify" (classifyQuestion) was left out`)
	wantProblems(t, r, map[string]string{"hello": "nothing leads to this node", "chat": "nothing leads to this node"})
}

// A loop with its start, a body node and its end; FastGPT's list of
// references becomes one reference; an edge across the loop's border and
// an edge back (a cycle) are left out.
func TestLoop(t *testing.T) {
	ts := templates(t)
	res := importFile(t, "loop.json", ts)
	g, r := res.Graph, res.Report
	if got, want := imported(r), []string{"start:workflowStart:Start", "lp:loop:For each item", "ls:loopStart:Loop start",
		"each:chatNode:Describe", "le:loopEnd:Loop end", "done:answerNode:Results"}; !reflect.DeepEqual(got, want) {
		t.Errorf("imported %v, want %v", got, want)
	}
	for id, parent := range map[string]string{"lp": "", "ls": "lp", "each": "lp", "le": "lp", "done": ""} {
		if got := node(t, g, id).ParentNodeID; got != parent {
			t.Errorf("%s is inside %q, want %q", id, got, parent)
		}
	}
	wantInputs(t, node(t, g, "lp"), map[string]string{"loopInputArray": `"{{$VARIABLE_NODE_ID.items$}}"`})
	wantInputs(t, node(t, g, "ls"), map[string]string{})
	wantInputs(t, node(t, g, "each"), map[string]string{"model": `"flowbox-demo"`, "temperature": `0`, "history": `0`, "userChatInput": `"{{$ls.loopStartInput$}}"`})
	wantInputs(t, node(t, g, "le"), map[string]string{"loopEndInput": `"{{$each.answerText$}}"`})
	wantInputs(t, node(t, g, "done"), map[string]string{"text": `"{{$lp.loopArray$}}"`})
	wantEdges(t, g, nodes.Edge{Source: "start", Target: "lp"}, nodes.Edge{Source: "ls", Target: "each"},
		nodes.Edge{Source: "each", Target: "le"}, nodes.Edge{Source: "lp", Target: "done"})
	wantField(t, r, "start", "edge to each", "crosses a loop's border")
	wantField(t, r, "done", "edge to lp", "cycle", "loop node")
	noField(t, r, "lp", "nodeWidth")
	noField(t, r, "lp", "childrenNodeIdList")
	if want := []nodes.Variable{{Key: "items", Label: "Items", Type: "json", Default: json.RawMessage(`["red","green"]`)}}; !reflect.DeepEqual(g.Variables, want) {
		t.Errorf("variables %+v, want %+v (from the system configuration node)", g.Variables, want)
	}
	if len(r.Skipped) != 0 {
		t.Errorf("skipped %+v, want none", r.Skipped)
	}
	wantProblems(t, r, nil)
	if err := ts.Check(&g); err != nil {
		t.Errorf("the graph would not save: %v", err)
	}
}

// If/else branches, the error branch, a text node's own inputs written
// into its text, a code node's own inputs and outputs, references to
// outputs by FastGPT's random ids, and references inside conditions.
func TestBranchesAndTexts(t *testing.T) {
	res := importFile(t, "branches.json", withFixtures(t, "ifElseNode", "textEditor", "code"))
	g, r := res.Graph, res.Report
	wantEdges(t, g,
		nodes.Edge{Source: "start", Target: "check"},
		nodes.Edge{Source: "check", Target: "join", SourceHandle: "IF"},
		nodes.Edge{Source: "check", Target: "calc", SourceHandle: "ELSE IF 1"},
		nodes.Edge{Source: "check", Target: "other", SourceHandle: "ELSE"},
		nodes.Edge{Source: "join", Target: "say"},
		nodes.Edge{Source: "calc", Target: "say"},
		nodes.Edge{Source: "calc", Target: "oops", SourceHandle: nodes.CatchBranch})
	wantInputs(t, node(t, g, "check"), map[string]string{"ifElseList": `[{"condition":"AND","list":[{"condition":"equalTo","value":"yes","variable":"{{$start.userChatInput$}}"}]},` +
		`{"condition":"OR","list":[{"condition":"equalTo","value":"ask","variable":"{{$VARIABLE_NODE_ID.mode$}}"}]}]`})
	wantInputs(t, node(t, g, "join"), map[string]string{"system_textareaInput": `"Q: {{$start.userChatInput$}} / mode {{$VARIABLE_NODE_ID.mode$}}"`})
	wantField(t, r, "join", "q", "written into the text")
	calc := node(t, g, "calc")
	wantInputs(t, calc, map[string]string{"codeType": `"js"`, "code": `"function main({text}){ return {size: text.length} }"`,
		"text": `"{{$start.userChatInput$}}"`})
	if want := []nodes.NodeOutput{{Key: "size", Type: "number"}}; !reflect.DeepEqual(calc.Outputs, want) {
		t.Errorf("code outputs %+v, want %+v", calc.Outputs, want)
	}
	wantInputs(t, node(t, g, "say"), map[string]string{"text": `"{{$join.system_text$}} has {{$calc.size$}} characters"`})
	wantInputs(t, node(t, g, "oops"), map[string]string{"text": `"Counting failed: {{$calc.error$}}"`})
	if want := []nodes.Variable{{Key: "mode", Label: "Mode", Type: "select", Options: []string{"ask", "tell"}}}; !reflect.DeepEqual(g.Variables, want) {
		t.Errorf("variables %+v, want %+v", g.Variables, want)
	}
	if len(r.Skipped) != 0 || len(r.Problems) != 0 {
		t.Errorf("skipped %+v, problems %+v: want none", r.Skipped, r.Problems)
	}
}

// The tool-call node: its tools (FastGPT's selectedTools handle) are not
// nodes in Flowbox; an empty model leaves the default; the older {{cTime}}
// becomes a system variable; the error branch stays.
func TestToolCall(t *testing.T) {
	res := importFile(t, "tools.json", templates(t))
	g, r := res.Graph, res.Report
	wantSkipped(t, r, "clock", "pluginModule", `a tool of the tool-call node "Agent"`)
	wantInputs(t, node(t, g, "agent"), map[string]string{
		"temperature":     `0`,
		"systemPrompt":    `"It is {{$VARIABLE_NODE_ID.cTime$}}."`,
		"history":         `6`,
		"useAgentSandbox": `true`,
		"userChatInput":   `"{{$workflowStartNodeId.userChatInput$}}"`,
	})
	wantField(t, r, "agent", "model", "no model was chosen")
	noField(t, r, "agent", "temperature")
	wantInputs(t, node(t, g, "after"), map[string]string{"text": `"{{$agent.answerText$}} ()"`})
	wantField(t, r, "after", "text", "{{$clock.time$}}", "was left out")
	wantEdges(t, g, nodes.Edge{Source: "workflowStartNodeId", Target: "agent"},
		nodes.Edge{Source: "agent", Target: "after"}, nodes.Edge{Source: "agent", Target: "after", SourceHandle: nodes.CatchBranch})
	wantProblems(t, r, nil)
}

// A node whose input was given by a node left out keeps the template's
// default, which names the start; FastGPT's start has another id.
func TestDefaultsNameTheStart(t *testing.T) {
	res := importData(t, []byte(`{"nodes":[
		{"nodeId":"s1","name":"Start","flowNodeType":"workflowStart","inputs":[],"outputs":[]},
		{"nodeId":"x","name":"Fetch","flowNodeType":"lafModule","inputs":[],"outputs":[{"id":"o","key":"out","type":"static"}]},
		{"nodeId":"c","name":"Chat","flowNodeType":"chatNode","inputs":[
			{"key":"userChatInput","renderTypeList":["reference","textarea"],"valueType":"string","value":["x","o"]}],"outputs":[]}],
		"edges":[{"source":"s1","target":"c","sourceHandle":"s1-source-right"}]}`), templates(t))
	wantInputs(t, node(t, res.Graph, "c"), map[string]string{"userChatInput": `"{{$s1.userChatInput$}}"`})
	wantField(t, res.Report, "c", "userChatInput", "{{$x.out$}}", "lafModule", "default applies")
	wantSkipped(t, res.Report, "x", "lafModule", "Laf cloud function")
}

// A node whose required input cannot be kept stays, empty, for the
// builder to fill in; a node that cannot be made valid is left out.
func TestInvalidValues(t *testing.T) {
	res := importData(t, []byte(`{"nodes":[
		{"nodeId":"start","name":"Start","flowNodeType":"workflowStart","inputs":[],"outputs":[]},
		{"nodeId":"gone","name":"Search","flowNodeType":"datasetSearchNode","inputs":[],"outputs":[{"id":"quoteQA","key":"quoteQA"}]},
		{"nodeId":"say","name":"Say","flowNodeType":"answerNode","inputs":[
			{"key":"text","renderTypeList":["reference"],"value":["gone","quoteQA"]}],"outputs":[]},
		{"nodeId":"lp","name":"Loop","flowNodeType":"loop","inputs":[
			{"key":"loopInputArray","renderTypeList":["reference"],"value":[["gone","quoteQA"]]}],"outputs":[]},
		{"nodeId":"hot","name":"Hot","flowNodeType":"chatNode","inputs":[
			{"key":"history","renderTypeList":["numberInput"],"value":500}],"outputs":[]}],
		"edges":[]}`), templates(t))
	g, r := res.Graph, res.Report
	wantInputs(t, node(t, g, "say"), map[string]string{"text": `""`})
	wantField(t, r, "say", "text", "{{$gone.quoteQA$}}", "empty now: give it a value")
	// The loop has no start inside: Validate refuses it, so it goes.
	wantSkipped(t, r, "lp", "loop", "exactly one loop start")
	wantInputs(t, node(t, g, "hot"), map[string]string{})
	wantField(t, r, "hot", "history", "maximum", "left out")
}

// What is not a FastGPT workflow Flowbox can import is refused, saying
// why.
func TestRefused(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"not JSON", `{"nodes":`, "not a JSON object"},
		{"a list", `[]`, "not a JSON object"},
		{"no nodes", `{"edges":[]}`, `no "nodes" list`},
		{"empty", `{"nodes":[],"edges":[]}`, "no nodes"},
		{"modules", `{"modules":[{"moduleId":"a"}]}`, "before version 4.8"},
		{"simple app", `{"aiSettings":{"model":"gpt-4o"},"dataset":{}}`, "simple app"},
		{"no type", `{"nodes":[{"nodeId":"a","name":"A"}]}`, "no nodeId or flowNodeType"},
		{"plugin", `{"nodes":[{"nodeId":"pluginInput","name":"In","flowNodeType":"pluginInput","inputs":[],"outputs":[]},
			{"nodeId":"pluginOutput","name":"Out","flowNodeType":"pluginOutput","inputs":[],"outputs":[]}],"edges":[]}`, "FastGPT plugin"},
		{"no start", `{"nodes":[{"nodeId":"a","name":"A","flowNodeType":"answerNode","inputs":[],"outputs":[]}],"edges":[]}`, "no start node"},
		{"bad shape", `{"nodes":[{"nodeId":"a","flowNodeType":"answerNode","inputs":"x"}]}`, "do not have FastGPT's shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fastgpt.Import([]byte(tc.data), templates(t))
			if !errors.Is(err, fastgpt.ErrFormat) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrFormat saying %q", err, tc.want)
			}
		})
	}
}

// FastGPT's template files wrap the workflow and name the app.
func TestTemplateFile(t *testing.T) {
	inner, err := os.ReadFile(filepath.Join("testdata", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"name":"Time bot","intro":"x","type":"advanced","workflow":` + string(inner) + `}`)
	res := importData(t, data, templates(t))
	if res.Name != "Time bot" || len(res.Graph.Nodes) != 3 {
		t.Errorf("name %q, nodes %s; want the template's name and its nodes", res.Name, ids(res.Graph))
	}
}

package web_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// fastgptChat is a FastGPT export (its workflow editor's Export → JSON):
// start → chat (on the offline model) → an answer quoting it, a global
// variable, and a knowledge-base search Flowbox does not have.
const fastgptChat = `{
  "nodes": [
    {"nodeId": "userGuide", "name": "System config", "flowNodeType": "userGuide", "position": {"x": 0, "y": -300}, "inputs": [], "outputs": []},
    {"nodeId": "448745", "name": "Start", "flowNodeType": "workflowStart", "position": {"x": 0, "y": 0},
     "inputs": [{"key": "userChatInput", "renderTypeList": ["reference", "textarea"], "valueType": "string"}],
     "outputs": [{"id": "userChatInput", "key": "userChatInput", "type": "static", "valueType": "string"}]},
    {"nodeId": "chat1", "name": "AI chat", "flowNodeType": "chatNode", "position": {"x": 400, "y": 0},
     "inputs": [
       {"key": "model", "renderTypeList": ["settingLLMModel", "reference"], "valueType": "string", "value": "flowbox-demo"},
       {"key": "temperature", "renderTypeList": ["hidden"], "valueType": "number", "value": 0},
       {"key": "maxToken", "renderTypeList": ["hidden"], "valueType": "number", "value": 2000},
       {"key": "systemPrompt", "renderTypeList": ["textarea", "reference"], "valueType": "string", "value": "Answer in {{lang}}."},
       {"key": "history", "renderTypeList": ["numberInput", "reference"], "valueType": "chatHistory", "value": 6},
       {"key": "userChatInput", "renderTypeList": ["reference", "textarea"], "valueType": "string", "value": ["448745", "userChatInput"]}
     ],
     "outputs": [{"id": "answerText", "key": "answerText", "type": "static", "valueType": "string"}]},
    {"nodeId": "done", "name": "Sign off", "flowNodeType": "answerNode", "position": {"x": 800, "y": 0},
     "inputs": [{"key": "text", "renderTypeList": ["textarea", "reference"], "valueType": "any", "value": "\n(answered in {{$VARIABLE_NODE_ID.lang$}})"}],
     "outputs": []},
    {"nodeId": "kb", "name": "Search", "flowNodeType": "datasetSearchNode", "position": {"x": 400, "y": 300},
     "inputs": [{"key": "userChatInput", "renderTypeList": ["reference", "textarea"], "valueType": "string", "value": ["448745", "userChatInput"]}],
     "outputs": [{"id": "quoteQA", "key": "quoteQA", "type": "static", "valueType": "datasetQuote"}]}
  ],
  "edges": [
    {"source": "448745", "target": "chat1", "sourceHandle": "448745-source-right", "targetHandle": "chat1-target-left"},
    {"source": "chat1", "target": "done", "sourceHandle": "chat1-source-right", "targetHandle": "done-target-left"},
    {"source": "448745", "target": "kb", "sourceHandle": "448745-source-right", "targetHandle": "kb-target-left"}
  ],
  "chatConfig": {
    "variables": [{"id": "x1", "key": "lang", "label": "Language", "type": "select", "description": "", "required": false,
      "list": [{"label": "English", "value": "English"}, {"label": "中文", "value": "中文"}], "defaultValue": "English"}],
    "welcomeText": "Hello"
  }
}`

type importAnswer struct {
	App struct {
		ID      string          `json:"appId"`
		Name    string          `json:"name"`
		OwnerID string          `json:"ownerId"`
		Public  bool            `json:"public"`
		Graph   json.RawMessage `json:"graph"`
	} `json:"app"`
	Report struct {
		Imported []struct{ NodeID, Type, Name string } `json:"imported"`
		Skipped  []struct{ NodeID, Type, Name, Reason string }
		Fields   []struct{ NodeID, Field, Reason string }
		Problems []struct{ NodeID, Field, Message string }
	} `json:"report"`
}

// TestImportExport imports FastGPT's workflow JSON through the product's
// router as an account, chats with the app it makes on the offline
// model, exports it, imports the export back (the same graph), and
// checks what the routes refuse.
func TestImportExport(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))

	var got importAnswer
	expect(t, alice, "POST", "/api/apps/import", map[string]any{"workflow": json.RawMessage(fastgptChat)}, 201).JSON(t, &got)
	app, r := got.App, got.Report
	if app.ID == "" || app.OwnerID != aliceID || app.Public || app.Name != "Imported workflow" {
		t.Errorf("the app: %+v; want a private app of alice's named by default", app)
	}
	var types []string
	for _, n := range r.Imported {
		types = append(types, n.NodeID+":"+n.Type)
	}
	if strings.Join(types, " ") != "448745:workflowStart chat1:chatNode done:answerNode" {
		t.Errorf("imported %v", types)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].NodeID != "kb" || !strings.Contains(r.Skipped[0].Reason, "knowledge") {
		t.Errorf("skipped %+v, want the knowledge-base search", r.Skipped)
	}
	fields := map[string]string{}
	for _, f := range r.Fields {
		fields[f.NodeID+" "+f.Field] = f.Reason
	}
	if !strings.Contains(fields["chat1 maxToken"], "not used by Flowbox") || !strings.Contains(fields[" chatConfig.welcomeText"], "welcome") {
		t.Errorf("report fields %v, want maxToken and the welcome text", fields)
	}
	if len(r.Problems) != 0 {
		t.Errorf("problems %+v, want none", r.Problems)
	}
	var stored struct {
		Graph struct {
			Nodes []struct {
				NodeID string
				Inputs map[string]json.RawMessage
			}
			Variables []struct{ Key, Type string }
		}
	}
	expect(t, alice, "GET", "/api/apps/"+app.ID, nil, 200).JSON(t, &stored)
	if v := stored.Graph.Variables; len(v) != 1 || v[0].Key != "lang" || v[0].Type != "select" {
		t.Errorf("variables %+v, want lang (select)", v)
	}
	for _, n := range stored.Graph.Nodes {
		if n.NodeID == "chat1" && string(n.Inputs["systemPrompt"]) != `"Answer in {{$VARIABLE_NODE_ID.lang$}}."` {
			t.Errorf("the chat's system prompt %s, want the variable as a reference", n.Inputs["systemPrompt"])
		}
	}

	// The imported app runs: the chat node answers on the offline model,
	// then the answer node signs off with the variable's default.
	_, answer := say(t, alice, app.ID, "", "hello")
	if !strings.Contains(answer, "offline demo model") || !strings.HasSuffix(answer, "(answered in English)") {
		t.Errorf("the imported app answered %q; want the demo model's answer, then the sign-off", answer)
	}

	// Export: a file to download, to the owner only.
	resp := expect(t, alice, "GET", "/api/apps/"+app.ID+"/export", nil, 200)
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, "Imported workflow.json") {
		t.Errorf("Content-Disposition %q, want an attachment named after the app", cd)
	}
	var file struct {
		Flowbox int             `json:"flowbox"`
		Name    string          `json:"name"`
		Graph   json.RawMessage `json:"graph"`
	}
	resp.JSON(t, &file)
	if file.Flowbox != 1 || file.Name != "Imported workflow" || !sameJSON(t, file.Graph, app.Graph) {
		t.Errorf("export %s, want version 1, the name and the app's graph", resp.Body)
	}
	expect(t, bob, "GET", "/api/apps/"+app.ID+"/export", nil, 404)

	// Round trip: the export imports as the same graph, under a new name.
	var again importAnswer
	expect(t, bob, "POST", "/api/apps/import", map[string]any{"name": "Bob's copy", "workflow": json.RawMessage(resp.Body)}, 201).JSON(t, &again)
	if again.App.Name != "Bob's copy" || again.App.ID == app.ID || !sameJSON(t, again.App.Graph, app.Graph) {
		t.Errorf("re-import: %s %s\n  graph %s\n  want %s", again.App.ID, again.App.Name, again.App.Graph, app.Graph)
	}
	if len(again.Report.Imported) != 3 || len(again.Report.Skipped)+len(again.Report.Fields)+len(again.Report.Problems) != 0 {
		t.Errorf("re-import report %+v, want the three nodes and nothing else", again.Report)
	}
	_, answer = say(t, bob, again.App.ID, "", "hello")
	if !strings.HasSuffix(answer, "(answered in English)") {
		t.Errorf("the re-imported app answered %q", answer)
	}

	// Refusals.
	big := bytes.Repeat([]byte(" "), 2<<20)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"not JSON", []byte(`{"workflow":`), 400, "not JSON"},
		{"no workflow", map[string]any{"name": "x"}, 400, `give the workflow to import in \"workflow\"`},
		{"not a workflow", map[string]any{"workflow": map[string]any{"hello": "world"}}, 400, `no \"nodes\" list`},
		{"FastGPT before 4.8", map[string]any{"workflow": map[string]any{"modules": []any{}}}, 400, "before version 4.8"},
		{"nodes of no kind", map[string]any{"workflow": map[string]any{"nodes": []any{map[string]any{"nodeId": "a"}}}}, 400, "no nodeId or flowNodeType"},
		{"a later export version", map[string]any{"workflow": map[string]any{"flowbox": 2, "graph": map[string]any{}}}, 400, "version 2"},
		{"an invalid Flowbox graph", map[string]any{"workflow": map[string]any{"flowbox": 1, "name": "x", "graph": map[string]any{
			"nodes": []any{map[string]any{"nodeId": "n", "type": "teleport"}}}}}, 422, "unknown type"},
		{"too big", append(append([]byte(`{"workflow":{"nodes":[]},"name":"`), big...), '"', '}'), 413, "over 2 MiB"},
	} {
		resp := alice.Do(t, "POST", "/api/apps/import", tc.body)
		if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.want) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, resp.Status, clip(resp.Body), tc.status, tc.want)
		}
	}
	var list struct{ Apps []struct{ Name string } }
	expect(t, alice, "GET", "/api/apps", nil, 200).JSON(t, &list)
	for _, a := range list.Apps {
		if a.Name == "x" {
			t.Errorf("a refused import made an app: %+v", list.Apps)
		}
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

package web_test

// The tool-call node's other tools through the product (N6, X1–X4): the
// operator's exec tools (on the host and in the chat's sandbox) and an
// MCP server an admin registered, called by the scripted model in one
// round, with their results, cards and audit records.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

const execTools = `[
  {"name": "shout", "description": "Upper-case a text.", "runIn": "host", "readOnly": true, "concurrencySafe": true,
   "auditOperation": "text.shout",
   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false},
   "exec": ["python3", "-c", "import json, sys; print(json.load(sys.stdin)['text'].upper())"]},
  {"name": "where_am_i", "description": "Say where the program runs.", "runIn": "sandbox",
   "input_schema": {"type": "object", "properties": {}},
   "exec": ["sh", "-c", "cat >/dev/null; pwd; ls /workspace/uploads >/dev/null && echo sandbox"]}
]`

// newEchoServer is a real MCP server (the official SDK, streamable HTTP)
// with one tool, echo, that wants a bearer token.
func newEchoServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo-server", Version: "1.0.0"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Send the text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// A client's session may keep a stream open: cut it, or Close
		// waits for it.
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

func TestExecAndMCPTools(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, []byte(execTools), 0o644); err != nil {
		t.Fatal(err)
	}
	echo := newEchoServer(t, "s3cret-token")
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("call_shout", "shout", `{"text":"hello; rm -rf / $(touch /tmp/pwned-by-args)"}`),
			llmtest.Call("call_bad", "shout", `{"text":42}`),
			llmtest.Call("call_echo", "team__echo", `{"text":"ping token=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4Ab3dE6gH9jK2mN5pQ8sT1vW4"}`),
			llmtest.Call("call_where", "where_am_i", `{}`)}},
		llmtest.Reply{Text: "All done."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL, "FLOWBOX_EXEC_TOOLS": file,
		// The MCP server is on loopback: allowed as an operator would.
		"FLOWBOX_OUTBOUND_ALLOW": echo.Listener.Addr().String()}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	// The admin registers the MCP server; its token never comes back.
	r := expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "team", "name": "Team tools", "transport": "http",
		"url": echo.URL, "token": "s3cret-token"}, 201)
	if strings.Contains(string(r.Body), "s3cret") || !strings.Contains(string(r.Body), `"hasToken":true`) {
		t.Errorf("the registered server as answered: %s", r.Body)
	}
	refreshed := expect(t, admin, "POST", "/admin/api/mcp-servers/team/refresh", nil, 200)
	if !strings.Contains(string(refreshed.Body), `"name":"team__echo"`) {
		t.Errorf("the server's tools: %s", refreshed.Body)
	}
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "team", "name": "again", "transport": "http", "url": echo.URL}, 409)
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "Bad Id", "transport": "http", "url": echo.URL}, 400)
	choices := expect(t, admin, "GET", "/api/tools", nil, 200)
	if !strings.Contains(string(choices.Body), `"name":"shout"`) || !strings.Contains(string(choices.Body), `"id":"team"`) || strings.Contains(string(choices.Body), "s3cret") {
		t.Errorf("the builder's choices: %s", choices.Body)
	}

	appID := scriptedApp(t, admin, "tools", map[string]string{"useAgentSandbox": `true`, "tools": `["shout", "where_am_i", "mcp:team"]`})
	_, answer := sendTurn(t, admin, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "c-tools", "messages": message("go")}, 200)
	if answer != "All done." {
		t.Errorf("answer %q", answer)
	}

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if strings.Join(offered, ",") != "sandbox_shell,sandbox_process,shout,where_am_i,team__echo" {
		t.Errorf("tools offered: %v", offered)
	}
	results := map[string]string{}
	var order []string
	for _, m := range reqs[1].Messages {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Content
			order = append(order, m.ToolCallID)
		}
	}
	if strings.Join(order, ",") != "call_shout,call_bad,call_echo,call_where" {
		t.Errorf("results in the order %v, want the model's", order)
	}
	// The arguments reached the program's standard input only.
	if got := results["call_shout"]; !strings.Contains(got, `HELLO; RM -RF / $(TOUCH /TMP/PWNED-BY-ARGS)`) {
		t.Errorf("shout gave %s", got)
	}
	if _, err := os.Stat("/tmp/pwned-by-args"); err == nil {
		t.Error("an argument ran as a command")
	}
	if got := results["call_bad"]; !strings.Contains(got, `"error"`) || !strings.Contains(got, "text") {
		t.Errorf("arguments that do not match the schema gave %s", got)
	}
	if got := results["call_echo"]; !strings.Contains(got, "echo: ping") || strings.Contains(got, "sk-proj-Ab3d") || !strings.Contains(got, "REDACTED") {
		t.Errorf("the MCP tool gave %s, want its answer with the secret redacted", got)
	}
	if got := results["call_where"]; !strings.Contains(got, "/workspace") || !strings.Contains(got, "sandbox") {
		t.Errorf("the sandbox tool gave %s, want it run in the chat's sandbox", got)
	}

	// Each call is on the chat's card list with its status.
	var chat struct {
		Items []struct {
			ToolCalls []struct{ ToolName, Status string }
		}
	}
	expect(t, admin, "GET", "/api/apps/"+appID+"/chats/c-tools", nil, 200).JSON(t, &chat)
	statuses := map[string]string{}
	for _, it := range chat.Items {
		for _, c := range it.ToolCalls {
			statuses[c.ToolName] += c.Status + " "
		}
	}
	// Arguments that do not match the schema are the call's error:
	// nothing ran, as with sandbox_shell's.
	if statuses["shout"] != "success error " || statuses["team__echo"] != "success " || statuses["where_am_i"] != "success " {
		t.Errorf("the cards' statuses: %v", statuses)
	}

	// The host tool's call is audited under its operation; the sandbox
	// tool's command went through the sandbox's chain.
	waitUntil(t, "the audit has both tools", func() bool {
		body := string(admin.Do(t, "GET", "/admin/api/audit?app="+appID, nil).Body)
		return strings.Contains(body, `"op":"text.shout"`) && strings.Contains(body, `"tool":"where_am_i"`) && strings.Contains(body, `"op":"where_am_i"`) &&
			strings.Contains(body, `"op":"mcp:team/echo"`)
	})
	if body := string(admin.Do(t, "GET", "/admin/api/audit?app="+appID, nil).Body); strings.Contains(body, "sk-proj-Ab3d") {
		t.Errorf("the audit holds the secret the model sent to the MCP tool")
	}
}

// TestHostToolsFollowThePolicy: a host exec tool's program is judged by
// the app's command policy like a command: an ask rule pauses the run
// until a person approves, a forbid rule refuses it; both are audited.
func TestHostToolsFollowThePolicy(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, []byte(`[
  {"name": "count_words", "description": "Count words.", "runIn": "host", "destructive": true,
   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
   "exec": ["python3", "-c", "import json, sys; print(len(json.load(sys.stdin)['text'].split()))"]},
  {"name": "listen", "description": "Open a socket.", "runIn": "host", "exec": ["nc", "-l", "9999"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := policyFile(t, `{"rules": [
	{"id": "ask-python", "command": "python3", "decision": "ask", "justification": "host programs need a person"},
	{"id": "no-nc", "command": "nc", "decision": "forbid", "justification": "raw sockets are not for agents here"}]}`)
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("call_nc", "listen", `{}`),
			llmtest.Call("call_count", "count_words", `{"text":"one two three"}`)}},
		llmtest.Reply{Text: "Three words."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL,
		"FLOWBOX_EXEC_TOOLS": file, "FLOWBOX_POLICY_FILE": policy}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	appID := scriptedApp(t, admin, "host tools", map[string]string{"tools": `["count_words", "listen"]`})

	tr := completion(t, admin, map[string]any{"appId": appID, "chatId": "c-host", "messages": message("count")})
	if tr.Question == nil || tr.Question.Rule != "ask-python" || !strings.HasPrefix(tr.Question.Command, "python3 -c ") {
		t.Fatalf("the host tool did not ask: %+v (answer %q)", tr.Question, tr.Answer)
	}
	if len(model.Requests()) != 1 {
		t.Fatalf("the model was asked again before the approval")
	}
	done := completion(t, admin, answerBody(appID, "c-host", tr.Question.ApprovalID, "approve", nil))
	if done.Answer != "Three words." {
		t.Errorf("after the approval: %q", done.Answer)
	}
	reqs := model.Requests()
	results := map[string]string{}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	if got := results["call_count"]; !strings.Contains(got, `"result":"3`) {
		t.Errorf("the approved tool gave %s", got)
	}
	if got := results["call_nc"]; !strings.Contains(got, "no-nc") || !strings.Contains(got, "raw sockets") {
		t.Errorf("the forbidden tool gave %s", got)
	}
	waitUntil(t, "the audit has the refusal", func() bool {
		body := string(admin.Do(t, "GET", "/admin/api/audit?app="+appID+"&decision=refused", nil).Body)
		return strings.Contains(body, `"rule":"no-nc"`) && strings.Contains(body, `"tool":"listen"`)
	})
}

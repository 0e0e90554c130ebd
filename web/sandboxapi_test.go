package web_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/workers"
)

// sessionView is a session as the API answers it.
type sessionView struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Labels             map[string]string `json:"labels"`
	Limits             sandbox.Limits    `json:"limits"`
	IdleTimeoutSeconds int               `json:"idleTimeoutSeconds"`
	Status             string            `json:"status"`
}

type execResult struct {
	Tool    string          `json:"tool"`
	IsError bool            `json:"isError"`
	Text    string          `json:"text"`
	Output  json.RawMessage `json:"output"`
}

type apiErr struct {
	Code    int    `json:"code"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// UnmarshalJSON reads the one error shape, and OpenAI's on the chat API
// (its error an object whose code is the kind).
func (e *apiErr) UnmarshalJSON(b []byte) error {
	var raw struct {
		Code    int             `json:"code"`
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Code, e.Message = raw.Code, raw.Message
	var openai struct{ Code string }
	if json.Unmarshal(raw.Error, &e.Error) != nil && json.Unmarshal(raw.Error, &openai) == nil {
		e.Error = openai.Code
	}
	return nil
}

func execute(t *testing.T, c *enginetest.Client, session, tool string, params any) execResult {
	t.Helper()
	r := c.Do(t, "POST", "/api/sandbox/v1/sessions/"+session+"/execute", map[string]any{"tool": tool, "params": params})
	if r.Status != http.StatusOK {
		t.Fatalf("execute %s: %d %s", tool, r.Status, r.Body)
	}
	var res execResult
	r.JSON(t, &res)
	return res
}

func wantError(t *testing.T, r enginetest.Response, status int, kind string) apiErr {
	t.Helper()
	var e apiErr
	if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != status || e.Error != kind || e.Code != status || e.Message == "" {
		t.Errorf("answer %d %s; want %d with error %q and a message", r.Status, r.Body, status, kind)
	}
	return e
}

// TestSandboxAPI drives the service API with personal keys through the
// real router: a session's lifecycle (state kept across calls and across
// an idle stop by the workers), streaming, files, the errors, another
// caller's session, a temporary session and deletion through the
// deletion path.
func TestSandboxAPI(t *testing.T) {
	t.Parallel()
	// The workers start after the stop scan below, which the test runs
	// itself: a scheduled one would take the scan's lease first.
	env := enginetest.Start(t, enginetest.Options{})
	ctx := context.Background()
	carol := env.CreateUser(t, "sb-carol", auth.RoleUser)
	bob := env.CreateUser(t, "sb-bob", auth.RoleUser)
	c, b := env.Bearer(env.APIKey(t, carol)), env.Bearer(env.APIKey(t, bob))

	r := c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"name": "report", "labels": map[string]string{"team": "data"},
		"idleTimeoutSeconds": 60, "limits": map[string]any{"memoryMiB": 256}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var s sessionView
	r.JSON(t, &s)
	if !strings.HasPrefix(s.ID, "ses_") || s.Status != "none" || s.Name != "report" || s.Limits.MemoryMiB != 256 || s.IdleTimeoutSeconds != 60 {
		t.Fatalf("created %+v", s)
	}

	// The persistent shell: state carries over from call to call.
	if res := execute(t, c, s.ID, "shell:exec", map[string]any{"command": "mkdir -p /workspace/d && cd /workspace/d && export X=42"}); res.IsError {
		t.Fatalf("first command: %+v", res)
	}
	res := execute(t, c, s.ID, "shell:exec", map[string]any{"command": "echo $X; pwd"})
	var sh struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exitCode"`
	}
	if err := json.Unmarshal(res.Output, &sh); err != nil || sh.Stdout != "42\n/workspace/d\n" || res.IsError {
		t.Errorf("state across calls: %+v (%s)", res, res.Output)
	}
	// A command's failure is a result, not an error.
	if res := execute(t, c, s.ID, "shell:exec", map[string]any{"command": "exit 3"}); !res.IsError || !strings.Contains(string(res.Output), `"exitCode":3`) {
		t.Errorf("exit 3: %+v", res)
	}

	// Files, through the tools and through the file routes.
	execute(t, c, s.ID, "file:write", map[string]any{"path": "d/note.txt", "content": "hello files"})
	if res := execute(t, c, s.ID, "file:read", map[string]any{"path": "/workspace/d/note.txt"}); res.Text != "hello files" {
		t.Errorf("file:read: %+v", res)
	}
	if r := c.Do(t, "PUT", "/api/sandbox/v1/sessions/"+s.ID+"/files?path=/workspace/d/up.bin", []byte("uploaded\x00bytes")); r.Status != http.StatusCreated {
		t.Errorf("upload: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID+"/files?path=/workspace/d/up.bin", nil); r.Status != 200 || string(r.Body) != "uploaded\x00bytes" {
		t.Errorf("download: %d %q", r.Status, r.Body)
	}
	r = c.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID+"/files?path=/workspace/d", nil)
	zr, err := zip.NewReader(bytes.NewReader(r.Body), int64(len(r.Body)))
	var names []string
	for _, f := range zr.File {
		if !f.FileInfo().IsDir() {
			names = append(names, f.Name)
		}
	}
	if r.Status != 200 || err != nil || len(names) != 2 {
		t.Errorf("directory download: %d, %v, files %v", r.Status, err, names)
	}

	// Live output: the first line arrives before the command ends.
	resp, err := c.Send("POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute",
		map[string]any{"tool": "shell:exec", "stream": true, "params": map[string]any{"command": "echo one; sleep 1; echo two"}})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	var firstAt, resultAt time.Time
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
			if ev == "output" && firstAt.IsZero() {
				firstAt = time.Now()
			}
			if ev == "result" {
				resultAt = time.Now()
			}
		}
	}
	resp.Body.Close()
	if len(events) < 3 || events[0] != "output" || events[len(events)-1] != "result" || resultAt.Sub(firstAt) < 500*time.Millisecond {
		t.Errorf("stream: events %v, first output %v before the result", events, resultAt.Sub(firstAt))
	}

	// The errors, each with its kind.
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:nope"}), 400, "no_such_tool")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"cmd": "ls"}}), 400, "bad_params")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions/ses_nope/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "ls"}}), 404, "not_found")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"limits": map[string]any{"memoryMiB": 1 << 20}}), 400, "bad_request")
	wantError(t, c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"network": "egress", "egress": []string{"example.com"}}), 400, "bad_request")
	wantError(t, c.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID+"/files?path=/workspace/missing", nil), 404, "not_found")
	// Another caller's session is missing to them, whatever they try.
	wantError(t, b.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID, nil), 404, "not_found")
	wantError(t, b.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "echo $X"}}), 404, "not_found")
	wantError(t, b.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID+"/files?path=/workspace/d/note.txt", nil), 404, "not_found")
	wantError(t, b.Do(t, "DELETE", "/api/sandbox/v1/sessions/"+s.ID, nil), 404, "not_found")
	wantError(t, env.Anonymous().Do(t, "GET", "/api/sandbox/v1/sessions", nil), 401, "unauthorized")
	var list struct{ Sessions []sessionView }
	b.Do(t, "GET", "/api/sandbox/v1/sessions", nil).JSON(t, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("bob lists %+v", list.Sessions)
	}
	c.Do(t, "GET", "/api/sandbox/v1/sessions?label=team=data", nil).JSON(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != s.ID || list.Sessions[0].Status != "running" {
		t.Errorf("carol lists %+v", list.Sessions)
	}
	c.Do(t, "GET", "/api/sandbox/v1/sessions?label=team=web", nil).JSON(t, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("label filter: %+v", list.Sessions)
	}

	// Idle for longer than its own timeout (60 s), shorter than the
	// chats' (5 min): the stop scan stops it; the next call starts it
	// again with its state.
	svc := env.Engine.Services
	scope := sessions.Session{ID: s.ID, OwnerID: carol}.Scope()
	inst, err := svc.Manager.Lookup(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	// The activity index only moves forward: forget it, then age it.
	svc.Store.ForgetActivity(ctx, inst.Provider, inst.SandboxID)
	if err := svc.Store.Touch(ctx, inst, time.Now().Add(-90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := env.Engine.Workers.HandleStopIdle(ctx, workers.NewStopIdleTask()); err != nil {
		t.Fatal(err)
	}
	var got sessionView
	c.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID, nil).JSON(t, &got)
	if got.Status != "stopped" {
		t.Errorf("after 90 s idle with a 60 s timeout: status %q, want stopped", got.Status)
	}
	if res := execute(t, c, s.ID, "shell:exec", map[string]any{"command": "echo $X; pwd"}); !strings.Contains(res.Text, "42\n/workspace/d") {
		t.Errorf("after the stop: %+v", res)
	}

	if err := env.Engine.StartWorkers(); err != nil {
		t.Fatal(err)
	}

	// A temporary session: one call, then nothing is left of it.
	before, _ := svc.Store.ByProvider(ctx, svc.Provider.Name())
	r = c.Do(t, "POST", "/api/sandbox/v1/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "echo once > /workspace/f; cat /workspace/f"}})
	var once execResult
	r.JSON(t, &once)
	if r.Status != 200 || once.Text != "once\n" {
		t.Errorf("temporary session: %d %s", r.Status, r.Body)
	}
	c.Do(t, "GET", "/api/sandbox/v1/sessions", nil).JSON(t, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("the temporary session is listed: %+v", list.Sessions)
	}
	waitFor(t, "the temporary session's sandbox to be deleted", func() (bool, string) {
		after, _ := svc.Store.ByProvider(ctx, svc.Provider.Name())
		return len(after) == len(before), fmt.Sprintf("%d sandboxes, %d before", len(after), len(before))
	})

	// A deleted user's sessions go with them.
	doomed := env.CreateUser(t, "sb-doomed", auth.RoleUser)
	d := env.Bearer(env.APIKey(t, doomed))
	var ds sessionView
	expect(t, d, "POST", "/api/sandbox/v1/sessions", map[string]any{"start": true}, 201).JSON(t, &ds)
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expect(t, admin, "DELETE", "/admin/api/users/"+doomed, nil, 200)
	dscope := sessions.Session{ID: ds.ID, OwnerID: doomed}.Scope()
	waitFor(t, "the deleted user's session to be deleted", func() (bool, string) {
		_, rerr := svc.Manager.Lookup(ctx, dscope)
		_, serr := svc.Sessions.Get(ctx, ds.ID)
		return errors.Is(rerr, sandbox.ErrNotFound) && errors.Is(serr, sessions.ErrNotFound), fmt.Sprintf("record: %v, session: %v", rerr, serr)
	})

	// Deletion: answered at once, carried out by the workers.
	if r := c.Do(t, "DELETE", "/api/sandbox/v1/sessions/"+s.ID, nil); r.Status != http.StatusAccepted {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	wantError(t, c.Do(t, "GET", "/api/sandbox/v1/sessions/"+s.ID, nil), 404, "not_found")
	waitFor(t, "the session's sandbox to be deleted", func() (bool, string) {
		_, err := svc.Manager.Lookup(ctx, scope)
		st, _ := svc.Provider.Status(ctx, scope.SandboxID())
		return errors.Is(err, sandbox.ErrNotFound) && st == sandbox.StatusMissing, fmt.Sprintf("record: %v, provider: %s", err, st)
	})
}

// TestSandboxMCP drives the sandbox's MCP server with the official SDK's
// client, authenticated by a personal key: the registry's tools are
// listed, a command runs in the session, a refused call is a tool error.
func TestSandboxMCP(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	ctx := context.Background()
	dan := env.CreateUser(t, "mcp-dan", auth.RoleUser)
	key := env.APIKey(t, dan)
	c := env.Bearer(key)
	var s sessionView
	if r := c.Do(t, "POST", "/api/sandbox/v1/sessions", map[string]any{"start": true}); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	} else {
		r.JSON(t, &s)
	}
	if s.Status != "running" {
		t.Errorf("created with start: status %q", s.Status)
	}
	connect := func(key string) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: env.URL + "/api/sandbox/v1/sessions/" + s.ID + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	}
	cs, err := connect(key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	for _, want := range []string{"shell_exec", "file_read", "file_write", "file_list", "skill_list", "skill_run"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"command": "cd /workspace && echo from mcp > m.txt && cat m.txt"}})
	if err != nil || out.IsError || len(out.Content) == 0 || out.Content[0].(*mcp.TextContent).Text != "from mcp\n" {
		t.Fatalf("shell_exec: %+v, %v", out, err)
	}
	// The same session through execute sees the file.
	if res := execute(t, c, s.ID, "file:read", map[string]any{"path": "m.txt"}); res.Text != "from mcp\n" {
		t.Errorf("file:read after MCP: %+v", res)
	}
	out, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "shell_exec", Arguments: map[string]any{"cmd": "ls"}})
	if err != nil || !out.IsError || !strings.Contains(out.Content[0].(*mcp.TextContent).Text, "do not match its input schema") {
		t.Errorf("bad arguments: %+v, %v", out, err)
	}
	// Another user's key reaches nothing of it.
	other := env.APIKey(t, env.CreateUser(t, "mcp-eve", auth.RoleUser))
	if _, err := connect(other); err == nil {
		t.Error("another user's key connected to the session's MCP server")
	}
}

type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSandboxAPIRegistryAndPolicy: one registry behind both doors (an
// exec tool and a file tool the builder chose reach the chat's model, and
// the same tools run through the service API), and an app key's session
// runs under its app's policy and is audited as the key's.
func TestSandboxAPIRegistryAndPolicy(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(file, []byte(execTools), 0o644); err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("call_write", "file_write", `{"path":"from-agent.txt","content":"written by the agent"}`),
			llmtest.Call("call_shout", "shout", `{"text":"both doors"}`)}},
		llmtest.Reply{Text: "Done."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL, "FLOWBOX_EXEC_TOOLS": file}})
	env.CreateUser(t, "reg-alice", auth.RoleUser)
	alice := env.Login(t, "reg-alice", enginetest.Password("reg-alice"))

	graph := withPolicy(`{"rules": [{"id": "no-curl", "command": "curl", "decision": "forbid", "justification": "no downloads in this app"},
		{"id": "ask-rm", "command": "rm", "decision": "ask", "justification": "deleting needs a person"}]}`)
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	graph.Nodes[1].Inputs["useAgentSandbox"] = json.RawMessage(`true`)
	graph.Nodes[1].Inputs["tools"] = json.RawMessage(`["shout", "file:write", "exec:where_am_i"]`)
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "registry", "public": false, "graph": graph}, 201).JSON(t, &app)

	// The chat's door: the model is offered and calls both.
	if _, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "chatId": "c-reg", "messages": message("go")}, 200); answer != "Done." {
		t.Errorf("answer %q", answer)
	}
	var offered []string
	for _, tl := range model.Requests()[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if strings.Join(offered, ",") != "sandbox_shell,sandbox_process,shout,file_write,where_am_i" {
		t.Errorf("offered %v", offered)
	}
	read := expect(t, alice, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": app.ID, "chatId": "c-reg", "path": "from-agent.txt"}, 200)
	if !strings.Contains(string(read.Body), "written by the agent") {
		t.Errorf("the agent's file: %s", read.Body)
	}
	if second := string(model.Requests()[1].Messages[len(model.Requests()[1].Messages)-1].Content); !strings.Contains(second, "BOTH DOORS") {
		t.Errorf("shout's result: %s", second)
	}

	// The service API's door: the same tools, by their registry names.
	var key struct {
		Key string `json:"key"`
	}
	expect(t, alice, "POST", "/api/apps/"+app.ID+"/keys", map[string]any{"name": "program"}, 201).JSON(t, &key)
	prog := env.Bearer(key.Key)
	// A stdio MCP server's tools are listed in a session's sandbox: the
	// list without one leaves them out and makes no sandbox.
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "local", "name": "Local", "transport": "stdio",
		"command": []string{"/workspace/mcp-server"}}, 201)
	svc := env.Engine.Services
	before, _ := svc.Store.ByProvider(t.Context(), svc.Provider.Name())
	var tools struct {
		Tools []struct{ Name string }
	}
	expect(t, prog, "GET", "/api/sandbox/v1/tools", nil, 200).JSON(t, &tools)
	if after, _ := svc.Store.ByProvider(t.Context(), svc.Provider.Name()); len(after) != len(before) {
		t.Errorf("listing the tools made a sandbox: %d records, %d before", len(after), len(before))
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if want := "shell:exec,shell:process,file:read,file:write,file:list,skill:list,skill:load,skill:read,skill:run,exec:shout,exec:where_am_i"; strings.Join(names, ",") != want {
		t.Errorf("tools %v, want %s", names, want)
	}
	var s sessionView
	expect(t, prog, "POST", "/api/sandbox/v1/sessions", map[string]any{"appId": "another-app"}, 403)
	expect(t, prog, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &s)
	for _, name := range []string{"exec:shout", "shout"} {
		if res := execute(t, prog, s.ID, name, map[string]any{"text": "api"}); res.Text != "API\n" || res.IsError {
			t.Errorf("%s: %+v", name, res)
		}
	}
	if res := execute(t, prog, s.ID, "exec:where_am_i", map[string]any{}); !strings.Contains(res.Text, "sandbox") {
		t.Errorf("a sandbox exec tool: %+v", res)
	}
	// The app's policy holds for its sessions.
	e := wantError(t, prog.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "curl http://example.com"}}), 403, "refused")
	if !strings.Contains(e.Message, "no-curl") {
		t.Errorf("refusal %q names no rule", e.Message)
	}
	e = wantError(t, prog.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "rm -f x"}}), 403, "needs_approval")
	if !strings.Contains(e.Message, "ask-rm") {
		t.Errorf("approval %q names no rule", e.Message)
	}
	// ... and a session without an app runs under the operator's.
	carol := env.Bearer(env.APIKey(t, env.CreateUser(t, "reg-carol", auth.RoleUser)))
	var free sessionView
	expect(t, carol, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &free)
	if res := execute(t, carol, free.ID, "shell:exec", map[string]any{"command": "command -v curl >/dev/null; echo ran"}); res.Text != "ran\n" {
		t.Errorf("no app: %+v", res)
	}
	expect(t, carol, "POST", "/api/sandbox/v1/sessions", map[string]any{"appId": app.ID}, 403)

	// The audit files the calls under the app, as the service's.
	var page struct {
		Records []struct {
			Command, ActorKind, Decision, ChatID string
		}
	}
	expect(t, admin, "GET", "/admin/api/audit?app="+app.ID+"&chat="+s.ID, nil, 200).JSON(t, &page)
	var seen []string
	for _, r := range page.Records {
		seen = append(seen, r.ActorKind+" "+r.Decision+" "+r.Command)
	}
	joined := strings.Join(seen, "\n")
	if !strings.Contains(joined, "service refused curl http://example.com") || !strings.Contains(joined, "service allowed") {
		t.Errorf("audit of the session:\n%s", joined)
	}
}

// TestDestructiveTools: the policy's destructiveTools decides about a
// call of a tool marked destructive, at both doors. The operator asks a
// person: in a chat the call waits for an approval and runs once given;
// the service API, which cannot ask, refuses it; an app may forbid them
// but not allow them; tools that are not destructive run as before.
func TestDestructiveTools(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.json")
	tools := `[{"name": "wipe", "description": "Wipe the test data.", "runIn": "host", "destructive": true,
	  "input_schema": {"type": "object", "properties": {"what": {"type": "string"}}},
	  "exec": ["python3", "-c", "import json, sys; print('wiped', json.load(sys.stdin).get('what', 'all'))"]},
	 {"name": "peek", "description": "Look.", "runIn": "host", "readOnly": true,
	  "input_schema": {"type": "object", "properties": {}}, "exec": ["echo", "peeked"]}]`
	if err := os.WriteFile(file, []byte(tools), 0o644); err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_wipe", "wipe", `{"what":"cache"}`)}},
		llmtest.Reply{Text: "Wiped."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL, "FLOWBOX_EXEC_TOOLS": file,
		"FLOWBOX_POLICY_FILE": policyFile(t, `{"destructiveTools": "ask"}`)}})
	env.CreateUser(t, "dt-alice", auth.RoleUser)
	alice := env.Login(t, "dt-alice", enginetest.Password("dt-alice"))

	appID := scriptedApp(t, alice, "wiper", map[string]string{"tools": `["wipe", "peek"]`})

	// The chat: the call waits for a person, who sees the tool and its
	// params, and runs once approved.
	tr := asks(t, alice, appID, "", "wipe the cache")
	if tr.Question.Rule != "destructiveTools" || tr.Question.Command != `exec:wipe {"what":"cache"}` {
		t.Errorf("question %+v", tr.Question)
	}
	if done := completion(t, alice, answerBody(appID, tr.ChatID, tr.Question.ApprovalID, "approve", nil)); done.Answer != "Wiped." {
		t.Errorf("after the approval: %q", done.Answer)
	}
	if reqs := model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "wiped cache") {
		t.Errorf("the model did not read the approved call's result")
	}

	// The service API cannot ask: the call is refused, saying why.
	var key struct {
		Key string `json:"key"`
	}
	expect(t, alice, "POST", "/api/apps/"+appID+"/keys", map[string]any{"name": "program"}, 201).JSON(t, &key)
	prog := env.Bearer(key.Key)
	var s sessionView
	expect(t, prog, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &s)
	e := wantError(t, prog.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "wipe", "params": map[string]any{}}), 403, "needs_approval")
	if !strings.Contains(e.Message, "destructiveTools") {
		t.Errorf("refusal %q", e.Message)
	}
	if res := execute(t, prog, s.ID, "peek", map[string]any{}); res.Text != "peeked\n" {
		t.Errorf("a tool that is not destructive: %+v", res)
	}

	// An app may forbid them, not allow them.
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "loose", "graph": withPolicy(`{"destructiveTools": "allow"}`)}, 422)
	var strict struct {
		ID string `json:"appId"`
	}
	// It lists the tool: a tool no node lists is refused before any policy (T9).
	strictGraph := withPolicy(`{"destructiveTools": "forbid"}`)
	for i, n := range strictGraph.Nodes {
		if n.Type == "tools" {
			strictGraph.Nodes[i].Inputs["tools"] = json.RawMessage(`["wipe"]`)
		}
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "strict", "graph": strictGraph}, 201).JSON(t, &strict)
	var own sessionView
	expect(t, alice, "POST", "/api/sandbox/v1/sessions", map[string]any{"appId": strict.ID}, 201).JSON(t, &own)
	wantError(t, alice.Do(t, "POST", "/api/sandbox/v1/sessions/"+own.ID+"/execute", map[string]any{"tool": "exec:wipe", "params": map[string]any{}}), 403, "refused")
}

// TestShellToolIsOneTool: a chat's agent (sandbox_shell) and a service
// API caller (shell:exec) reach one tool: the same parameters, the same
// clamping of a timeout out of range, the same result, the same
// message for params it cannot read.
func TestShellToolIsOneTool(t *testing.T) {
	t.Parallel()
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_long", "sandbox_shell", `{"command":"echo agent","timeout":100000}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_bad", "sandbox_shell", `{"command":5}`)}},
		llmtest.Reply{Text: "Done."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	user := env.CreateUser(t, "one-tool", auth.RoleUser)
	c := env.Login(t, "one-tool", enginetest.Password("one-tool"))
	appID := scriptedApp(t, c, "one tool", map[string]string{"useAgentSandbox": `true`})
	if _, answer := sendTurn(t, c, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "c-one", "messages": message("go")}, 200); answer != "Done." {
		t.Fatalf("answer %q", answer)
	}
	reqs := model.Requests()
	toolMessage := func(i int) string { m := reqs[i].Messages; return m[len(m)-1].Content }

	prog := env.Bearer(env.APIKey(t, user))
	var tools struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
	}
	expect(t, prog, "GET", "/api/sandbox/v1/tools", nil, 200).JSON(t, &tools)
	offered := reqs[0].Tools[0].Function
	if tools.Tools[0].Name != "shell:exec" || offered.Name != "sandbox_shell" || tools.Tools[0].Description != offered.Description ||
		!bytes.Equal(tools.Tools[0].InputSchema, offered.Parameters) {
		t.Errorf("the service API's %s (%s, %s) and the model's %s (%s, %s) differ", tools.Tools[0].Name, tools.Tools[0].Description,
			tools.Tools[0].InputSchema, offered.Name, offered.Description, offered.Parameters)
	}

	var s sessionView
	expect(t, prog, "POST", "/api/sandbox/v1/sessions", map[string]any{}, 201).JSON(t, &s)
	type clampedResult struct {
		Stdout         string `json:"stdout"`
		ExitCode       int    `json:"exitCode"`
		TimeoutClamped bool   `json:"timeoutClamped"`
		TimeoutSeconds int    `json:"timeoutSeconds"`
	}
	var agent, caller, older clampedResult
	if err := json.Unmarshal([]byte(toolMessage(1)), &agent); err != nil {
		t.Fatalf("the agent's result %s: %v", toolMessage(1), err)
	}
	res := execute(t, prog, s.ID, "shell:exec", map[string]any{"command": "echo caller", "timeout": 100000})
	if err := json.Unmarshal(res.Output, &caller); err != nil {
		t.Fatalf("the caller's result %s: %v", res.Output, err)
	}
	// The service API's older name of the timeout is still read.
	res = execute(t, prog, s.ID, "shell:exec", map[string]any{"command": "echo older", "timeoutSeconds": 100000})
	if err := json.Unmarshal(res.Output, &older); err != nil {
		t.Fatalf("the older call's result %s: %v", res.Output, err)
	}
	for _, r := range []struct {
		who  string
		got  clampedResult
		echo string
	}{{"agent", agent, "agent\n"}, {"caller", caller, "caller\n"}, {"older caller", older, "older\n"}} {
		if r.got != (clampedResult{Stdout: r.echo, TimeoutClamped: true, TimeoutSeconds: 300}) {
			t.Errorf("%s: %+v, want the command run with its timeout clamped to 300 s and said so", r.who, r.got)
		}
	}

	// Params it cannot read: the same problem and example for both.
	bad := prog.Do(t, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", map[string]any{"tool": "shell:exec", "params": map[string]any{"command": 5}})
	e := wantError(t, bad, http.StatusBadRequest, "bad_params")
	want := `"command" must be a string, got 5; call it like {"command": "ls -la", "timeout": 30}`
	var agentBad map[string]string
	_ = json.Unmarshal([]byte(toolMessage(2)), &agentBad)
	if !strings.Contains(e.Message, want) || agentBad["error"] != want {
		t.Errorf("bad params: the caller read %q, the agent %q; want both to say %s", e.Message, agentBad["error"], want)
	}
}

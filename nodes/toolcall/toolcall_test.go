package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// one model for every name, talking to the scripted endpoint.
type endpoint struct{ c *llm.Client }

func (e endpoint) Model(string) (llm.Model, error) { return e.c, nil }

type fixture struct {
	engine  *nodes.Engine
	model   *llmtest.Server
	manager *sandbox.Manager
}

func newManager(t testing.TB, bwrapPath string) *sandbox.Manager {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", BwrapPath: bwrapPath})
	if err != nil {
		t.Fatal(err)
	}
	if bwrapPath == "" {
		testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	}
	store, err := mongostore.New(context.Background(), mongotest.DB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newFixture(t *testing.T, manager *sandbox.Manager, replies ...llmtest.Reply) *fixture {
	t.Helper()
	return newFixtureWith(t, manager, nil, replies...)
}

// newFixtureWith is newFixture with the node's configuration changed.
func newFixtureWith(t *testing.T, manager *sandbox.Manager, change func(*toolcall.Config), replies ...llmtest.Reply) *fixture {
	t.Helper()
	srv := llmtest.New(t, replies...)
	client, err := llm.NewClient(llm.Config{BaseURL: srv.BaseURL, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	types := nodes.Builtins(endpoint{client})
	cfg := toolcall.Config{Models: endpoint{client}, Env: toolcall.Environment{System: "Debian 12 (bookworm)", Tools: []string{"bash", "python3"}}}
	if manager != nil {
		cfg.Tools = registry.New(nil, registry.Shell{Sandboxes: manager})
	}
	if change != nil {
		change(&cfg)
	}
	types["tools"] = toolcall.New(cfg)
	return &fixture{engine: &nodes.Engine{Templates: ts, Types: types}, model: srv, manager: manager}
}

func app(t testing.TB, toolInputs string) *nodes.Graph {
	t.Helper()
	var g nodes.Graph
	js := fmt.Sprintf(`{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"agent","type":"tools","name":"Agent","inputs":%s},
		{"nodeId":"answer","type":"answerNode","inputs":{"text":"\n[after: {{$agent.answerText$}}]"}}],
		"edges":[{"source":"start","target":"agent"},{"source":"agent","target":"answer"}]}`, toolInputs)
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func (f *fixture) run(t *testing.T, g *nodes.Graph, chat nodes.Chat) (*nodes.Result, []nodes.Event) {
	t.Helper()
	if chat.AppID == "" {
		chat.AppID, chat.UserID = "app-"+t.Name(), "user-1"
	}
	var events []nodes.Event
	res, err := f.engine.Run(context.Background(), g, chat, func(ev nodes.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if f.manager != nil {
		id := sandbox.IDFor(chat.AppID, chat.UserID, chat.ChatID)
		t.Cleanup(func() { f.manager.Delete(context.Background(), id) })
	}
	return res, events
}

func toolMessages(req llm.Request) []llm.Message {
	var out []llm.Message
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

func TestSwitchOnInjectsToolAndPrompt(t *testing.T) {
	f := newFixture(t, nil, llmtest.Reply{Text: "on"}, llmtest.Reply{Text: "off"}, llmtest.Reply{Text: "on, with prompt"})
	f.run(t, app(t, `{"useAgentSandbox":true}`), nodes.Chat{ChatID: "c1", Question: "hi"})
	f.run(t, app(t, `{"useAgentSandbox":false}`), nodes.Chat{ChatID: "c2", Question: "hi"})
	f.run(t, app(t, `{"useAgentSandbox":true,"systemPrompt":"Be brief."}`), nodes.Chat{ChatID: "c3", Question: "hi"})
	reqs := f.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	on, off, withPrompt := reqs[0], reqs[1], reqs[2]
	if len(on.Tools) != 1 || on.Tools[0].Function.Name != "sandbox_shell" {
		t.Errorf("switch on: tools = %+v, want sandbox_shell", on.Tools)
	}
	var params struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type    string  `json:"type"`
			Minimum float64 `json:"minimum"`
			Maximum float64 `json:"maximum"`
		} `json:"properties"`
	}
	json.Unmarshal(on.Tools[0].Function.Parameters, &params)
	if fmt.Sprint(params.Required) != "[command]" || params.Properties["command"].Type != "string" ||
		params.Properties["timeout"].Type != "number" || params.Properties["timeout"].Minimum != 1 || params.Properties["timeout"].Maximum != 300 {
		t.Errorf("sandbox_shell parameters = %+v, want command (string, required) and timeout (number 1-300)", params)
	}
	if on.Messages[0].Role != llm.RoleSystem || !strings.Contains(on.Messages[0].Content, "/workspace") ||
		!strings.Contains(on.Messages[0].Content, "Debian 12") || !strings.Contains(on.Messages[0].Content, "bash, python3") {
		t.Errorf("switch on: first message = %+v, want a system message describing the sandbox", on.Messages[0])
	}
	if len(off.Tools) != 0 || off.Messages[0].Role == llm.RoleSystem {
		t.Errorf("switch off: tools %+v, messages %+v; want neither tool nor sandbox prompt", off.Tools, off.Messages)
	}
	if sys := withPrompt.Messages[0].Content; !strings.HasPrefix(sys, "Be brief.\n\n") || !strings.Contains(sys, "sandbox_shell") {
		t.Errorf("with a system prompt: %q, want the suffix appended to it", sys)
	}
}

func TestTurnsShareTheChatsSandbox(t *testing.T) {
	m := newManager(t, "")
	f := newFixture(t, m,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", `{"command":"echo data > f.txt; export V=42; cd /tmp"}`)}},
		llmtest.Reply{Text: "saved"},
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c2", "sandbox_shell", `{"command":"cat /workspace/f.txt; echo $V; pwd"}`)}},
		llmtest.Reply{Text: "read"},
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c3", "sandbox_shell", `{"command":"ls /workspace; echo \"v=$V\""}`)}},
		llmtest.Reply{Text: "other chat"},
	)
	g := app(t, `{"useAgentSandbox":true}`)
	f.run(t, g, nodes.Chat{ChatID: "chat-a", Question: "save"})
	f.run(t, g, nodes.Chat{ChatID: "chat-a", Question: "read back"})
	f.run(t, g, nodes.Chat{ChatID: "chat-b", Question: "look"})
	reqs := f.model.Requests()
	var second, other registry.ShellResult
	json.Unmarshal([]byte(toolMessages(reqs[3])[0].Content), &second)
	json.Unmarshal([]byte(toolMessages(reqs[5])[0].Content), &other)
	if second.Stdout != "data\n42\n/tmp\n" || second.ExitCode != 0 {
		t.Errorf("second turn saw %+v, want the file, the variable and the directory of the first", second)
	}
	if other.Stdout != "v=\n" {
		t.Errorf("another chat saw %q, want an empty workspace and no variable", other.Stdout)
	}
}

func TestSandboxDownEndsNodeWithTheError(t *testing.T) {
	f := newFixture(t, newManager(t, "/nonexistent/bwrap"),
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", `{"command":"ls"}`)}},
		llmtest.Reply{Text: "never asked"},
	)
	res, events := f.run(t, app(t, `{"useAgentSandbox":true}`), nodes.Chat{ChatID: "c", Question: "list"})
	agent, answer := res.Responses[1], res.Responses[2]
	if !strings.Contains(agent.Error, "temporarily unavailable") || agent.Outputs["answerText"] != sandbox.ErrUnavailable.Error() {
		t.Fatalf("agent response = %+v, want the unavailable error as its output", agent)
	}
	calls := agent.Detail.(toolcall.Detail).ToolCalls
	var result registry.ShellResult
	json.Unmarshal([]byte(calls[0].Response), &result)
	if result.ExitCode != -1 || !strings.Contains(result.Stderr, "sandbox service temporarily unavailable, retry later") {
		t.Fatalf("tool result = %+v, want exitCode -1 and the retry message", result)
	}
	if answer.Error != "" || answer.Outputs["answerText"] != "\n[after: sandbox service temporarily unavailable, retry later]" {
		t.Fatalf("answer node = %+v, want it to run after the tool-call node", answer)
	}
	if len(f.model.Requests()) != 1 {
		t.Fatalf("%d model requests, want the node to end after the failed tool call", len(f.model.Requests()))
	}
	var errs []string
	for _, ev := range events {
		if e, ok := ev.Data.(nodes.NodeError); ok {
			errs = append(errs, ev.NodeID+": "+e.Message)
		}
	}
	if want := "agent: " + sandbox.ErrUnavailable.Error(); len(errs) != 1 || errs[0] != want {
		t.Fatalf("error events %q, want one: %q", errs, want)
	}
}

func TestBrokenArgumentsBecomeToolErrors(t *testing.T) {
	m := newManager(t, "")
	tests := []struct {
		name, tool, args string
		want             string          // in the tool message the model gets
		status           registry.Status // of the call, as the chat card shows it
	}{
		{"not JSON", "sandbox_shell", `run ls please`, `needs a \"command\" string`, "error"},
		{"command not a string", "sandbox_shell", `{"command": 5}`, `\"command\" must be a string`, "error"},
		{"empty command", "sandbox_shell", `{"command": "  "}`, `\"command\" is empty`, "error"},
		{"timeout as string", "sandbox_shell", `{"command":"ls","timeout":"abc"}`, `must be a number of seconds`, "error"},
		// Arguments that would run if the tool were taken for sandbox_shell.
		{"unknown tool", "rm_everything", `{"command":"echo executed"}`, `{"error":"unknown tool \"rm_everything\"; the tools you have are: sandbox_shell, sandbox_process"}`, "error"},
		{"truncated JSON still runs", "sandbox_shell", `{"command": "echo lenient"`, `"stdout":"lenient\n"`, "success"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, m,
				llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", tc.tool, tc.args)}},
				llmtest.Reply{Text: "understood"},
			)
			res, _ := f.run(t, app(t, `{"useAgentSandbox":true}`), nodes.Chat{ChatID: "c-" + tc.name, Question: "go"})
			reqs := f.model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want the tool result sent back once", len(reqs))
			}
			msgs := toolMessages(reqs[1])
			if len(msgs) != 1 || msgs[0].ToolCallID != "c1" {
				t.Fatalf("tool messages sent back = %+v, want one answering call c1", msgs)
			}
			if got := msgs[0].Content; !strings.Contains(got, tc.want) {
				t.Fatalf("tool message = %s, want it to contain %s", got, tc.want)
			}
			if res.Responses[1].Error != "" || res.Responses[1].Outputs["answerText"] != "understood" {
				t.Fatalf("agent = %+v; a broken call must not fail the node", res.Responses[1])
			}
			calls := res.Responses[1].Detail.(toolcall.Detail).ToolCalls
			if len(calls) != 1 || calls[0].Tool != tc.tool || calls[0].Status != tc.status {
				t.Fatalf("recorded calls = %+v, want one %s call with status %q", calls, tc.tool, tc.status)
			}
		})
	}
}

// S6: a timeout out of range is clamped, the command runs under the
// clamped timeout, and the model is told.
func TestTimeoutOutOfRangeIsClamped(t *testing.T) {
	m := newManager(t, "")
	tests := []struct {
		name, args string
		want       registry.ShellResult // DurationMs and Stderr not compared
		stderr     string               // in Stderr
		status     registry.Status
	}{
		{"above 300", `{"command":"echo ran","timeout":100000}`,
			registry.ShellResult{Stdout: "ran\n", TimeoutClamped: true, TimeoutSeconds: 300}, "", "success"},
		{"below 1 stops the command after 1 s", `{"command":"sleep 5; echo late","timeout":0}`,
			registry.ShellResult{ExitCode: 124, TimedOut: true, TimeoutClamped: true, TimeoutSeconds: 1}, "timed out after 1s", "timed out"},
		{"in range is not marked", `{"command":"echo ran","timeout":30}`,
			registry.ShellResult{Stdout: "ran\n"}, "", "success"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, m,
				llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", tc.args)}},
				llmtest.Reply{Text: "ok"},
			)
			res, _ := f.run(t, app(t, `{"useAgentSandbox":true}`), nodes.Chat{ChatID: "c-" + tc.name, Question: "go"})
			msgs := toolMessages(f.model.Requests()[1])
			if len(msgs) != 1 {
				t.Fatalf("tool messages = %+v, want one", msgs)
			}
			var got registry.ShellResult
			if err := json.Unmarshal([]byte(msgs[0].Content), &got); err != nil {
				t.Fatalf("tool message %s: %v", msgs[0].Content, err)
			}
			if !strings.Contains(got.Stderr, tc.stderr) || (tc.stderr == "") != (got.Stderr == "") {
				t.Errorf("stderr = %q, want %q in it", got.Stderr, tc.stderr)
			}
			got.DurationMs, got.Stderr = 0, ""
			if got != tc.want {
				t.Errorf("tool result = %+v (%s)\nwant %+v", got, msgs[0].Content, tc.want)
			}
			if marked := strings.Contains(msgs[0].Content, `"timeoutClamped":true`); marked != tc.want.TimeoutClamped {
				t.Errorf("tool message %s: timeoutClamped shown %v, want %v", msgs[0].Content, marked, tc.want.TimeoutClamped)
			}
			if calls := res.Responses[1].Detail.(toolcall.Detail).ToolCalls; len(calls) != 1 || calls[0].Status != tc.status {
				t.Errorf("recorded calls = %+v, want one with status %q", calls, tc.status)
			}
		})
	}
}

func TestRoundLimit(t *testing.T) {
	m := newManager(t, "")
	call := func(id string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(id, "sandbox_shell", `{"command":"true"}`)}}
	}
	f := newFixture(t, m, call("a"), call("b"), call("c"), llmtest.Reply{Text: "never"})
	res, _ := f.run(t, app(t, `{"useAgentSandbox":true,"maxToolRounds":2}`), nodes.Chat{ChatID: "c", Question: "loop"})
	if n := len(f.model.Requests()); n != 3 {
		t.Fatalf("%d model requests, want 3 (two rounds of tools, then the limit)", n)
	}
	if a := res.Responses[1].Outputs["answerText"].(string); !strings.Contains(a, "after 2 rounds") {
		t.Fatalf("answer = %q, want it to say the round limit stopped it", a)
	}
	if calls := res.Responses[1].Detail.(toolcall.Detail).ToolCalls; len(calls) != 2 {
		t.Fatalf("%d tool calls ran, want 2", len(calls))
	}
}

func TestModelErrorThenSuccess(t *testing.T) {
	f := newFixture(t, nil, llmtest.Reply{Status: 500, ErrMessage: "overloaded"}, llmtest.Reply{Text: "fine now"})
	res, _ := f.run(t, app(t, `{"useAgentSandbox":false}`), nodes.Chat{ChatID: "c", Question: "q"})
	if res.Responses[1].Error != "" || res.Responses[1].Outputs["answerText"] != "fine now" || len(f.model.Requests()) != 2 {
		t.Fatalf("agent = %+v after %d requests; want a retry and success", res.Responses[1], len(f.model.Requests()))
	}
}

// kind names an event for a sequence check.
func kind(ev nodes.Event) string {
	switch d := ev.Data.(type) {
	case nodes.AnswerDelta:
		return "answer"
	case nodes.NodeStatus:
		return d.Status + ":" + ev.NodeID
	case nodes.ToolCallStarted:
		return "call"
	case nodes.ToolParams:
		return "params"
	case nodes.ToolOutput:
		return "output:" + ev.NodeID + ":" + d.Stream
	case nodes.ToolResult:
		return "result"
	case nodes.NodeError:
		return "error"
	case nodes.NodeDone:
		return "done:" + ev.NodeID
	}
	return fmt.Sprintf("%T", ev.Data)
}

// The events of one tool round, in order, with the command's output
// streamed while it runs.
func TestEventSequence(t *testing.T) {
	m := newManager(t, "")
	const args = `{"command":"echo one; sleep 1; echo two >&2"}`
	f := newFixture(t, m,
		llmtest.Reply{Text: "Running it.", ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", args)}},
		llmtest.Reply{Text: "All done."},
	)
	_, events := f.run(t, app(t, `{"useAgentSandbox":true}`), nodes.Chat{ChatID: "c", Question: "go"})
	var seq []string
	for _, ev := range events {
		if s := kind(ev); len(seq) == 0 || seq[len(seq)-1] != s {
			seq = append(seq, s)
		}
	}
	want := []string{
		"running:start", "done:start", "running:agent", "answer", "call", "params",
		"output:agent:stdout", "output:agent:stderr", "result", "answer", "done:agent", "running:answer", "answer", "done:answer",
	}
	if strings.Join(seq, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n got  %v\n want %v", seq, want)
	}
	output := map[string]string{}
	for _, ev := range events {
		switch d := ev.Data.(type) {
		case nodes.ToolCallStarted:
			if want := (nodes.ToolCallStarted{ID: "c1", Tool: "sandbox_shell", Params: args}); d != want {
				t.Errorf("tool call = %+v, want %+v", d, want)
			}
		case nodes.ToolParams:
			if want := (nodes.ToolParams{ID: "c1", Params: args}); d != want {
				t.Errorf("tool params = %+v, want %+v", d, want)
			}
		case nodes.ToolOutput:
			if d.ID != "c1" {
				t.Errorf("output of call %q, want c1", d.ID)
			}
			output[d.Stream] += d.Text
		case nodes.ToolResult:
			var r registry.ShellResult
			json.Unmarshal([]byte(d.Response), &r)
			if d.ID != "c1" || d.Tool != "sandbox_shell" || d.Status != "success" || d.DurationMs < 900 ||
				r.Stdout != "one\n" || r.Stderr != "two\n" {
				t.Fatalf("tool result = %+v, want c1's success, its output and the command's duration", d)
			}
		}
	}
	if want := map[string]string{"stdout": "one\n", "stderr": "two\n"}; fmt.Sprint(output) != fmt.Sprint(want) {
		t.Errorf("streamed output %q, want %q", output, want)
	}
}

// The node's detail is stored in chat history and sent in flowResponses:
// its JSON must stay {"toolCalls": [...]}.
func TestDetailJSON(t *testing.T) {
	tests := []struct {
		name   string
		detail toolcall.Detail
		want   string
	}{
		{"no calls", toolcall.Detail{}, `{"toolCalls":null}`},
		{"one call", toolcall.Detail{ToolCalls: []toolcall.Call{{ID: "c1", Tool: "sandbox_shell", Arguments: `{"command":"ls"}`, Response: `{}`, DurationMs: 5, Status: "success"}}},
			`{"toolCalls":[{"id":"c1","toolName":"sandbox_shell","params":"{\"command\":\"ls\"}","response":"{}","durationMs":5,"status":"success"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.detail)
			if err != nil || string(b) != tc.want {
				t.Errorf("JSON = %s, %v; want %s", b, err, tc.want)
			}
		})
	}
}

// The probe reports what the sandbox really has, checked against what a
// command in a sandbox of the same provider finds.
func TestProbeTellsTheTruth(t *testing.T) {
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	env, err := toolcall.Probe(context.Background(), p, false)
	if err != nil {
		t.Fatal(err)
	}
	if env.System == "" || !strings.Contains(env.System, "Debian") {
		t.Errorf("system = %q, want the sandbox's os-release name", env.System)
	}
	want := map[string]bool{}
	for _, tool := range []string{"bash", "python3", "git", "curl"} {
		if _, err := os.Stat("/usr/bin/" + tool); err == nil {
			want[tool] = true
		}
	}
	got := map[string]bool{}
	for _, tool := range env.Tools {
		got[tool] = true
	}
	for tool := range want {
		if !got[tool] {
			t.Errorf("the sandbox has %s but the probe did not report it (got %v)", tool, env.Tools)
		}
	}
	if env.Network {
		t.Errorf("env = %+v, want no network as asked", env)
	}
	if strings.Contains(env.Install, "apt-get") {
		t.Errorf("install hint %q: bwrap's system is read-only, apt cannot work", env.Install)
	}
	if list, _ := p.List(context.Background()); len(list) != 0 {
		t.Errorf("the probe left sandboxes behind: %+v", list)
	}

	// No tool is named that the sandbox lacks: a command in a sandbox of
	// the same provider finds every tool the probe reported.
	ctx := context.Background()
	id := sandbox.IDFor("probe-check", t.Name(), "1")
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	defer p.Delete(ctx, id)
	var script strings.Builder
	for _, tool := range env.Tools {
		fmt.Fprintf(&script, "command -v '%s' >/dev/null || echo '%s'; ", tool, tool)
	}
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: script.String() + "true", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if missing := strings.Fields(res.Stdout); len(missing) != 0 || res.ExitCode != 0 {
		t.Errorf("the probe reported %v, but the sandbox has no %v (exit %d, stderr %q)", env.Tools, missing, res.ExitCode, res.Stderr)
	}
}

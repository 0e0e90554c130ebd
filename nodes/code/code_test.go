package code_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/code"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/policy"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// records keeps the audit's records.
type records struct {
	mu   sync.Mutex
	list []audit.Record
}

func (r *records) Write(_ context.Context, rec audit.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec)
}

func (r *records) all() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}

// The apps of these tests: their command policies and sandbox switches.
var (
	policies = map[string]string{
		"app-nopy": `{"rules": [{"id": "no-python", "command": "python3", "decision": "forbid", "justification": "Python is not allowed in this app"}]}`,
		"app-ask":  `{"rules": [{"id": "ask-node", "command": "node", "decision": "ask", "justification": "a person checks JavaScript first"}]}`,
	}
	sandboxOn = map[string]bool{"app-sandbox": true}
)

type fixture struct {
	provider *bwrap.Provider
	manager  *sandbox.Manager
	audit    *records
}

// newFixture is a real sandbox manager on bwrap, with the shell policy
// of the apps above and the audit in its chain, as the engine builds it.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(ctx))
	store, err := mongostore.New(ctx, mongotest.DB(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := policy.NewResolver(nil, func(_ context.Context, appID string) ([]byte, error) {
		if doc, ok := policies[appID]; ok {
			return []byte(doc), nil
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{}
	chain := append([]sandbox.Middleware{audit.Middleware(audit.Config{Records: recs})}, resolver.Middleware()...)
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Middleware: chain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return &fixture{provider: p, manager: m, audit: recs}
}

func (f *fixture) engine(t *testing.T, timeout time.Duration) *nodes.Engine {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	types := nodes.Builtins(nil)
	types[code.Type] = code.New(code.Config{Sandboxes: f.manager, Timeout: timeout,
		SandboxOn: func(_ context.Context, appID string) (bool, error) { return sandboxOn[appID], nil }})
	return &nodes.Engine{Templates: ts, Types: types}
}

// graph is start → code → answer "ok: {{$code.result$}}", with the code
// node's catch branch leading to "caught: {{$code.error$}}" when catch.
func graph(t *testing.T, codeType, src string, custom map[string]any, catch bool) *nodes.Graph {
	t.Helper()
	inputs := map[string]any{"codeType": codeType, "code": src}
	for k, v := range custom {
		inputs[k] = v
	}
	raw, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	nodesJS := `{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"code","type":"code","name":"Code","inputs":` + string(raw) + `,"outputs":[{"key":"result","type":"any"}]},
		{"nodeId":"ok","type":"answerNode","inputs":{"text":"ok: {{$code.result$}}"}}`
	edges := `{"source":"start","target":"code"},{"source":"code","target":"ok"}`
	if catch {
		nodesJS += `,{"nodeId":"caught","type":"answerNode","inputs":{"text":"caught: {{$code.error$}}"}}`
		edges += `,{"source":"code","target":"caught","sourceHandle":"catch"}`
	}
	js := `{"nodes":[` + nodesJS + `],"edges":[` + edges + `]}`
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func response(res *nodes.Result, id string) nodes.NodeResponse {
	for _, r := range res.Responses {
		if r.NodeID == id {
			return r
		}
	}
	return nodes.NodeResponse{}
}

// tricky survives no careless quoting: shell syntax, quotes, the inputs'
// here-document delimiter, a NUL-free control character, CJK.
const tricky = "it's \"$(touch /workspace/pwned)\" `id` \\n\t; FLOWBOX_INPUT\nFLOWBOX_INPUT\n'\\'' 你好 \x01"

func TestCodeRuns(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, 20*time.Second)
	question := "hello"
	tests := []struct {
		name, app, codeType, src string
		custom                   map[string]any
		// answer is the run's answer; caught, when set, is a piece of the
		// error the catch branch gets (the answer then starts "caught: ").
		answer, caught string
		// failed, when set, is a piece of Result.Failed (no catch edge).
		failed string
		log    string // a piece of the code's log (codeLog)
	}{
		{name: "js main", codeType: "js",
			src:    "function main({ q, n }) {\n  console.log('shouting', q);\n  return { result: q.toUpperCase() + ' ' + (n + 1) };\n}",
			custom: map[string]any{"q": "{{$start.userChatInput$}}", "n": 41}, answer: "ok: HELLO 42", log: "shouting hello"},
		{name: "js async main", codeType: "js",
			src:    "async function main({ q }) { await new Promise((r) => setTimeout(r, 10)); return { result: [q, q.length] }; }",
			custom: map[string]any{"q": "{{$start.userChatInput$}}"}, answer: `ok: ["hello",5]`},
		{name: "py main", codeType: "py",
			src:    "def main(q, n):\n    print('shouting', q)\n    return {'result': q.upper() + ' ' + str(n + 1)}\n",
			custom: map[string]any{"q": "{{$start.userChatInput$}}", "n": 41}, answer: "ok: HELLO 42", log: "shouting hello"},
		{name: "py main takes the dict", codeType: "py",
			src:    "def main(inputs):\n    return {'result': sorted(inputs)}\n",
			custom: map[string]any{"b": 1, "a": 2}, answer: `ok: ["a","b"]`},
		{name: "py script reads stdin", codeType: "py",
			src:    "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'result': d['q'][::-1]}))\n",
			custom: map[string]any{"q": "{{$start.userChatInput$}}"}, answer: "ok: olleh"},
		{name: "js script reads stdin", codeType: "js",
			src:    "const d = JSON.parse(require('fs').readFileSync(0, 'utf8'));\nconsole.log(JSON.stringify({ result: d.q.length }));",
			custom: map[string]any{"q": "{{$start.userChatInput$}}"}, answer: "ok: 5"},
		{name: "quoting survives js", codeType: "js",
			src:    "// " + strings.ReplaceAll(tricky, "\n", " ") + "\nfunction main({ s }) { return { result: s === " + jsString(tricky) + " ? 'same' : JSON.stringify(s) }; }",
			custom: map[string]any{"s": tricky}, answer: "ok: same"},
		{name: "quoting survives py", codeType: "py",
			src:    "# " + strings.ReplaceAll(tricky, "\n", " ") + "\ndef main(s):\n    return {'result': 'same' if s == " + jsString(tricky) + " else s}\n",
			custom: map[string]any{"s": tricky}, answer: "ok: same"},
		{name: "py exception takes the catch branch", codeType: "py",
			src: "def main():\n    x = 1\n    return {'result': x / 0}\n", caught: "ZeroDivisionError: division by zero (code.py line 3)\n  File \"code.py\", line 3, in main\n    return {'result': x / 0}"},
		{name: "js exception takes the catch branch", codeType: "js",
			src: "function main() {\n  console.log('before');\n  null.x;\n}", caught: "TypeError: Cannot read properties of null (reading 'x') (code.js line 3)"},
		{name: "js syntax error", codeType: "js", src: "function main( {", caught: "SyntaxError"},
		{name: "py syntax error", codeType: "py", src: "def main(:\n  pass\n", caught: "SyntaxError"},
		{name: "py main returns no dict", codeType: "py", src: "def main():\n    return [1]\n", caught: "main must return a dict"},
		{name: "js prints no object", codeType: "js", src: "console.log('just text')", caught: "not a JSON object: just text"},
		{name: "non-zero exit", codeType: "py", src: "import sys\nsys.stderr.write('bad input\\n')\nsys.exit(3)\n", caught: "exit code 3): bad input"},
		{name: "policy forbids python3", app: "app-nopy", codeType: "py", src: "def main():\n    return {'result': 1}\n",
			failed: `refused to run this Python code: refused by policy rule "no-python": Python is not allowed in this app`},
		{name: "policy refusal takes the catch branch", app: "app-nopy", codeType: "py", src: "def main():\n    return {'result': 1}\n",
			caught: `rule "no-python"`},
		{name: "policy asks", app: "app-ask", codeType: "js", src: "function main() { return { result: 1 }; }",
			failed: `wants a person to approve running this JavaScript code (rule "ask-node")`},
		{name: "too large for one command", codeType: "py", src: "def main(s):\n    return {'result': len(s)}\n",
			custom: map[string]any{"s": strings.Repeat("x", 130<<10)}, caught: "may take at most 120 KiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			app := tc.app
			if app == "" {
				app = "app-code"
			}
			catch := tc.failed == ""
			res, err := e.Run(context.Background(), graph(t, tc.codeType, tc.src, tc.custom, catch),
				nodes.Chat{AppID: app, UserID: "u1", ChatID: "c-" + strings.ReplaceAll(tc.name, " ", "-"), Question: question}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := response(res, "code")
			switch {
			case tc.failed != "":
				if !strings.Contains(res.Failed, tc.failed) {
					t.Fatalf("failed = %q, want it to contain %q (answer %q)", res.Failed, tc.failed, res.Answer)
				}
			case tc.caught != "":
				if !strings.HasPrefix(res.Answer, "caught: ") || !strings.Contains(res.Answer, tc.caught) {
					t.Fatalf("answer = %q, want the catch branch with %q", res.Answer, tc.caught)
				}
			default:
				if res.Answer != tc.answer || res.Failed != "" {
					t.Fatalf("answer = %q (failed %q, node error %q, detail %+v), want %q", res.Answer, res.Failed, r.Error, r.Detail, tc.answer)
				}
				if r.Outputs["rawResponse"] == nil {
					t.Errorf("outputs = %v, want rawResponse", r.Outputs)
				}
			}
			if tc.log != "" {
				d, _ := r.Detail.(*code.Detail)
				if d == nil || !strings.Contains(d.CodeLog, tc.log) {
					t.Errorf("detail = %+v, want a codeLog with %q", r.Detail, tc.log)
				}
			}
		})
	}
	// Every throwaway sandbox is gone.
	left, err := f.provider.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range left {
		if strings.HasPrefix(r.Labels["chatId"], "flowbox-code-") {
			t.Errorf("the throwaway sandbox %s (%v) was not deleted", r.ID, r.Labels)
		}
	}
}

// jsString is s as a JavaScript (and Python) string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCodeRunsInTheChatsSandbox: with the app's sandbox on, the code
// sees and changes the chat's own workspace, as the audit records under
// the chat, the code node as the tool; without it, it does not.
func TestCodeRunsInTheChatsSandbox(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, 20*time.Second)
	ctx := context.Background()
	src := "const fs = require('fs');\nfunction main() {\n  const seen = fs.existsSync('/workspace/marker');\n  fs.writeFileSync('/workspace/from-code', 'written');\n  return { result: seen };\n}"
	for _, tc := range []struct {
		app     string
		seen    string
		sandbox string
	}{
		{"app-sandbox", "ok: true", "chat"},
		{"app-code", "ok: false", "throwaway"},
	} {
		t.Run(tc.app, func(t *testing.T) {
			scope := sandbox.Scope{AppID: tc.app, UserID: "u1", ChatID: "chat-1"}
			t.Cleanup(func() { f.manager.Delete(context.Background(), scope.SandboxID()) })
			if _, err := f.manager.Exec(ctx, scope, sandbox.ExecRequest{Command: "touch /workspace/marker"}); err != nil {
				t.Fatal(err)
			}
			res, err := e.Run(ctx, graph(t, "js", src, nil, false), nodes.Chat{AppID: tc.app, UserID: "u1", ChatID: "chat-1", Question: "q"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != tc.seen {
				t.Fatalf("answer = %q (failed %q), want %q", res.Answer, res.Failed, tc.seen)
			}
			if d, _ := response(res, "code").Detail.(*code.Detail); d == nil || d.Sandbox != tc.sandbox {
				t.Errorf("detail = %+v, want sandbox %q", response(res, "code").Detail, tc.sandbox)
			}
			got, err := f.manager.Exec(ctx, scope, sandbox.ExecRequest{Command: "cat /workspace/from-code 2>/dev/null || echo none"})
			if err != nil {
				t.Fatal(err)
			}
			want := "none"
			if tc.sandbox == "chat" {
				want = "written"
			}
			if strings.TrimSpace(got.Stdout) != want {
				t.Errorf("the chat's workspace holds %q, want %q", got.Stdout, want)
			}
			var audited []audit.Record
			for _, r := range f.audit.all() {
				if r.AppID == tc.app && r.Tool == code.Type {
					audited = append(audited, r)
				}
			}
			if len(audited) != 1 || audited[0].ActorKind != string(sandbox.ActorService) || !strings.Contains(audited[0].Command, "node -e") ||
				(tc.sandbox == "chat") != (audited[0].ChatID == "chat-1") {
				t.Errorf("audit of the code node = %+v, want one record of the command, in the %s sandbox", audited, tc.sandbox)
			}
		})
	}
}

// TestCodeMissingInterpreter: a sandbox without the interpreter (here the
// chat's shell lost it from its PATH) says which one is missing.
func TestCodeMissingInterpreter(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, 20*time.Second)
	ctx := context.Background()
	scope := sandbox.Scope{AppID: "app-sandbox", UserID: "u1", ChatID: "no-path"}
	t.Cleanup(func() { f.manager.Delete(context.Background(), scope.SandboxID()) })
	if _, err := f.manager.Exec(ctx, scope, sandbox.ExecRequest{Command: "export PATH=/nowhere"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(ctx, graph(t, "py", "def main():\n    return {}\n", nil, true), nodes.Chat{AppID: "app-sandbox", UserID: "u1", ChatID: "no-path", Question: "q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "caught: the sandbox has no python3, which Python code needs"; !strings.HasPrefix(res.Answer, want) {
		t.Fatalf("answer = %q, want %q…", res.Answer, want)
	}
}

// TestCodeTimeout: code that runs past the node's timeout is stopped and
// the node fails saying so.
func TestCodeTimeout(t *testing.T) {
	f := newFixture(t)
	e := f.engine(t, 2*time.Second)
	res, err := e.Run(context.Background(), graph(t, "py", "while True:\n    pass\n", nil, true),
		nodes.Chat{AppID: "app-code", UserID: "u1", ChatID: "loops", Question: "q"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "caught: the code was stopped after 2s, its time limit"; !strings.HasPrefix(res.Answer, want) {
		t.Fatalf("answer = %q, want %q…", res.Answer, want)
	}
}

// TestCodeCustomInputsAreChecked: custom inputs are the node's own
// inputs, so their references are checked when the graph is saved and
// their names must be names the code can use.
func TestCodeCustomInputsAreChecked(t *testing.T) {
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		custom map[string]any
		want   string // a piece of the error; "" for a valid graph
	}{
		{"reference and value", map[string]any{"q": "{{$start.userChatInput$}}", "n": 1}, ""},
		{"missing node", map[string]any{"q": "{{$ghost.answerText$}}"}, `node "code" q: references node "ghost"`},
		{"bad name", map[string]any{"my-input": 1}, "my-input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ts.Check(graph(t, "js", "function main() { return {}; }", tc.custom, true))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid graph refused: %v", err)
			case tc.want != "" && (!errors.Is(err, nodes.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want a validation error with %q", err, tc.want)
			}
		})
	}
}

package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// backend is a backend of the tests: its tools echo their params, and it
// records its lifecycle calls.
type backend struct {
	prefix string
	tools  []string
	calls  *[]string
	fail   string // a hook that fails
}

func (b backend) Prefix() string { return b.prefix }

func (b backend) Tools(ctx context.Context, scope sandbox.Scope) ([]registry.Tool, error) {
	var out []registry.Tool
	for _, name := range b.tools {
		out = append(out, registry.Tool{Name: b.prefix + ":" + name, InputSchema: json.RawMessage(`{"type":"object",` +
			`"properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false}`),
			Run: func(ctx context.Context, call registry.Call) (registry.Result, error) {
				return registry.Result{Text: string(call.Params)}, nil
			}})
	}
	return out, nil
}

func (b backend) hook(name string) error {
	*b.calls = append(*b.calls, b.prefix+"."+name)
	if b.fail == name {
		return errors.New(name + " failed")
	}
	return nil
}

func (b backend) Warmup(ctx context.Context) error { return b.hook("warmup") }
func (b backend) Initialize(ctx context.Context, scope sandbox.Scope) error {
	return b.hook("initialize")
}
func (b backend) Cleanup(ctx context.Context, scope sandbox.Scope) error { return b.hook("cleanup") }
func (b backend) Shutdown(ctx context.Context) error                     { return b.hook("shutdown") }

func TestLookupAndExecute(t *testing.T) {
	ctx := context.Background()
	var calls []string
	exec := backend{prefix: "exec", tools: []string{"weather"}, calls: &calls}
	reg := registry.New(exec, backend{prefix: "file", tools: []string{"read", "write"}, calls: &calls}, exec)
	scope := sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}

	all, err := reg.List(ctx, scope)
	var names []string
	for _, tl := range all {
		names = append(names, tl.Name+"="+tl.Model())
	}
	if err != nil || strings.Join(names, ",") != "file:read=file_read,file:write=file_write,exec:weather=exec_weather" {
		t.Errorf("List: %v, %v", names, err)
	}
	for _, name := range []string{"file:read", "exec:weather", "weather"} {
		if tl, err := reg.Lookup(ctx, scope, name); err != nil || !strings.HasSuffix(tl.Name, strings.TrimPrefix(name, "exec:")) {
			t.Errorf("Lookup(%q): %+v, %v", name, tl.Name, err)
		}
	}
	for _, name := range []string{"file:delete", "vm:screenshot", "nothing", ""} {
		if _, err := reg.Lookup(ctx, scope, name); !errors.Is(err, registry.ErrNoTool) {
			t.Errorf("Lookup(%q): %v, want ErrNoTool", name, err)
		}
	}

	read, _ := reg.Lookup(ctx, scope, "file:read")
	if res, err := reg.Execute(ctx, read, registry.Call{Scope: scope, Params: json.RawMessage(`{"n": 2}`)}); err != nil || res.Text != `{"n": 2}` {
		t.Errorf("Execute: %+v, %v", res, err)
	}
	for params, want := range map[string]string{
		``:                "(top level): missing property 'n'",
		`{"n": 0}`:        "/n: minimum",
		`{"n": 1, "x":1}`: "/: additional properties 'x' not allowed",
		`[1]`:             "must be a JSON object",
		`{"n":`:           "not JSON",
	} {
		_, err := reg.Execute(ctx, read, registry.Call{Scope: scope, Params: json.RawMessage(params)})
		var bad *registry.ParamsError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "file:read") {
			t.Errorf("params %q: %v, want a ParamsError saying %q", params, err, want)
		}
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	var calls []string
	a := backend{prefix: "a", calls: &calls}
	b := backend{prefix: "b", calls: &calls, fail: "initialize"}
	c := backend{prefix: "c", calls: &calls, fail: "cleanup"}
	reg := registry.New(nil, a, b, c)
	scope := sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}

	if err := reg.Warmup(ctx); err != nil {
		t.Error(err)
	}
	// Initialize stops at the first failure: a session that cannot be
	// made is not half made by the backends after it.
	if err := reg.Initialize(ctx, scope); err == nil || !strings.Contains(err.Error(), "initialize failed") {
		t.Errorf("Initialize: %v", err)
	}
	// Cleanup runs every backend's and reports the failures together.
	if err := reg.Cleanup(ctx, scope); err == nil || !strings.Contains(err.Error(), "clean up c") {
		t.Errorf("Cleanup: %v", err)
	}
	if err := reg.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	want := "a.warmup b.warmup c.warmup a.initialize b.initialize a.cleanup b.cleanup c.cleanup a.shutdown b.shutdown c.shutdown"
	if got := strings.Join(calls, " "); got != want {
		t.Errorf("hooks\n got %s\nwant %s", got, want)
	}
}

func TestPlainName(t *testing.T) {
	for in, want := range map[string]string{"shell:exec": "shell_exec", "mcp:docs/search": "mcp_docs_search", "a-b_c9": "a-b_c9", "é": "__"} {
		if got := registry.PlainName(in); got != want {
			t.Errorf("PlainName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScriptCommand(t *testing.T) {
	cmd, err := registry.ScriptCommand("/workspace/skills/s/scripts/run.py", []string{"--flag", "; rm -rf /", "$(id)"})
	if err != nil {
		t.Fatal(err)
	}
	want := `(cd /workspace/intermediate && exec python3 /workspace/skills/s/scripts/run.py --flag '; rm -rf /' '$(id)')`
	if cmd != want {
		t.Errorf("got  %s\nwant %s", cmd, want)
	}
	if _, err := registry.ScriptCommand("/x.sh", []string{"a\x00b"}); err == nil {
		t.Error("a NUL byte in an argument was accepted")
	}
}

func TestParseShellArgs(t *testing.T) {
	tests := []struct {
		name, args string
		want       registry.ShellArgs
		problem    string // in the problem; "" for none
	}{
		{"no timeout: the default", `{"command":"ls"}`, registry.ShellArgs{Command: "ls"}, ""},
		{"null timeout: the default", `{"command":"ls","timeout":null}`, registry.ShellArgs{Command: "ls"}, ""},
		{"in range", `{"command":"ls","timeout":30}`, registry.ShellArgs{Command: "ls", Timeout: 30 * time.Second}, ""},
		{"fraction", `{"command":"ls","timeout":2.5}`, registry.ShellArgs{Command: "ls", Timeout: 2500 * time.Millisecond}, ""},
		{"lower bound", `{"command":"ls","timeout":1}`, registry.ShellArgs{Command: "ls", Timeout: time.Second}, ""},
		{"upper bound", `{"command":"ls","timeout":300}`, registry.ShellArgs{Command: "ls", Timeout: 300 * time.Second}, ""},
		{"zero", `{"command":"ls","timeout":0}`, registry.ShellArgs{Command: "ls", Timeout: time.Second, Clamped: true}, ""},
		{"under a second", `{"command":"ls","timeout":0.5}`, registry.ShellArgs{Command: "ls", Timeout: time.Second, Clamped: true}, ""},
		{"negative", `{"command":"ls","timeout":-7}`, registry.ShellArgs{Command: "ls", Timeout: time.Second, Clamped: true}, ""},
		{"just above", `{"command":"ls","timeout":300.5}`, registry.ShellArgs{Command: "ls", Timeout: 300 * time.Second, Clamped: true}, ""},
		{"huge", `{"command":"ls","timeout":100000}`, registry.ShellArgs{Command: "ls", Timeout: 300 * time.Second, Clamped: true}, ""},
		{"overflowing", `{"command":"ls","timeout":1e999}`, registry.ShellArgs{Command: "ls", Timeout: 300 * time.Second, Clamped: true}, ""},
		{"timeout as string", `{"command":"ls","timeout":"30"}`, registry.ShellArgs{}, `"timeout" must be a number of seconds from 1 to 300, not "30"`},
		{"timeout as bool", `{"command":"ls","timeout":true}`, registry.ShellArgs{}, `"timeout" must be a number of seconds`},
		{"no command", `{"timeout":5}`, registry.ShellArgs{}, `needs a "command" string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := registry.ParseShellArgs(tc.args)
			if got != tc.want {
				t.Errorf("args = %+v, want %+v", got, tc.want)
			}
			if (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
				t.Errorf("problem = %q, want %q", problem, tc.problem)
			}
		})
	}
}

// The service API's older name of the timeout is read when timeout is
// absent.
func TestParseShellArgsOlderTimeoutName(t *testing.T) {
	got, problem := registry.ParseShellArgs(`{"command":"ls","timeoutSeconds":5}`)
	if problem != "" || got != (registry.ShellArgs{Command: "ls", Timeout: 5 * time.Second}) {
		t.Errorf("args = %+v, %q; want a 5 s timeout", got, problem)
	}
	got, _ = registry.ParseShellArgs(`{"command":"ls","timeout":2,"timeoutSeconds":5}`)
	if got.Timeout != 2*time.Second {
		t.Errorf("both names: timeout %s, want timeout's 2s", got.Timeout)
	}
}

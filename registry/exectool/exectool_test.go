package exectool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/registry/exectool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/schemas"
)

func TestLoadTestdata(t *testing.T) {
	tools, err := exectool.Load("testdata/tools.json", "testdata/single.json")
	if err != nil {
		t.Fatal(err)
	}
	type meta struct {
		name, source, permission, audit string
		runIn                           exectool.RunIn
		timeout                         time.Duration
		readOnly, destructive, conc     bool
	}
	want := []meta{
		{"echo_input", "testdata/tools.json[0]", "", "echo_input", exectool.OnHost, 30 * time.Second, true, false, true},
		{"shout", "testdata/tools.json[1]", "text", "text.shout", exectool.OnHost, 5 * time.Second, false, false, false},
		{"wipe_scratch", "testdata/tools.json[2]", "workspace.write", "wipe_scratch", exectool.InSandbox, 300 * time.Second, false, true, false},
		{"count_bytes", "testdata/single.json", "", "count_bytes", exectool.InSandbox, 30 * time.Second, true, false, false},
	}
	if len(tools) != len(want) {
		t.Fatalf("loaded %d tools, want %d", len(tools), len(want))
	}
	for i, tool := range tools {
		got := meta{tool.Name(), tool.Source(), tool.PermissionClass(), tool.AuditOperation(), tool.RunIn(), tool.Timeout(),
			tool.ReadOnly(), tool.Destructive(), tool.ConcurrencySafe()}
		if got != want[i] {
			t.Errorf("tool %d = %+v, want %+v", i, got, want[i])
		}
		if tool.Description() == "" {
			t.Errorf("%s has no description", tool.Name())
		}
	}
	// The declared schema is given to the model as it is; a tool without
	// one takes any object.
	var schema map[string]any
	if err := json.Unmarshal(tools[0].InputSchema(), &schema); err != nil || schema["required"] == nil {
		t.Errorf("echo_input's input schema = %s, %v; want the declared one", tools[0].InputSchema(), err)
	}
	if got := string(tools[2].InputSchema()); got != `{"type":"object","properties":{}}` {
		t.Errorf("wipe_scratch's input schema = %s, want the default object schema", got)
	}
}

// TestReservedNames keeps the exec tools off the engine's own tools'
// names.
func TestReservedNames(t *testing.T) {
	for _, name := range []string{registry.ShellModelName, registry.ListSkillsName, registry.LoadSkillName, registry.ReadSkillFileName, registry.RunSkillScriptName} {
		if !exectool.Reserved(name) {
			t.Errorf("Reserved(%q) = false, want true: it is one of the engine's own tools", name)
		}
		_, err := loadText(t, map[string]string{"t.json": `{"name":"` + name + `","description":"d","exec":["true"],"runIn":"host"}`}, "t.json")
		if err == nil || !strings.Contains(err.Error(), "engine's own tools") {
			t.Errorf("a tool named %s: err = %v, want one saying the name is taken", name, err)
		}
	}
}

// loadText writes files into a temporary directory and loads those
// named, in order, by their relative names.
func loadText(t *testing.T, files map[string]string, load ...string) ([]*exectool.Tool, error) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Relative names keep the errors short and comparable.
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]string, len(load))
	for i, name := range load {
		paths[i] = filepath.Join(rel, name)
	}
	tools, err := exectool.Load(paths...)
	if err != nil {
		// Name the files as the test does.
		return tools, errors.New(strings.ReplaceAll(err.Error(), rel+"/", ""))
	}
	return tools, nil
}

func TestLoadErrors(t *testing.T) {
	const good = `{"name":"good","description":"d","exec":["true"],"runIn":"host"}`
	tests := []struct {
		name  string
		files map[string]string
		load  []string
		want  []string // every one must appear in the error
	}{
		{"not JSON", map[string]string{"t.json": `{"name":`}, nil, []string{"exec tools: t.json: not JSON"}},
		{"trailing garbage", map[string]string{"t.json": good + ` x`}, nil, []string{"t.json: not JSON"}},
		{"neither object nor array", map[string]string{"t.json": `"tool"`}, nil, []string{"t.json: want a tool declaration (a JSON object) or an array of them, got a string"}},
		{"empty array", map[string]string{"t.json": `[]`}, nil, []string{"t.json: the array declares no tool"}},
		{"unknown field", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host","env":{"A":"1"}}`}, nil,
			[]string{"t.json: env: unknown field"}},
		{"empty exec, at its index", map[string]string{"tools.json": `[` + good + `,{"name":"x","description":"d","exec":[],"runIn":"host"}]`}, nil,
			[]string{"exec tools: tools.json[1]: exec: must have at least one element"}},
		{"exec element not a string", map[string]string{"t.json": `{"name":"x","description":"d","exec":["echo",1],"runIn":"host"}`}, nil,
			[]string{"t.json: exec[1]: got number, want string"}},
		{"exec not an array", map[string]string{"t.json": `{"name":"x","description":"d","exec":"ls -l","runIn":"host"}`}, nil,
			[]string{"t.json: exec: got string, want array"}},
		{"bad name", map[string]string{"t.json": `{"name":"two words","description":"d","exec":["true"],"runIn":"host"}`}, nil,
			[]string{`t.json: name: "two words" must be 1 to 64 letters, digits, _ or -`}},
		{"name too long", map[string]string{"t.json": `{"name":"` + strings.Repeat("n", 65) + `","description":"d","exec":["true"],"runIn":"host"}`}, nil,
			[]string{"name: ", "must be 1 to 64"}},
		{"name missing, description empty", map[string]string{"t.json": `{"description":"","exec":["true"],"runIn":"host"}`}, nil,
			[]string{"t.json: ", "name: is required", "description: must not be empty"}},
		{"runIn unknown", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"cloud"}`}, nil,
			[]string{"t.json: runIn: value must be one of 'host', 'sandbox'"}},
		{"timeout too small", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host","timeout_seconds":0}`}, nil,
			[]string{"t.json: timeout_seconds: minimum: got 0, want 1"}},
		{"timeout too large", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host","timeout_seconds":301}`}, nil,
			[]string{"t.json: timeout_seconds: maximum: got 301, want 300"}},
		{"metadata of the wrong type", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host","readOnly":"yes"}`}, nil,
			[]string{"t.json: readOnly: got string, want boolean"}},
		{"input_schema not a valid JSON Schema", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host",` +
			`"input_schema":{"type":"object","properties":{"q":{"type":"nonsense"}}}}`}, nil,
			[]string{"t.json: input_schema is not a valid JSON Schema: input_schema/properties/q/type"}},
		{"input_schema not for an object", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host","input_schema":{"type":"string"}}`}, nil,
			[]string{"t.json: input_schema/type: value must be 'object'"}},
		{"input_schema referring to a file", map[string]string{"t.json": `{"name":"x","description":"d","exec":["true"],"runIn":"host",` +
			`"input_schema":{"type":"object","properties":{"q":{"$ref":"file:///etc/passwd"}}}}`}, nil,
			[]string{"t.json: input_schema", "refers to file:///etc/passwd"}},
		{"sandbox argv a shell cannot take as it is", map[string]string{"t.json": `{"name":"x","description":"d","exec":["python3","-c","print(1)\nprint(2)"],"runIn":"sandbox"}`}, nil,
			[]string{"t.json: exec[2]: ", "cannot be passed through the sandbox's shell"}},
		{"duplicate names across files", map[string]string{"a.json": good, "b.json": `[{"name":"other","description":"d","exec":["true"],"runIn":"host"},` + good + `]`},
			[]string{"a.json", "b.json"}, []string{`exec tools: b.json[1]: name: "good" is declared at a.json already`}},
		{"missing file", map[string]string{}, []string{"nowhere.json"}, []string{"exec tools: open ", "nowhere.json: no such file or directory"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			load := tc.load
			if load == nil {
				for name := range tc.files {
					load = append(load, name)
				}
			}
			tools, err := loadText(t, tc.files, load...)
			if err == nil {
				t.Fatalf("Load succeeded with %d tools, want an error containing %q", len(tools), tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q\nwant it to contain %q", err, w)
				}
			}
			if tools != nil {
				t.Errorf("Load returned tools with its error: %d", len(tools))
			}
		})
	}
}

// TestHostEnvironment: a host program sees none of the engine's
// environment, and its HOME is a fresh directory removed after the call.
func TestHostEnvironment(t *testing.T) {
	t.Setenv("FLOWBOX_SECRET", "hunter2-do-not-leak")
	tool := declare(t, map[string]any{"name": "env", "description": "d", "exec": []string{"sh", "-c", "env; echo pwd=$(pwd); touch \"$HOME/made\""}, "runIn": "host"})
	c := run(t, place{}, tool, `{}`)
	if c.err != nil || c.res.IsError {
		t.Fatalf("got %+v, %v", c.res, c.err)
	}
	if strings.Contains(c.res.Output, "FLOWBOX_SECRET") || strings.Contains(c.res.Output, "hunter2") {
		t.Fatalf("the engine's environment leaked:\n%s", c.res.Output)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(c.res.Output), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	home := env["HOME"]
	if env["PATH"] != exectool.HostPATH || env["LANG"] != "C.UTF-8" || home == "" || env["TMPDIR"] != home || env["pwd"] != home {
		t.Errorf("environment = %v; want PATH=%s, LANG=C.UTF-8, HOME = TMPDIR = the working directory", env, exectool.HostPATH)
	}
	// Only these, and what sh itself sets (PWD, SHLVL, _).
	for k := range env {
		switch k {
		case "PATH", "HOME", "TMPDIR", "LANG", "PWD", "SHLVL", "_", "pwd":
		default:
			t.Errorf("unexpected variable %s=%s", k, env[k])
		}
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the working directory %s is still there (%v)", home, err)
	}
}

// TestHostWorkingDirectoryRemoved: what the program leaves unreadable
// in its directory is removed with it.
func TestHostWorkingDirectoryRemoved(t *testing.T) {
	tool := declare(t, map[string]any{"name": "mess", "description": "d", "runIn": "host",
		"exec": []string{"sh", "-c", `mkdir -p locked/inner && touch locked/inner/f && chmod 000 locked/inner locked && pwd`}})
	c := run(t, place{}, tool, `{}`)
	dir := strings.TrimSpace(c.res.Output)
	if c.err != nil || c.res.IsError || dir == "" {
		t.Fatalf("got %+v, %v", c.res, c.err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", dir, err)
	}
}

// TestHostCancel: the end of ctx kills the program and what it started,
// and is the caller's error.
func TestHostCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool := declare(t, map[string]any{"name": "wait", "description": "d", "runIn": "host", "timeout_seconds": 300,
		"exec": []string{"sh", "-c", "sleep 300 & echo $! > " + dir + "/pid; echo started; sleep 300"}})
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var once sync.Once
	res, err := tool.Run(ctx, exectool.Request{Arguments: `{}`, OnOutput: func(s sandbox.Stream, p []byte) {
		if strings.Contains(string(p), "started") {
			once.Do(cancel)
		}
	}})
	if !errors.Is(err, context.Canceled) || !res.IsError || res.Duration > time.Minute {
		t.Fatalf("got %+v, %v; want IsError and context.Canceled, long before 300 s", res, err)
	}
	b, _ := os.ReadFile(dir + "/pid")
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || alive(pid) {
		t.Errorf("the background sleep %q (%v) is still alive", b, err)
	}
}

// TestHostLeftoversEnd: what a program leaves running when it exits
// ends with the call, and does not hold the call open.
func TestHostLeftoversEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool := declare(t, map[string]any{"name": "bg", "description": "d", "runIn": "host",
		"exec": []string{"sh", "-c", "sleep 300 & echo $! > " + dir + "/pid; echo done"}})
	c := run(t, place{}, tool, `{}`)
	if c.err != nil || c.res.IsError || c.res.Output != "done\n" || c.res.Duration > time.Minute {
		t.Fatalf("got %+v, %v; want done, long before the background sleep's 300 s", c.res, c.err)
	}
	b, _ := os.ReadFile(dir + "/pid")
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || alive(pid) {
		t.Errorf("the background sleep %q (%v) is still alive", b, err)
	}
}

func TestHostProgramNotExecutable(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := declare(t, map[string]any{"name": "noexec", "description": "d", "runIn": "host", "exec": []string{script}})
	c := run(t, place{}, tool, `{}`)
	if c.err != nil || !c.res.IsError || c.res.Output != "program not executable: "+script {
		t.Errorf("got %+v, %v; want IsError, program not executable", c.res, c.err)
	}
}

// TestHostRelativeProgram: a relative path is the declaring file's
// neighbour, whatever the engine's working directory.
func TestHostRelativeProgram(t *testing.T) {
	t.Parallel()
	tools, err := exectool.Load("testdata/tools.json")
	if err != nil {
		t.Fatal(err)
	}
	c := run(t, place{}, tools[1], `{"text":"hello"}`)
	if c.err != nil || c.res.IsError || strings.TrimSpace(c.res.Output) != "HELLO" {
		t.Errorf("shout = %+v, %v; want HELLO", c.res, c.err)
	}
}

// TestSandboxRequest: a sandbox tool's command goes through the chain
// with the caller's actor, the tool's timeout and the person's approval,
// and the policy's refusals reach the caller as the errors sandbox_shell
// gets.
func TestSandboxRequest(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse([]byte(`{"rules":[` +
		`{"id":"no-rm","command":"rm","decision":"forbid","justification":"nothing is deleted here"},` +
		`{"id":"ask-wc","command":"wc","decision":"ask","justification":"counting needs a person"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []sandbox.ExecRequest
	capture := sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			mu.Lock()
			seen = append(seen, call.Request)
			mu.Unlock()
			return next(ctx, call)
		}
	}}
	judge := policy.Middleware(func(ctx context.Context, call *sandbox.Call) (policy.Policy, *policy.History, error) {
		return pol, nil, nil
	})
	p := bwrapPlace(t, capture, judge)
	actor := sandbox.Actor{UserID: "user-1", ToolCallID: "call-7", Via: "key-1"}
	request := func(args, approved string) exectool.Request {
		return exectool.Request{Arguments: args, Scope: p.scope, Actor: actor, Sandbox: p.sb, Approved: approved}
	}

	t.Run("actor, timeout and command", func(t *testing.T) {
		tool := declare(t, map[string]any{"name": "echo", "description": "d", "runIn": "sandbox", "timeout_seconds": 7, "exec": []string{"cat"}})
		res, err := tool.Run(testCtx(t), request(`{"a":1}`, ""))
		if err != nil || res.Output != `{"a":1}` {
			t.Fatalf("got %+v, %v", res, err)
		}
		cmd, problem := tool.SandboxCommand(`{"a":1}`)
		if problem != "" || cmd != `printf '%s' '{"a":1}' | cat` {
			t.Errorf("SandboxCommand = %q, %q", cmd, problem)
		}
		mu.Lock()
		last := seen[len(seen)-1]
		mu.Unlock()
		wantActor := actor
		wantActor.Kind = sandbox.ActorAgent
		if last.Command != cmd || last.Timeout != 7*time.Second || last.Actor != wantActor {
			t.Errorf("request = command %q, timeout %s, actor %+v; want %q, 7s, %+v", last.Command, last.Timeout, last.Actor, cmd, wantActor)
		}
	})

	t.Run("refused", func(t *testing.T) {
		tool := declare(t, map[string]any{"name": "wipe", "description": "d", "runIn": "sandbox", "exec": []string{"rm", "-rf", "/workspace/x"}})
		res, err := tool.Run(testCtx(t), request(`{}`, ""))
		var refused *sandbox.RefusedError
		if !errors.Is(err, sandbox.ErrRefused) || !errors.As(err, &refused) || refused.Rule != "no-rm" {
			t.Fatalf("err = %v, want a refusal by no-rm", err)
		}
		if !res.IsError || !strings.Contains(res.Output, "no-rm") {
			t.Errorf("result = %+v, want IsError naming the rule", res)
		}
	})

	t.Run("asks, then runs approved", func(t *testing.T) {
		tool := declare(t, map[string]any{"name": "count", "description": "d", "runIn": "sandbox", "exec": []string{"wc", "-c"}})
		args := `{"text":"four"}`
		res, err := tool.Run(testCtx(t), request(args, ""))
		var ask *policy.AskError
		if !errors.As(err, &ask) || ask.Verdict.Rule != "ask-wc" || !res.IsError {
			t.Fatalf("got %+v, %v; want an AskError of ask-wc", res, err)
		}
		cmd, problem := tool.SandboxCommand(args)
		if problem != "" {
			t.Fatal(problem)
		}
		res, err = tool.Run(testCtx(t), request(args, cmd))
		if err != nil || res.IsError || strings.TrimSpace(res.Output) != strconv.Itoa(len(args)) {
			t.Errorf("approved: got %+v, %v; want the input's size %d", res, err, len(args))
		}
	})
}

func TestSandboxUnavailable(t *testing.T) {
	t.Parallel()
	tool := declare(t, map[string]any{"name": "s", "description": "d", "runIn": "sandbox", "exec": []string{"cat"}})
	res, err := tool.Run(testCtx(t), exectool.Request{Arguments: `{}`, Scope: sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}})
	if !errors.Is(err, sandbox.ErrUnavailable) || !res.IsError || res.Output == "" {
		t.Errorf("without a sandbox: got %+v, %v; want IsError and ErrUnavailable", res, err)
	}
}

// TestSandboxCommandQuoting: whatever the arguments hold, the command
// line has them as one quoted word, and the program's words as declared.
func TestSandboxCommandQuoting(t *testing.T) {
	t.Parallel()
	tool := declare(t, map[string]any{"name": "q", "description": "d", "runIn": "sandbox", "exec": []string{"python3", "-c", "print('hi $USER')"}})
	tests := []struct{ args, want string }{
		{`{}`, `printf '%s' '{}' | python3 -c "print('hi \$USER')"`},
		{`{"s":"'; rm -rf / #"}`, `printf '%s' '{"s":"\u0027; rm -rf / #"}' | python3 -c "print('hi \$USER')"`},
		{"{\"s\":\"a\u2028b\x7f\"}", "printf '%s' '{\"s\":\"a\\u2028b\\u007f\"}' | python3 -c \"print('hi \\$USER')\""},
	}
	for _, tc := range tests {
		got, problem := tool.SandboxCommand(tc.args)
		if got != tc.want || problem != "" {
			t.Errorf("SandboxCommand(%q) = %q, %q\nwant %q", tc.args, got, problem, tc.want)
		}
	}
	host := declare(t, map[string]any{"name": "h", "description": "d", "runIn": "host", "exec": []string{"cat"}})
	if cmd, problem := host.SandboxCommand(`{}`); cmd != "" || !strings.Contains(problem, "runs on the host") {
		t.Errorf("a host tool's SandboxCommand = %q, %q; want none, and why", cmd, problem)
	}
	if _, problem := tool.SandboxCommand(`{"x":` + strings.Repeat(" ", 10) + `"` + strings.Repeat("z", exectool.MaxSandboxInput) + `"}`); !strings.Contains(problem, fmt.Sprint(exectool.MaxSandboxInput)) {
		t.Errorf("too large: problem = %q, want one naming the limit", problem)
	}
}

// TestExampleFile loads examples/exec-tools.json and runs its tools
// where they run.
func TestExampleFile(t *testing.T) {
	t.Parallel()
	tools, err := exectool.Load("../../examples/exec-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*exectool.Tool{}
	for _, tool := range tools {
		byName[tool.Name()] = tool
	}
	wc, query := byName["word_count"], byName["json_query"]
	if wc == nil || query == nil || wc.RunIn() != exectool.OnHost || query.RunIn() != exectool.InSandbox || !wc.ReadOnly() || !query.ReadOnly() {
		t.Fatalf("example tools = %v, want a read-only host word_count and a read-only sandbox json_query", byName)
	}

	t.Run("word_count", func(t *testing.T) {
		testenv.Need(t, "python3", onHostPATH("python3"))
		c := run(t, place{}, wc, `{"text":"one two\nthree"}`)
		if c.err != nil || c.res.IsError || strings.TrimSpace(c.res.Output) != `{"lines": 2, "words": 3, "characters": 13}` {
			t.Errorf("got %+v, %v", c.res, c.err)
		}
	})
	t.Run("json_query", func(t *testing.T) {
		p := bwrapPlace(t)
		if !p.python {
			testenv.Need(t, "python3", errors.New("no /usr/bin/python3 for the sandbox"))
		}
		write := `printf '%s' '{"items":[{"name":"Ada"},{"name":"Grace"}]}' > /workspace/data.json`
		if res, err := p.sb.Exec(testCtx(t), p.scope, sandbox.ExecRequest{Command: write, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
			t.Fatalf("write the data: %+v, %v", res, err)
		}
		c := run(t, p, query, `{"file":"/workspace/data.json","path":"items.1.name"}`)
		if c.err != nil || c.res.IsError || strings.TrimSpace(c.res.Output) != `"Grace"` {
			t.Errorf("got %+v, %v; want \"Grace\"", c.res, c.err)
		}
		c = run(t, p, query, `{"file":"/workspace/data.json","path":"items.5"}`)
		if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "IndexError") {
			t.Errorf("a path that is not there: got %+v, %v; want IsError with the program's stderr", c.res, c.err)
		}
		c = run(t, p, query, `{"file":"/etc/passwd"}`)
		if !c.res.IsError || !strings.Contains(c.res.Output, "file: ") {
			t.Errorf("a file outside /workspace: got %+v, want the schema's refusal", c.res)
		}
	})
}

// TestSchemaFile: the schema as a whole (an object or an array, as
// editors use it) accepts the example and test declarations, and
// refuses what Load refuses.
func TestSchemaFile(t *testing.T) {
	t.Parallel()
	data, err := fs.ReadFile(schemas.FS, "exectool.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("flowbox/exectool", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("flowbox/exectool")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(text []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
	for _, f := range []string{"../../examples/exec-tools.json", "testdata/tools.json", "testdata/single.json"} {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(text); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, bad := range []string{`[]`, `[{"name":"x","description":"d","exec":[],"runIn":"host"}]`, `{"name":"sandbox_shell","description":"d","exec":["true"],"runIn":"host"}`} {
		if validate([]byte(bad)) == nil {
			t.Errorf("the schema accepts %s", bad)
		}
	}
}

// TestSeedFormatLoads: a declaration in the seed's format (name,
// description, input_schema, exec, timeout_seconds; no runIn) loads and
// runs in the chat's sandbox, and says it was defaulted; a declared runIn
// is kept.
func TestSeedFormatLoads(t *testing.T) {
	tools, err := loadText(t, map[string]string{"seed.json": `[
  {"name": "word_count", "description": "Count the words of a text.",
   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
   "exec": ["wc", "-w"], "timeout_seconds": 10},
  {"name": "shout", "description": "Upper-case a text.", "exec": ["tr", "a-z", "A-Z"], "runIn": "host"}]`}, "seed.json")
	if err != nil {
		t.Fatalf("the seed's format: %v", err)
	}
	if got := tools[0]; got.RunIn() != exectool.InSandbox || !got.Defaulted() || got.Timeout() != 10*time.Second {
		t.Errorf("word_count: runIn %q, defaulted %v, timeout %v; want sandbox, true, 10s", got.RunIn(), got.Defaulted(), got.Timeout())
	}
	if got := tools[1]; got.RunIn() != exectool.OnHost || got.Defaulted() {
		t.Errorf("shout: runIn %q, defaulted %v; want host as declared", got.RunIn(), got.Defaulted())
	}
}

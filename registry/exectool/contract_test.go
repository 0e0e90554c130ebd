package exectool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/registry/exectool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// place is where a contract case runs: the host, or a sandbox behind a
// real manager.
type place struct {
	runIn exectool.RunIn
	sb    *sandbox.Manager // nil on the host
	scope sandbox.Scope
	// dir is a directory programs may write to and the test can read,
	// as programs see it.
	dir    string
	python bool
}

// read returns the file at path as programs see it; ok is false when it
// does not exist.
func (p place) read(t *testing.T, path string) (content string, ok bool) {
	t.Helper()
	if p.sb == nil {
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b), true
	}
	q, err := syntax.Quote(path, syntax.LangPOSIX)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.sb.Exec(testCtx(t), p.scope, sandbox.ExecRequest{Command: "if [ -e " + q + " ]; then cat " + q + "; else exit 7; fi", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("read %s in the sandbox: %v", path, err)
	}
	switch res.ExitCode {
	case 0:
		return res.Stdout, true
	case 7:
		return "", false
	}
	t.Fatalf("read %s in the sandbox: exit %d, stderr %q", path, res.ExitCode, res.Stderr)
	return "", false
}

func hostPlace(t *testing.T) place {
	return place{runIn: exectool.OnHost, dir: t.TempDir(), python: onHostPATH("python3") == nil}
}

// onHostPATH says why a host program cannot be found where host tools
// look for it.
func onHostPATH(name string) error {
	for _, dir := range filepath.SplitList(exectool.HostPATH) {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s is not in %s", name, exectool.HostPATH)
}

var chatSeq atomic.Int64

// managerPlace is a real manager over provider, with the test's own
// MongoDB-wire database, and a chat of its own whose sandbox is deleted
// at the end.
func managerPlace(t *testing.T, provider sandbox.Provider, python bool, mw ...sandbox.Middleware) place {
	t.Helper()
	store, err := mongostore.New(testCtx(t), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatalf("mongostore.New: %v", err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: provider, Store: store, Middleware: mw})
	if err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "app-exectool", UserID: "user-1",
		ChatID: fmt.Sprintf("chat-%d-%d", time.Now().UnixNano(), chatSeq.Add(1))}
	t.Cleanup(func() {
		if err := m.Delete(context.Background(), scope.SandboxID()); err != nil {
			t.Errorf("delete the test's sandbox: %v", err)
		}
	})
	return place{runIn: exectool.InSandbox, sb: m, scope: scope, dir: sandbox.WorkspaceDir, python: python}
}

func bwrapPlace(t *testing.T, mw ...sandbox.Middleware) place {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(testCtx(t)))
	// bwrap shows the host's /usr: python3 is there when the host has it.
	_, statErr := os.Stat("/usr/bin/python3")
	return managerPlace(t, p, statErr == nil, mw...)
}

// dockerPlace runs the product's image, flowbox-sandbox:bookworm (bash,
// python3).
func dockerPlace(t *testing.T) place {
	t.Helper()
	p := dockertest.Provider(t, docker.Config{Image: dockertest.SandboxImage(t), Shell: docker.DefaultShell, AgentBinary: docker.NoAgent})
	return managerPlace(t, p, true)
}

// busyboxPlace runs the tiny test image: busybox's sh, no python.
func busyboxPlace(t *testing.T) place {
	t.Helper()
	p := dockertest.Provider(t, docker.Config{AgentBinary: docker.NoAgent})
	return managerPlace(t, p, false)
}

var places = []struct {
	name string
	make func(t *testing.T) place
}{
	{"host", hostPlace},
	{"bwrap", func(t *testing.T) place { return bwrapPlace(t) }},
	{"docker", dockerPlace},
	{"docker-busybox", busyboxPlace},
}

// declare loads one declaration written to a file of its own.
func declare(t *testing.T, decl map[string]any) *exectool.Tool {
	t.Helper()
	b, err := json.Marshal(decl)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "tool.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tools, err := exectool.Load(f)
	if err != nil {
		t.Fatalf("Load(%s): %v", b, err)
	}
	return tools[0]
}

// call is what one Run returned, with the output its callback saw.
type call struct {
	res  exectool.Result
	err  error
	live string
}

func run(t *testing.T, p place, tool *exectool.Tool, args string) call {
	t.Helper()
	var mu sync.Mutex
	var live strings.Builder
	res, err := tool.Run(testCtx(t), exectool.Request{
		Arguments: args, Scope: p.scope, Sandbox: sandboxOf(p),
		Actor: sandbox.Actor{UserID: p.scope.UserID, ToolCallID: "call-1"},
		OnOutput: func(s sandbox.Stream, b []byte) {
			mu.Lock()
			defer mu.Unlock()
			if s == sandbox.Stdout {
				live.Write(b)
			}
		},
	})
	mu.Lock()
	defer mu.Unlock()
	return call{res: res, err: err, live: live.String()}
}

// sandboxOf avoids a typed nil: the host place has no sandbox.
func sandboxOf(p place) exectool.Sandbox {
	if p.sb == nil {
		return nil
	}
	return p.sb
}

func sh(script string) func(dir string) []string {
	return func(dir string) []string { return []string{"sh", "-c", strings.ReplaceAll(script, "DIR", dir)} }
}

func fixed(args string) func(dir string) string { return func(string) string { return args } }

const strictSchema = `{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`

// injection is an argument value of every kind that would do harm on a
// command line.
type injection struct {
	Help   string `json:"help"`
	Semi   string `json:"semi"`
	Subst  string `json:"subst"`
	Back   string `json:"back"`
	Quotes string `json:"quotes"`
}

func injectionArgs(dir string) string {
	b, err := json.Marshal(injection{
		Help:   "--help",
		Semi:   "; rm -rf / ; touch " + dir + "/pwned1",
		Subst:  "$(touch " + dir + "/pwned2)",
		Back:   "`touch " + dir + "/pwned3`",
		Quotes: "' ; touch " + dir + "/pwned4 ; '\" ; touch " + dir + "/pwned5 ; \"",
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

type contractCase struct {
	name    string
	python  bool           // needs python3 where it runs
	only    exectool.RunIn // "" runs everywhere
	exec    func(dir string) []string
	schema  string
	timeout int
	args    func(dir string) string
	check   func(t *testing.T, p place, c call)
}

var contract = []contractCase{
	{
		name: "stdin JSON reaches the program", python: true,
		exec: func(string) []string {
			return []string{"python3", "-c", "import sys,json; d=json.load(sys.stdin); print(d['x'])"}
		},
		schema: strictSchema, args: fixed(`{"x": "héllo wörld"}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || c.res.IsError || c.res.Output != "héllo wörld\n" || c.res.ExitCode != 0 {
				t.Errorf("got %+v, %v; want output %q, no error", c.res, c.err, "héllo wörld\n")
			}
		},
	},
	{
		name: "stdin is the arguments as compact JSON", exec: func(string) []string { return []string{"cat"} },
		// é is printable and kept; U+200B is not and is escaped.
		args: fixed("{ \"a\": [1, 2],  \"s\": \"it's \u00e9\u200b\" }"),
		check: func(t *testing.T, p place, c call) {
			want := `{"a":[1,2],"s":"it\u0027s é\u200b"}`
			if c.err != nil || c.res.IsError || c.res.Output != want {
				t.Errorf("got output %q (%+v, %v), want %q", c.res.Output, c.res, c.err, want)
			}
		},
	},
	{
		name: "stdout is the result, live too", exec: sh("echo out; echo err >&2"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || c.res.IsError || c.res.Output != "out\n" || c.res.Stdout != "out\n" || c.res.Stderr != "err\n" {
				t.Errorf("got %+v, %v; want output and stdout %q, stderr %q", c.res, c.err, "out\n", "err\n")
			}
			if c.live != "out\n" {
				t.Errorf("live stdout = %q, want %q", c.live, "out\n")
			}
		},
	},
	{
		name: "exit code not 0 is an error with stdout", exec: sh("echo partial; echo why >&2; exit 3"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || c.res.ExitCode != 3 || c.res.Output != "partial\n" {
				t.Errorf("got %+v, %v; want IsError, exit 3, output %q", c.res, c.err, "partial\n")
			}
		},
	},
	{
		name: "stderr when stdout is empty", exec: sh("echo oops >&2; exit 2"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || c.res.ExitCode != 2 || c.res.Output != "oops\n" {
				t.Errorf("got %+v, %v; want IsError, exit 2, output %q", c.res, c.err, "oops\n")
			}
		},
	},
	{
		name: "stderr when stdout is empty, success", exec: sh("echo note >&2"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || c.res.IsError || c.res.Output != "note\n" {
				t.Errorf("got %+v, %v; want success, output %q", c.res, c.err, "note\n")
			}
		},
	},
	{
		name: "failure without output says so", exec: sh("exit 5"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "exit code 5") {
				t.Errorf("got %+v, %v; want IsError, output naming exit code 5", c.res, c.err)
			}
		},
	},
	{
		name: "timeout kills the program and what it started",
		// The grandchild appends to ticks until it is killed.
		exec:    sh(`sh -c 'while :; do echo x >> DIR/ticks; sleep 0.2; done' & echo $! > DIR/pid; echo started; sleep 300`),
		timeout: 2, args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.TimedOut || !c.res.IsError || c.res.ExitCode != 124 || c.res.Duration > time.Minute {
				t.Fatalf("got %+v, %v; want TimedOut, IsError, exit 124, well before the program's 300 s", c.res, c.err)
			}
			if !strings.HasPrefix(c.res.Output, "started\n") || !strings.Contains(c.res.Output, "timed out after 2s") {
				t.Errorf("output = %q, want stdout and a line saying it timed out", c.res.Output)
			}
			before, _ := p.read(t, p.dir+"/ticks")
			if before == "" {
				t.Fatal("the grandchild never ran; the test proves nothing")
			}
			if p.sb == nil {
				pidText, _ := p.read(t, p.dir+"/pid")
				if pid, err := strconv.Atoi(strings.TrimSpace(pidText)); err != nil || alive(pid) {
					t.Errorf("grandchild %q (%v) is still alive", pidText, err)
				}
			}
			time.Sleep(time.Second) // five ticks if it were alive
			if after, _ := p.read(t, p.dir+"/ticks"); after != before {
				t.Errorf("the grandchild still runs: ticks grew from %d to %d", len(before), len(after))
			}
		},
	},
	{
		name: "output is capped, head and tail kept", exec: sh("yes x | head -c 100000"),
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || c.res.IsError || !c.res.Truncated {
				t.Fatalf("got %+v, %v; want success, Truncated", c.res, c.err)
			}
			if n := len(c.res.Stdout); n > sandbox.DefaultOutputLimit+100 || !strings.Contains(c.res.Stdout, "bytes truncated") ||
				!strings.HasPrefix(c.res.Stdout, "x\nx\n") || !strings.HasSuffix(c.res.Stdout, "x\nx\n") {
				t.Errorf("stdout is %d bytes, marker %v; want at most %d, head and tail kept around the marker", n, strings.Contains(c.res.Stdout, "bytes truncated"), sandbox.DefaultOutputLimit)
			}
		},
	},
	{
		name: "the model's text reaches only stdin", exec: func(string) []string { return []string{"cat"} },
		args: injectionArgs,
		check: func(t *testing.T, p place, c call) {
			want := strings.ReplaceAll(injectionArgs(p.dir), "'", `\u0027`)
			if c.err != nil || c.res.IsError || c.res.Output != want {
				t.Errorf("got output %q (%v), want the arguments back %q", c.res.Output, c.err, want)
			}
			for i := 1; i <= 5; i++ {
				if _, ok := p.read(t, fmt.Sprintf("%s/pwned%d", p.dir, i)); ok {
					t.Errorf("pwned%d was created: an argument reached a shell", i)
				}
			}
		},
	},
	{
		name: "arguments that do not match the schema are not run",
		exec: sh("touch DIR/ran"), schema: strictSchema, args: fixed(`{"x": 1, "y": 2}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "x: got number, want string") ||
				!strings.Contains(c.res.Output, "y: unknown argument") {
				t.Errorf("got %+v, %v; want IsError naming x and y", c.res, c.err)
			}
			if _, ok := p.read(t, p.dir+"/ran"); ok {
				t.Error("the program ran")
			}
		},
	},
	{
		name: "a missing required argument is named",
		exec: sh("touch DIR/ran"), schema: strictSchema, args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "x: is required") {
				t.Errorf("got %+v, %v; want IsError saying x is required", c.res, c.err)
			}
			if _, ok := p.read(t, p.dir+"/ran"); ok {
				t.Error("the program ran")
			}
		},
	},
	{
		name: "arguments that are not JSON are not run",
		exec: sh("touch DIR/ran"), args: fixed(`{"x": `),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "not JSON") {
				t.Errorf("got %+v, %v; want IsError saying the arguments are not JSON", c.res, c.err)
			}
			if _, ok := p.read(t, p.dir+"/ran"); ok {
				t.Error("the program ran")
			}
		},
	},
	{
		name: "a missing program", exec: func(string) []string { return []string{"no-such-program-flowbox"} },
		args: fixed(`{}`),
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || c.res.ExitCode != 127 {
				t.Fatalf("got %+v, %v; want IsError, exit 127", c.res, c.err)
			}
			want := "not found"
			if p.sb == nil {
				want = "program not found: no-such-program-flowbox"
			}
			if !strings.Contains(c.res.Output, want) {
				t.Errorf("output = %q, want it to say %q", c.res.Output, want)
			}
		},
	},
	{
		name: "a program that writes much before reading much does not deadlock", only: exectool.OnHost,
		exec: sh("head -c 1000000 /dev/zero | tr '\\0' y; echo; wc -c"),
		args: func(string) string { return `{"x":"` + strings.Repeat("z", 1<<20) + `"}` },
		check: func(t *testing.T, p place, c call) {
			want := fmt.Sprintf("\n%d\n", len(`{"x":""}`)+1<<20)
			if c.err != nil || c.res.IsError || !c.res.Truncated || !strings.HasSuffix(c.res.Stdout, want) {
				t.Errorf("got %+v, %v; want stdout ending in the input's size %q", tail(c.res.Stdout), c.err, want)
			}
		},
	},
	{
		name: "arguments too large for a sandbox command are refused", only: exectool.InSandbox,
		exec: sh("touch DIR/ran"),
		args: func(string) string { return `{"x":"` + strings.Repeat("z", exectool.MaxSandboxInput) + `"}` },
		check: func(t *testing.T, p place, c call) {
			if c.err != nil || !c.res.IsError || !strings.Contains(c.res.Output, "at most 65536") {
				t.Errorf("got output %q, %v; want IsError naming the limit", c.res.Output, c.err)
			}
			if _, ok := p.read(t, p.dir+"/ran"); ok {
				t.Error("the program ran")
			}
		},
	},
}

func tail(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}

// alive reports whether pid stays a live process (not a zombie).
func alive(pid int) bool {
	// SIGKILL is delivered when the process next runs, which on a
	// busy machine is not the instant kill returns: a process still
	// there after 10 s was not killed.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !running(pid) {
			return false
		}
		if time.Now().After(end) {
			return true
		}
	}
}

// running: pid exists and is not a zombie.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestContract runs the exec tool contract (X2, X3) on the host and in
// each sandbox provider, through a real manager.
func TestContract(t *testing.T) {
	for _, pl := range places {
		t.Run(pl.name, func(t *testing.T) {
			t.Parallel()
			p := pl.make(t)
			for i, tc := range contract {
				t.Run(tc.name, func(t *testing.T) {
					if tc.only != "" && tc.only != p.runIn {
						t.Skipf("only %s", tc.only)
					}
					if tc.python && !p.python {
						t.Skip("no python3 here")
					}
					// Each case has a directory of its own.
					dir := fmt.Sprintf("%s/case%d", p.dir, i)
					if p.sb == nil {
						if err := os.Mkdir(dir, 0o755); err != nil {
							t.Fatal(err)
						}
					} else if res, err := p.sb.Exec(testCtx(t), p.scope, sandbox.ExecRequest{Command: "mkdir -p " + dir, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
						t.Fatalf("mkdir in the sandbox: %+v, %v", res, err)
					}
					cp := p
					cp.dir = dir
					decl := map[string]any{"name": "case", "description": tc.name, "exec": tc.exec(dir), "runIn": string(p.runIn)}
					if tc.schema != "" {
						decl["input_schema"] = json.RawMessage(tc.schema)
					}
					if tc.timeout > 0 {
						decl["timeout_seconds"] = tc.timeout
					}
					tool := declare(t, decl)
					tc.check(t, cp, run(t, cp, tool, tc.args(dir)))
				})
			}
		})
	}
}

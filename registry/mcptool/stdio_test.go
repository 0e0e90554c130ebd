package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/policy"
)

// buildEcho builds testdata/mcp-echo as a static binary (the Docker test
// image has no dynamic loader) and returns its bytes.
func buildEcho(t *testing.T) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "mcp-echo")
	cmd := exec.Command(goBin, "build", "-o", out, "./testdata/mcp-echo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./testdata/mcp-echo: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorder notes the commands that reach the sandbox chain, with who
// asked for them.
type recorder struct {
	mu    sync.Mutex
	calls []sandbox.ExecRequest
}

func (r *recorder) middleware() sandbox.Middleware {
	return sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			r.mu.Lock()
			r.calls = append(r.calls, call.Request)
			r.mu.Unlock()
			return next(ctx, call)
		}
	}}
}

func (r *recorder) last() sandbox.ExecRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[len(r.calls)-1]
}

// testPolicy forbids one server's program and asks a person before add
// is called: the stdio servers' commands are judged as any other.
var testPolicy = policy.Policy{Rules: []policy.Rule{
	{ID: "no-secret-server", Command: policy.Globs{"/workspace/mcp-secret"}, Decision: policy.Forbid, Justification: "that server is off limits"},
	{ID: "ask-add", Command: policy.Globs{"printf"}, Args: []policy.ArgMatch{{Glob: policy.Globs{`*"name":"add"*`}}},
		Decision: policy.Ask, Justification: "adding needs a person"},
	{ID: "ask-asked", Command: policy.Globs{"/workspace/mcp-asked"}, Decision: policy.Ask, Justification: "this server needs a person"},
}}

func chain(rec *recorder) []sandbox.Middleware {
	src := func(ctx context.Context, call *sandbox.Call) (policy.Policy, *policy.History, error) {
		return testPolicy, nil, nil
	}
	return []sandbox.Middleware{rec.middleware(), policy.Middleware(src)}
}

// TestStdioInBwrap keeps the server running in the chat's sandbox
// (bwrap gives commands standard input), on the per-command path and in
// the long-lived namespace.
func TestStdioInBwrap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent string
	}{{"per-command", ""}, {"namespace", testenv.EngineBinary(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: tc.agent})
			if err != nil {
				t.Fatal(err)
			}
			testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
			exerciseStdio(t, p, true)
		})
	}
}

// TestStdioInDocker keeps the server running in a container of the
// busybox test image through the agent, and runs one command per
// operation through Docker's exec, which has no standard input.
func TestStdioInDocker(t *testing.T) {
	t.Run("agent", func(t *testing.T) {
		exerciseStdio(t, dockertest.Provider(t, docker.Config{AgentBinary: dockertest.AgentBinary(t)}), true)
	})
	t.Run("exec", func(t *testing.T) {
		exerciseStdio(t, dockertest.Provider(t, docker.Config{AgentBinary: docker.NoAgent}), false)
	})
}

// exerciseStdio runs the stdio servers in the provider's sandboxes: kept
// running (one server for every operation of the chat) when kept, else
// one command per operation.
func exerciseStdio(t *testing.T, provider sandbox.Provider, kept bool) {
	ctx := context.Background()
	db := mongotest.DB(t)
	records, err := mongostore.New(ctx, db, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m, err := sandbox.New(sandbox.Config{Provider: provider, Store: records, Middleware: chain(rec)})
	if err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "app", UserID: "user", ChatID: "chat"}
	t.Cleanup(func() {
		if err := m.Delete(context.Background(), scope.SandboxID()); err != nil {
			t.Errorf("delete the sandbox: %v", err)
		}
	})

	// Install the server in the chat's workspace, as a user would.
	files, err := m.Files(ctx, scope, sandbox.Actor{UserID: "user", Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile(ctx, "/workspace/mcp-echo", buildEcho(t)); err != nil {
		t.Fatalf("copy the server into the sandbox: %v", err)
	}
	res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: "chmod +x /workspace/mcp-echo && cp /workspace/mcp-echo /workspace/mcp-secret && cp /workspace/mcp-echo /workspace/mcp-asked",
		Actor: sandbox.Actor{Kind: sandbox.ActorService}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("chmod: %+v, %v", res, err)
	}

	store := NewStore(db)
	for _, s := range []Server{
		{ID: "local", Name: "Local echo", Command: []string{"/workspace/mcp-echo"}},
		{ID: "mute", Name: "Mute", Command: []string{"/workspace/mcp-echo", "-mute"}},
		{ID: "secret", Name: "Secret", Command: []string{"/workspace/mcp-secret"}},
		{ID: "asked", Name: "Asked", Command: []string{"/workspace/mcp-asked"}},
		{ID: "missing", Name: "Missing", Command: []string{"/workspace/no-such-server"}},
		{ID: "lingering", Name: "Lingering", Command: []string{"/bin/sh", "-c", "/workspace/mcp-echo; exec sleep 60"}},
	} {
		s.Transport, s.Enabled = TransportStdio, true
		if _, err := store.Put(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	const timeout = 4 * time.Second
	client, err := New(Config{Servers: store, Sandbox: m, CallTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	var mu sync.Mutex
	var output strings.Builder
	target := Target{Scope: scope, Actor: sandbox.Actor{UserID: "user", Kind: sandbox.ActorAgent, ToolCallID: "call-1"},
		OnOutput: func(s sandbox.Stream, p []byte) {
			mu.Lock()
			output.Write(p)
			mu.Unlock()
		}}
	commands := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.calls)
	}

	t.Run("list", func(t *testing.T) {
		tools, err := client.Tools(ctx, "local", target)
		if err != nil {
			t.Fatalf("Tools: %v", err)
		}
		got := strings.Join(names(tools), ",")
		if want := "local__add,local__big,local__count,local__echo,local__sleep"; got != want {
			t.Errorf("Tools: got %s; want %s", got, want)
		}
		if echo, _ := byOriginal(tools, "echo"); !echo.ReadOnly || !strings.Contains(string(echo.InputSchema), `"text"`) {
			t.Errorf("echo: got %+v; want read-only with a text argument", echo)
		}
		last := rec.last()
		if last.Actor != target.Actor {
			t.Errorf("the listing reached the sandbox as %+v; want %+v", last.Actor, target.Actor)
		}
		if kept && (last.Command != "exec /workspace/mcp-echo" || !last.LongLived()) {
			t.Errorf("the server started as %q (long-lived %v); want the long-lived command exec /workspace/mcp-echo", last.Command, last.LongLived())
		}
	})

	t.Run("call", func(t *testing.T) {
		before := commands()
		text := `héllo 'quoted' "double" $(id) ; exit 3 ` + "\u00a0\U0001F600"
		args, _ := json.Marshal(map[string]string{"text": text})
		res, err := client.Call(ctx, "local__echo", args, target)
		if err != nil || res.IsError || res.Text != "echo: "+text {
			t.Fatalf("Call echo: %+v, %v; want the text back", res, err)
		}
		if kept {
			if res.Command != "" || commands() != before {
				t.Errorf("the call ran %d command(s) (Result.Command %q); want none: the server runs", commands()-before, res.Command)
			}
			return
		}
		last := rec.last()
		if res.Command == "" || last.Command != res.Command || last.Actor != target.Actor {
			t.Errorf("the call reached the sandbox as %q by %+v; want Result.Command by the target's actor", last.Command, last.Actor)
		}
		mu.Lock()
		streamed := output.String()
		mu.Unlock()
		if !strings.Contains(streamed, `"id":"flowbox-init"`) {
			t.Errorf("OnOutput got %q; want the server's output as it came", streamed)
		}
	})

	t.Run("state between calls", func(t *testing.T) {
		counts := make([]string, 3)
		for i := range counts {
			res, err := client.Call(ctx, "local__count", nil, target)
			if err != nil || res.IsError {
				t.Fatalf("Call count: %+v, %v", res, err)
			}
			counts[i], _, _ = strings.Cut(res.Text, " ")
		}
		want := "1,1,1" // a server for each call
		if kept {
			want = "1,2,3"
		}
		if got := strings.Join(counts, ","); got != want {
			t.Errorf("counts %s; want %s", got, want)
		}
	})

	t.Run("answer longer than the output a command keeps", func(t *testing.T) {
		const size = 3 * sandbox.DefaultOutputLimit / 2
		res, err := client.Call(ctx, "local__big", json.RawMessage(fmt.Sprintf(`{"bytes":%d}`, size)), target)
		if err != nil || res.IsError || res.Text != strings.Repeat("x", size) {
			t.Fatalf("Call big: %d bytes, isError %v, %v; want %d bytes of x", len(res.Text), res.IsError, err, size)
		}
	})

	if kept {
		t.Run("parallel calls to one server", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := range 4 {
				wg.Go(func() {
					res, err := client.Call(ctx, "local__sleep", json.RawMessage(`{"seconds":1}`), target)
					if err != nil || res.Text != "slept" {
						errs <- fmt.Errorf("call %d: %+v, %v", i, res, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})

		t.Run("started again after the sandbox stopped", func(t *testing.T) {
			if err := m.Stop(ctx, scope.SandboxID()); err != nil {
				t.Fatal(err)
			}
			res, err := client.Call(ctx, "local__count", nil, target)
			if err != nil || res.IsError || !strings.HasPrefix(res.Text, "1 ") {
				t.Fatalf("Call count after a stop: %+v, %v; want 1 from a server started anew in the restarted sandbox", res, err)
			}
		})

		t.Run("registration changed", func(t *testing.T) {
			srv, err := store.Get(ctx, "local")
			if err != nil {
				t.Fatal(err)
			}
			srv.Name = "Local echo, renamed"
			if _, err := store.Update(ctx, srv); err != nil {
				t.Fatal(err)
			}
			res, err := client.Call(ctx, "local__count", nil, target)
			if err != nil || res.IsError || !strings.HasPrefix(res.Text, "1 ") {
				t.Fatalf("Call count after the server was edited: %+v, %v; want 1 from a server started with its new settings", res, err)
			}
		})
	}

	t.Run("ask and approve", func(t *testing.T) {
		if !kept {
			// Each call is a command: an ask rule on its arguments asks
			// for that call.
			args := json.RawMessage(`{"a":2,"b":3}`)
			res, err := client.Call(ctx, "local__add", args, target)
			var ask *policy.AskError
			if !errors.As(err, &ask) || ask.Verdict.Rule != "ask-add" || !res.IsError || res.Command == "" {
				t.Fatalf("Call add: %+v, %v; want the ask rule's *policy.AskError and the command to approve", res, err)
			}
			approved := target
			approved.Approved = res.Command
			res, err = client.Call(ctx, "local__add", args, approved)
			if err != nil || res.IsError || res.Text != `{"sum":5}` {
				t.Fatalf("approved Call add: %+v, %v; want {\"sum\":5}", res, err)
			}
		}
		if !kept {
			return
		}
		// An ask rule on the server's program asks before it starts; once
		// approved, it runs for the chat.
		res, err := client.Call(ctx, "asked__echo", json.RawMessage(`{"text":"x"}`), target)
		var ask *policy.AskError
		if !errors.As(err, &ask) || ask.Verdict.Rule != "ask-asked" || !res.IsError || res.Command == "" {
			t.Fatalf("Call on an asked server: %+v, %v; want the ask rule's *policy.AskError and the command to approve", res, err)
		}
		approved := target
		approved.Approved = res.Command
		if res, err := client.Call(ctx, "asked__echo", json.RawMessage(`{"text":"x"}`), approved); err != nil || res.Text != "echo: x" {
			t.Fatalf("approved Call on an asked server: %+v, %v", res, err)
		}
		if res, err := client.Call(ctx, "asked__echo", json.RawMessage(`{"text":"y"}`), target); err != nil || res.Text != "echo: y" {
			t.Errorf("a later call on the approved server: %+v, %v; want its answer without another question (the server runs)", res, err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		_, err := client.Tools(ctx, "secret", target)
		var refused *sandbox.RefusedError
		if !errors.As(err, &refused) || refused.Rule != "no-secret-server" {
			t.Errorf("Tools of a forbidden server: %v; want the policy's refusal", err)
		}
		res, err := client.Call(ctx, "secret__echo", json.RawMessage(`{"text":"x"}`), target)
		if !errors.Is(err, sandbox.ErrRefused) || !res.IsError || !strings.Contains(res.Text, "off limits") {
			t.Errorf("Call on a forbidden server: %+v, %v; want the refusal as an error and in the text", res, err)
		}
	})

	t.Run("command not found", func(t *testing.T) {
		_, err := client.Tools(ctx, "missing", target)
		var se *ServerError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "not found in the sandbox") {
			t.Errorf("Tools of a missing program: %v; want a *ServerError saying it is not found", err)
		}
	})

	t.Run("server that never answers", func(t *testing.T) {
		res, err := client.Call(ctx, "mute__echo", json.RawMessage(`{"text":"x"}`), target)
		if err != nil || !res.IsError || !strings.Contains(res.Text, `MCP server "mute" is unreachable`) ||
			!strings.Contains(res.Text, "answering initialize") && !strings.Contains(res.Text, "answer initialize within") {
			t.Errorf("Call on a mute server: %+v, %v; want a result saying it never answered", res, err)
		}
	})

	t.Run("server that outlives its input", func(t *testing.T) {
		// One command per call: it holds the command until the timeout,
		// its answer still counts. Kept: it answers as any.
		res, err := client.Call(ctx, "lingering__echo", json.RawMessage(`{"text":"late"}`), target)
		if err != nil || res.IsError || res.Text != "echo: late" {
			t.Errorf("Call on a server that does not end: %+v, %v; want its answer", res, err)
		}
	})

	if !kept {
		t.Run("server that ends at the end of its input", func(t *testing.T) {
			// The input stays open for most of the timeout, then closes:
			// this SDK's server then drops the call it was still running.
			grace := inputGrace(timeout).Seconds()
			args, _ := json.Marshal(map[string]float64{"seconds": grace + 0.5})
			res, err := client.Call(ctx, "local__sleep", args, target)
			if err != nil || !res.IsError || !strings.Contains(res.Text, "answered initialize but ended") {
				t.Errorf("Call outlasting the input: %+v, %v; want a result saying it ended without answering", res, err)
			}
			res, err = client.Call(ctx, "local__sleep", json.RawMessage(`{"seconds":0.5}`), target)
			if err != nil || res.Text != "slept" {
				t.Errorf("Call of a slower tool within the grace: %+v, %v; want its answer", res, err)
			}
		})
	} else {
		t.Run("call longer than the timeout", func(t *testing.T) {
			args, _ := json.Marshal(map[string]float64{"seconds": timeout.Seconds() + 2})
			res, err := client.Call(ctx, "local__sleep", args, target)
			if err != nil || !res.IsError || !strings.Contains(res.Text, "no answer within") {
				t.Errorf("Call over the timeout: %+v, %v; want a result saying it did not answer in time", res, err)
			}
			// The server goes on serving the chat.
			if res, err := client.Call(ctx, "local__echo", json.RawMessage(`{"text":"after"}`), target); err != nil || res.Text != "echo: after" {
				t.Errorf("Call after a timed-out one: %+v, %v", res, err)
			}
		})

		t.Run("closed with the client", func(t *testing.T) {
			if err := client.Close(); err != nil {
				t.Fatal(err)
			}
			// Close ends the connection; the agent then kills and reaps the
			// server, which a command run at once may still see as a zombie.
			var (
				res sandbox.ExecResult
				err error
			)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				res, err = m.Exec(ctx, scope, sandbox.ExecRequest{Command: "ps -o args 2>/dev/null || ps", Actor: sandbox.Actor{Kind: sandbox.ActorService}})
				if err != nil || !strings.Contains(res.Stdout, "mcp-echo") {
					break
				}
			}
			if err != nil || strings.Contains(res.Stdout, "mcp-echo") {
				t.Errorf("after Close, the sandbox's processes: %+v, %v; want no server left", res, err)
			}
		})
	}
}

// refusingSandbox stands for the sandbox chain's errors that the node
// handles itself; the real chain's are tested above.
type refusingSandbox struct{ err error }

func (s refusingSandbox) Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{ExitCode: -1, Stderr: s.err.Error()}, s.err
}

func (s refusingSandbox) Ensure(ctx context.Context, scope sandbox.Scope) (string, error) {
	return "", s.err
}

func TestStdioSandboxErrorsReachTheCaller(t *testing.T) {
	ctx := context.Background()
	store := NewStore(mongotest.DB(t))
	if _, err := store.Put(ctx, Server{ID: "local", Name: "Local", Transport: TransportStdio, Command: []string{"mcp"}, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "a", UserID: "u", ChatID: "c"}
	for _, want := range []error{
		sandbox.ErrUnavailable,
		&sandbox.LimitError{Cap: sandbox.CapUser, Limit: 1, Use: 1},
		sandbox.ErrDeleted,
	} {
		t.Run(want.Error(), func(t *testing.T) {
			client, err := New(Config{Servers: store, Sandbox: refusingSandbox{err: want}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Tools(ctx, "local", Target{Scope: scope}); !errors.Is(err, want) {
				t.Errorf("Tools: %v; want %v", err, want)
			}
			res, err := client.Call(ctx, "local__echo", nil, Target{Scope: scope})
			if !errors.Is(err, want) || !res.IsError || !strings.Contains(res.Text, "could not run in the sandbox") {
				t.Errorf("Call: %+v, %v; want %v", res, err, want)
			}
		})
	}
	client, err := New(Config{Servers: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Tools(ctx, "local", Target{Scope: scope}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Tools without a sandbox: %v; want ErrUnavailable", err)
	}
}

func TestStdioCommandIsStable(t *testing.T) {
	params := []byte(`{"name":"echo","arguments":{"text":"x"}}`)
	id := requestID([]string{"/workspace/mcp"}, "tools/call", params)
	if id != requestID([]string{"/workspace/mcp"}, "tools/call", params) || id == requestID([]string{"/workspace/mcp2"}, "tools/call", params) {
		t.Fatal("request ids: the same request must give the same id, another server another")
	}
	lines, err := sessionLines("tools/call", params, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		for _, r := range l {
			if r < 0x20 || r >= 0x7f {
				t.Errorf("line %q has %q: want printable ASCII only", l, r)
			}
		}
	}
	a, _ := stdioCommand([]string{"/workspace/mcp"}, lines, id, time.Second)
	b, _ := stdioCommand([]string{"/workspace/mcp"}, lines, id, time.Second)
	if a != b {
		t.Errorf("the command line changed between two builds:\n%s\n%s", a, b)
	}
	if v := (policy.Policy{}).Judge(a, nil); v.Decision != policy.Allow {
		t.Errorf("the default policy judges the session's command %+v; want allowed", v)
	}
}

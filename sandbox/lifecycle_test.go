package sandbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// appCommands is an app's lifecycle commands, as the composition root
// reads them from the app's tool-call node.
type appCommands struct {
	startup, shutdown []string
}

func (a appCommands) StartupCommands(context.Context, sandbox.Scope) ([]string, error) {
	return a.startup, nil
}

func (a appCommands) ShutdownCommands(context.Context, sandbox.Scope) ([]string, error) {
	return a.shutdown, nil
}

// hooks records the lifecycle calls the chain sees.
type hooks struct {
	mu    sync.Mutex
	calls []string
}

func (h *hooks) middleware() sandbox.Middleware {
	return sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			if call.Hook != "" {
				h.mu.Lock()
				h.calls = append(h.calls, call.Hook+": "+call.Request.Command)
				h.mu.Unlock()
			}
			return next(ctx, call)
		}
	}}
}

func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := &hooks{}
	// The shutdown command leaves its mark in the workspace, which
	// outlives a stop.
	app := appCommands{
		startup:  []string{"echo ready > started.txt", "exit 3"},
		shutdown: []string{"date > stopped.txt"},
	}
	m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Now: e.clock.Now,
		Lifecycle: app, Middleware: []sandbox.Middleware{seen.middleware()}})
	if err != nil {
		t.Fatal(err)
	}
	scope := newScope(t)
	c := ctx(t)

	// The first command runs after the startup commands; the failed one
	// is reported with the command's result, and the sandbox works.
	res, err := m.Exec(c, scope, sandbox.ExecRequest{Command: "cat started.txt"})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "ready" {
		t.Fatalf("first command: %+v, %v", res, err)
	}
	if !strings.Contains(res.Stderr, `startup command "exit 3" failed with exit code 3`) {
		t.Errorf("the failed startup command is not reported: stderr %q", res.Stderr)
	}
	// Once only: the next command has no notice and nothing reran.
	res, err = m.Exec(c, scope, sandbox.ExecRequest{Command: "echo again >> started.txt; wc -l < started.txt"})
	if err != nil || strings.TrimSpace(res.Stdout) != "2" || res.Stderr != "" {
		t.Errorf("second command: %+v, %v", res, err)
	}

	// Stop runs the shutdown command first; a start after the stop is not
	// a creation, so startup does not run again.
	if err := m.Stop(c, scope.SandboxID()); err != nil {
		t.Fatal(err)
	}
	res, err = m.Exec(c, scope, sandbox.ExecRequest{Command: "test -s stopped.txt && wc -l < started.txt"})
	if err != nil || strings.TrimSpace(res.Stdout) != "2" || res.Stderr != "" {
		t.Errorf("after the stop: %+v, %v; want stopped.txt written and no startup rerun", res, err)
	}
	seen.mu.Lock()
	got := strings.Join(seen.calls, "\n")
	seen.mu.Unlock()
	want := "startup: echo ready > started.txt\nstartup: exit 3\nshutdown: date > stopped.txt"
	if got != want {
		t.Errorf("lifecycle calls through the chain:\n%s\nwant:\n%s", got, want)
	}

	// Opening the files of a new chat creates its sandbox and runs the
	// startup commands too.
	other := newScope(t)
	files, err := m.Files(c, other, sandbox.Actor{Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatal(err)
	}
	data, err := files.ReadFile(c, "/workspace/started.txt", 1024)
	if err != nil || strings.TrimSpace(string(data)) != "ready" {
		t.Errorf("files of a new chat: %q, %v; want the startup command's file", data, err)
	}
	if err := m.Delete(c, other.SandboxID()); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(c, scope.SandboxID()); err != nil {
		t.Fatal(err)
	}
}

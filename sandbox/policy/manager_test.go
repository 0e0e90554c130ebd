package policy_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/policy"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestThroughManager runs the middleware in a real manager's chain with
// the bwrap provider: an allowed command runs in the sandbox, a refused
// one never reaches it.
func TestThroughManager(t *testing.T) {
	root := t.TempDir()
	p, err := bwrap.New(bwrap.Config{Root: root, CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	store, err := mongostore.New(context.Background(), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	src := func(ctx context.Context, call *sandbox.Call) (policy.Policy, *policy.History, error) {
		return policy.Policy{}, nil, nil
	}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Middleware: []sandbox.Middleware{policy.Middleware(src)}})
	if err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "app", UserID: "user", ChatID: "chat"}
	ctx := context.Background()
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })

	res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: "echo hello > /workspace/kept; cat /workspace/kept"})
	if err != nil || strings.TrimSpace(res.Stdout) != "hello" {
		t.Fatalf("allowed command: %+v, %v", res, err)
	}
	res, err = m.Exec(ctx, scope, sandbox.ExecRequest{Command: `x=r; y=m; $x$y -rf /workspace/kept; bash -c "rm -rf /"`})
	var refused *sandbox.RefusedError
	if !errors.As(err, &refused) || refused.Rule != "rm-root" || res.ExitCode != -1 {
		t.Fatalf("refused command: %+v, %v; want a refusal naming rm-root", res, err)
	}
	// The first half of the refused line did not run either.
	res, err = m.Exec(ctx, scope, sandbox.ExecRequest{Command: "cat /workspace/kept"})
	if err != nil || strings.TrimSpace(res.Stdout) != "hello" {
		t.Errorf("after the refusal: %+v, %v; want the file intact", res, err)
	}
}

package policy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
)

var mwPolicy = policy.Policy{Rules: []policy.Rule{
	{ID: "ask-push", Command: policy.Globs{"git"}, Args: []policy.ArgMatch{{Equals: policy.Globs{"push"}, Position: 1}}, Decision: policy.Ask, Justification: "pushing publishes code"},
}, Limits: policy.Limits{TimeoutSeconds: 5}}

func chain(src policy.Source, next sandbox.ExecFunc) sandbox.ExecFunc {
	return policy.Middleware(src).Exec(next)
}

func TestMiddleware(t *testing.T) {
	h := policy.NewHistory()
	src := func(ctx context.Context, call *sandbox.Call) (policy.Policy, *policy.History, error) {
		return mwPolicy, h, nil
	}
	var ran []sandbox.ExecRequest
	next := func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
		ran = append(ran, call.Request)
		return sandbox.ExecResult{Stdout: "ok"}, nil
	}
	exec := chain(src, next)
	ctx := context.Background()

	res, err := exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "ls", Timeout: 30 * time.Second}})
	if err != nil || res.Stdout != "ok" || len(ran) != 1 || ran[0].Timeout != 5*time.Second {
		t.Fatalf("allowed: %+v, %v, ran %+v; want it run with the policy's 5s timeout", res, err, ran)
	}
	if _, _ = exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "ls", Timeout: 2 * time.Second}}); ran[1].Timeout != 2*time.Second {
		t.Errorf("a shorter timeout became %v", ran[1].Timeout)
	}

	res, err = exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "cd /workspace && rm -rf /"}})
	var refused *sandbox.RefusedError
	if !errors.Is(err, sandbox.ErrRefused) || !errors.As(err, &refused) || refused.Rule != "rm-root" || res.ExitCode != -1 || len(ran) != 2 {
		t.Errorf("forbidden: %+v, %v; want exit -1 and a RefusedError naming rm-root, nothing run", res, err)
	}

	_, err = exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "git push origin main"}})
	var ask *policy.AskError
	if !errors.As(err, &ask) || ask.Verdict.Rule != "ask-push" || !errors.Is(err, sandbox.ErrRefused) || !errors.As(err, &refused) || len(ran) != 2 {
		t.Errorf("ask: %v; want an AskError with the verdict, also a RefusedError", err)
	}

	// What ran is history: an alias defined by an allowed command counts next time.
	if _, err := exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "alias wipe='rm -rf'"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "wipe /"}}); !errors.Is(err, sandbox.ErrRefused) {
		t.Errorf("alias from history: %v, want refused", err)
	}

	failing := func(ctx context.Context, call *sandbox.Call) (policy.Policy, *policy.History, error) {
		return policy.Policy{}, nil, errors.New("store down")
	}
	if res, err := chain(failing, next)(ctx, &sandbox.Call{Request: sandbox.ExecRequest{Command: "ls"}}); err == nil || res.ExitCode != -1 || len(ran) != 3 {
		t.Errorf("policy unreadable: %+v, %v; want a refusal without running", res, err)
	}
}

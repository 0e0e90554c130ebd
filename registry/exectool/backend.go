package exectool

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
)

// Backend is the registry's "exec" backend: the exec tools the operator
// declared (X1–X4), shared by every session, named "exec:{name}" and
// found by their bare names too.
type Backend struct {
	tools   map[string]*Tool
	order   []string
	sandbox Sandbox
	guard   registry.Guard
}

// NewBackend is the backend of the tools; sandbox tools run in sb, and
// host tools answer to guard (the app's command policy, redaction and
// the audit, which a sandbox tool's command meets in the sandbox chain).
func NewBackend(tools []*Tool, sb Sandbox, guard registry.Guard) *Backend {
	b := &Backend{tools: map[string]*Tool{}, sandbox: sb, guard: guard}
	for _, t := range tools {
		b.tools[t.Name()] = t
		b.order = append(b.order, t.Name())
	}
	return b
}

func (b *Backend) Prefix() string { return "exec" }

func (b *Backend) Tools(ctx context.Context, scope sandbox.Scope) ([]registry.Tool, error) {
	out := make([]registry.Tool, 0, len(b.order))
	for _, name := range b.order {
		out = append(out, b.tool(b.tools[name]))
	}
	return out, nil
}

func (b *Backend) Find(ctx context.Context, scope sandbox.Scope, name string) (registry.Tool, error) {
	t, ok := b.tools[strings.TrimPrefix(name, "exec:")]
	if !ok {
		return registry.Tool{}, fmt.Errorf("%w %q: no exec tool of that name on this engine", registry.ErrNoTool, name)
	}
	return b.tool(t), nil
}

// tool is an exec tool as the registry lists it; the model knows it by
// its declared name. Concurrency-safe means it says so and changes
// nothing.
func (b *Backend) tool(t *Tool) registry.Tool {
	return registry.Tool{Name: "exec:" + t.Name(), ModelName: t.Name(), Description: t.Description(), InputSchema: t.InputSchema(),
		ReadOnly: t.ReadOnly(), Destructive: t.Destructive(), ConcurrencySafe: t.ConcurrencySafe() && t.ReadOnly(),
		Run: func(ctx context.Context, call registry.Call) (registry.Result, error) { return b.run(ctx, t, call) }}
}

func (b *Backend) run(ctx context.Context, t *Tool, call registry.Call) (registry.Result, error) {
	start := time.Now()
	call.Actor.Op = t.AuditOperation()
	if call.Actor.Tool == "" {
		call.Actor.Tool = t.Name()
	}
	if t.RunIn() == OnHost {
		// The program is judged by the app's command policy like a
		// command: a forbid refuses it, an ask waits for a person.
		if err := b.guard.Command(ctx, call, t.Name(), t.AuditOperation(), registry.QuoteArgv(t.Argv())); err != nil {
			return registry.Result{}, err
		}
	}
	res, err := t.Run(ctx, Request{Arguments: string(call.Params), Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved, Sandbox: b.sandbox})
	if t.RunIn() == OnHost {
		// A sandbox tool's command passed the sandbox's chain (policy,
		// redaction, audit); a host tool's call is redacted and recorded
		// here.
		res.Output = b.guard.Redact(ctx, call.Scope.AppID, res.Output)
		status := audit.StatusSuccess
		switch {
		case res.TimedOut:
			status = audit.StatusTimedOut
		case res.IsError:
			status = audit.StatusFailed
		}
		b.guard.Record(ctx, call, audit.Record{Tool: t.Name(), Op: t.AuditOperation(), Command: strings.Join(t.Argv(), " "),
			Status: status, ExitCode: res.ExitCode, StdoutBytes: int64(len(res.Stdout)), StderrBytes: int64(len(res.Stderr)),
			Truncated: res.Truncated}, err, start)
	}
	if err != nil {
		return registry.Result{}, err
	}
	status := registry.StatusSuccess
	switch {
	case res.TimedOut:
		status = registry.StatusTimedOut
	case res.IsError:
		status = registry.StatusFailed
	}
	return registry.Result{Text: res.Output, IsError: res.IsError, Status: status}, nil
}

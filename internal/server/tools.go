package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowbox/flowbox/nodes/exectool"
	"github.com/flowbox/flowbox/nodes/mcptool"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
	"github.com/flowbox/flowbox/web"

	"mvdan.cc/sh/v3/syntax"
)

// toolAudit redacts and audits what tools that pass no sandbox chain
// give (host exec tools, HTTP MCP servers), and judges a host tool's
// program by the app's command policy.
type toolAudit struct {
	audit *audit.Writer
	// redactor is an app's redaction, for what reaches the model without
	// passing the sandbox's chain (host tools, HTTP MCP servers).
	redactor func(ctx context.Context, appID string) *redact.Redactor
	// judge judges a host tool's command line by the app's policy.
	judge func(ctx context.Context, appID, command string) policy.Verdict
	// instance names this engine process in the records.
	instance string
}

func newToolAudit(w *audit.Writer, pol *shellPolicy) toolAudit {
	a := toolAudit{audit: w, instance: audit.DefaultInstance()}
	if pol != nil {
		a.redactor, a.judge = pol.RedactorFor, pol.judgeHost
	}
	return a
}

// newRegistry is the engine's one tool registry (A3): the sandbox's
// shell and files, the skills, the operator's exec tools (also by their
// bare names) and the admins' MCP servers. The tool-call node and the
// sandbox service API both run tools from it.
func newRegistry(svc *Services, deleteSession func(ctx context.Context, scope sandbox.Scope) error) *registry.Registry {
	a := newToolAudit(svc.AuditWriter, svc.Policy)
	exec := &execBackend{tools: map[string]*exectool.Tool{}, sandbox: svc.Manager, a: a}
	for _, t := range svc.ExecTools {
		exec.tools[t.Name()] = t
		exec.order = append(exec.order, t.Name())
	}
	reg := registry.New(exec,
		registry.Shell{Sandboxes: svc.Manager, Delete: deleteSession},
		registry.Files{Sandboxes: svc.Manager},
		registry.Skills{Catalog: svc.Skills, Sandboxes: svc.Manager},
		exec,
		&mcpBackend{servers: svc.MCPServers, client: svc.MCP, a: a})
	if svc.Policy != nil {
		reg.Before = func(ctx context.Context, t registry.Tool, call registry.Call) error {
			return a.destructive(ctx, svc.Policy, t, call)
		}
	}
	return reg
}

// destructive applies the app's policy on destructive tools to a call:
// forbid refuses it (audited), ask waits for a person's approval of the
// call as one line, the tool's name and its params.
func (a toolAudit) destructive(ctx context.Context, pol *shellPolicy, t registry.Tool, call registry.Call) error {
	if !t.Destructive {
		return nil
	}
	v := pol.judgeTool(ctx, call.Scope.AppID)
	line := t.Name + " " + clipText(string(call.Params), 2000)
	switch v.Decision {
	case policy.Forbid:
		a.record(ctx, call, audit.Record{Tool: t.Name, Op: t.Name, Command: a.redact(ctx, call.Scope.AppID, line), Rule: v.Rule,
			Decision: audit.Refused, Status: audit.StatusRefused, ExitCode: -1}, nil, time.Now())
		return &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification}
	case policy.Ask:
		if call.Approved != line {
			return policy.NewAskError(v, line)
		}
	}
	return nil
}

// execBackend is the "exec" backend: the exec tools the operator
// declared (X1–X4), shared by every session.
type execBackend struct {
	tools   map[string]*exectool.Tool
	order   []string
	sandbox exectool.Sandbox
	a       toolAudit
}

func (b *execBackend) Prefix() string { return "exec" }

func (b *execBackend) Tools(ctx context.Context, scope sandbox.Scope) ([]registry.Tool, error) {
	out := make([]registry.Tool, 0, len(b.order))
	for _, name := range b.order {
		out = append(out, b.tool(b.tools[name]))
	}
	return out, nil
}

func (b *execBackend) Find(ctx context.Context, scope sandbox.Scope, name string) (registry.Tool, error) {
	t, ok := b.tools[strings.TrimPrefix(name, "exec:")]
	if !ok {
		return registry.Tool{}, fmt.Errorf("%w %q: no exec tool of that name on this engine", registry.ErrNoTool, name)
	}
	return b.tool(t), nil
}

// tool is an exec tool as the registry lists it; the model knows it by
// its declared name. Concurrency-safe means it says so and changes
// nothing.
func (b *execBackend) tool(t *exectool.Tool) registry.Tool {
	return registry.Tool{Name: "exec:" + t.Name(), ModelName: t.Name(), Description: t.Description(), InputSchema: t.InputSchema(),
		ReadOnly: t.ReadOnly(), Destructive: t.Destructive(), ConcurrencySafe: t.ConcurrencySafe() && t.ReadOnly(),
		Run: func(ctx context.Context, call registry.Call) (registry.Result, error) { return b.run(ctx, t, call) }}
}

func (b *execBackend) run(ctx context.Context, t *exectool.Tool, call registry.Call) (registry.Result, error) {
	start := time.Now()
	call.Actor.Op = t.AuditOperation()
	if call.Actor.Tool == "" {
		call.Actor.Tool = t.Name()
	}
	if t.RunIn() == exectool.OnHost && b.a.judge != nil {
		// The program is judged by the app's command policy like a
		// command: a forbid refuses it, an ask waits for a person.
		line := quoteArgv(t.Argv())
		switch v := b.a.judge(ctx, call.Scope.AppID, line); v.Decision {
		case policy.Forbid:
			err := &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification, Hint: v.Hint}
			b.a.record(ctx, call, audit.Record{Tool: t.Name(), Op: t.AuditOperation(), Command: line, Rule: v.Rule,
				Decision: audit.Refused, Status: audit.StatusRefused, ExitCode: -1}, nil, start)
			return registry.Result{}, err
		case policy.Ask:
			if call.Approved != line {
				return registry.Result{}, policy.NewAskError(v, line)
			}
		}
	}
	res, err := t.Run(ctx, exectool.Request{Arguments: string(call.Params), Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved, Sandbox: b.sandbox})
	if t.RunIn() == exectool.OnHost {
		// A sandbox tool's command passed the sandbox's chain (policy,
		// redaction, audit); a host tool's call is redacted and recorded
		// here.
		res.Output = b.a.redact(ctx, call.Scope.AppID, res.Output)
		status := audit.StatusSuccess
		switch {
		case res.TimedOut:
			status = audit.StatusTimedOut
		case res.IsError:
			status = audit.StatusFailed
		}
		b.a.record(ctx, call, audit.Record{Tool: t.Name(), Op: t.AuditOperation(), Command: strings.Join(t.Argv(), " "),
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

// mcpBackend is the "mcp" backend: the tools of the MCP servers the
// admins registered (N6), named "mcp:{serverId}/{tool}". The connections
// and tool lists are shared; a stdio server runs in the session's
// sandbox.
type mcpBackend struct {
	servers *mcptool.Store
	client  *mcptool.Client
	a       toolAudit
}

func (b *mcpBackend) Prefix() string { return "mcp" }

// Shutdown ends the stdio servers kept running in sandboxes.
func (b *mcpBackend) Shutdown(ctx context.Context) error {
	if b.client == nil {
		return nil
	}
	return b.client.Close()
}

// Tools lists every registered server's tools; a server that cannot be
// reached is reported and its tools left out.
func (b *mcpBackend) Tools(ctx context.Context, scope sandbox.Scope) ([]registry.Tool, error) {
	if b.servers == nil {
		return nil, nil
	}
	servers, err := b.servers.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []registry.Tool
	var errs []error
	for _, srv := range servers {
		if !srv.Enabled || srv.Transport != mcptool.TransportHTTP && scope.ChatID == "" {
			continue // a stdio server is listed in a session's sandbox
		}
		tools, err := b.Expand(ctx, scope, "mcp:"+srv.ID)
		errs = append(errs, err)
		out = append(out, tools...)
	}
	return out, errors.Join(errs...)
}

// Expand gives every tool of one server ("mcp:{serverId}"), or the one
// tool a full name names.
func (b *mcpBackend) Expand(ctx context.Context, scope sandbox.Scope, name string) ([]registry.Tool, error) {
	if b.client == nil {
		return nil, fmt.Errorf("%w %q: no MCP servers on this engine", registry.ErrNoTool, name)
	}
	id, want, _ := strings.Cut(strings.TrimPrefix(name, "mcp:"), "/")
	tools, err := b.client.Tools(ctx, id, mcptool.Target{Scope: scope, Actor: sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorAgent}})
	if err != nil {
		if errors.Is(err, mcptool.ErrNotFound) {
			return nil, fmt.Errorf("%w %q: no MCP server %s", registry.ErrNoTool, name, id)
		}
		return nil, fmt.Errorf("MCP server %s: %w", id, err)
	}
	var out []registry.Tool
	for _, t := range tools {
		if want == "" || want == t.Original {
			out = append(out, b.tool(t))
		}
	}
	if want != "" && len(out) == 0 {
		return nil, fmt.Errorf("%w %q: MCP server %s has no tool %s", registry.ErrNoTool, name, id, want)
	}
	return out, nil
}

// Warmup lists the tools of every enabled HTTP server, so that the
// first session or chat that uses them finds them cached. A stdio server
// is listed in a sandbox, on its first use.
func (b *mcpBackend) Warmup(ctx context.Context) error {
	if b.servers == nil || b.client == nil {
		return nil
	}
	servers, err := b.servers.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, srv := range servers {
		if srv.Enabled && srv.Transport == mcptool.TransportHTTP {
			if _, err := b.client.Tools(ctx, srv.ID, mcptool.Target{}); err != nil {
				errs = append(errs, fmt.Errorf("MCP server %s: %w", srv.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (b *mcpBackend) Find(ctx context.Context, scope sandbox.Scope, name string) (registry.Tool, error) {
	if !strings.Contains(name, "/") {
		return registry.Tool{}, fmt.Errorf("%w %q: name one tool, mcp:{server}/{tool}", registry.ErrNoTool, name)
	}
	tools, err := b.Expand(ctx, scope, name)
	if err != nil {
		return registry.Tool{}, err
	}
	return tools[0], nil
}

// tool is an MCP server's tool as the registry lists it; the model knows
// it by its server-prefixed name. Concurrency-safe: a tool its server
// says changes nothing.
func (b *mcpBackend) tool(t mcptool.Tool) registry.Tool {
	def := t.LLM()
	destructive := !t.ReadOnly
	if t.Destructive != nil {
		destructive = *t.Destructive
	}
	return registry.Tool{Name: "mcp:" + t.ServerID + "/" + t.Original, ModelName: t.Name, Description: def.Function.Description,
		InputSchema: t.InputSchema, ReadOnly: t.ReadOnly, Destructive: destructive, ConcurrencySafe: t.ReadOnly,
		Run: func(ctx context.Context, call registry.Call) (registry.Result, error) { return b.run(ctx, t, call) }}
}

func (b *mcpBackend) run(ctx context.Context, t mcptool.Tool, call registry.Call) (registry.Result, error) {
	start := time.Now()
	if call.Actor.Tool == "" {
		call.Actor.Tool = t.Name
	}
	res, err := b.client.Call(ctx, t.Name, call.Params, mcptool.Target{Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved})
	if res.Command == "" {
		// A call that ran no command of its own passed no sandbox chain
		// (an HTTP server's; a call to a stdio server kept running):
		// redact and audit it here. A stdio server's call that was a
		// command was audited by the chain.
		res.Text = b.a.redact(ctx, call.Scope.AppID, res.Text)
		status := audit.StatusSuccess
		if res.IsError {
			status = audit.StatusFailed
		}
		b.a.record(ctx, call, audit.Record{Tool: t.Name, Op: "mcp:" + t.ServerID + "/" + t.Original,
			Command: b.a.redact(ctx, call.Scope.AppID, clipText(string(call.Params), 2000)), Status: status,
			StdoutBytes: int64(len(res.Text))}, err, start)
	}
	if err != nil {
		return registry.Result{}, err
	}
	return registry.Result{Text: res.Text, IsError: res.IsError}, nil
}

// record audits a call that passed no sandbox chain: r says what was
// called and how it ended; err, when set, overrides its status.
func (e toolAudit) record(ctx context.Context, call registry.Call, r audit.Record, err error, start time.Time) {
	if e.audit == nil {
		return
	}
	r.Time, r.Instance, r.Kind = start, e.instance, audit.KindCommand
	r.ActorID, r.ActorKind, r.ToolCallID, r.Via = call.Actor.UserID, string(call.Actor.Kind), call.Actor.ToolCallID, call.Actor.Via
	r.AppID, r.ChatID, r.UserID = call.Scope.AppID, call.Scope.ChatID, call.Scope.UserID
	if r.Decision == "" {
		r.Decision = audit.Allowed
	}
	r.DurationMs = time.Since(start).Milliseconds()
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		r.Status = audit.StatusClientGone
	case err != nil:
		r.Status, r.Reason = audit.StatusError, err.Error()
	}
	e.audit.Write(context.WithoutCancel(ctx), r)
}

// redact applies the app's redaction to what a tool gave.
func (e toolAudit) redact(ctx context.Context, appID, s string) string {
	if e.redactor == nil {
		return s
	}
	r := e.redactor(ctx, appID)
	if r == nil {
		return s
	}
	out, _ := r.Redact(s)
	return out
}

// clipText keeps the first n bytes of s, on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// execToolInfo describes the exec tools for builders.
func execToolInfo(tools []*exectool.Tool) []web.ExecToolInfo {
	out := make([]web.ExecToolInfo, len(tools))
	for i, t := range tools {
		out[i] = web.ExecToolInfo{Name: t.Name(), Description: t.Description(), RunIn: string(t.RunIn()), ReadOnly: t.ReadOnly(),
			Destructive: t.Destructive(), ConcurrencySafe: t.ConcurrencySafe()}
	}
	return out
}

// quoteArgv is an argv as one command line, each word quoted as the
// shell would need it: what the policy judges and a person approves.
func quoteArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			q = strconv.Quote(a)
		}
		words[i] = q
	}
	return strings.Join(words, " ")
}

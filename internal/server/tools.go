package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes/exectool"
	"github.com/flowbox/flowbox/nodes/mcptool"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
	"github.com/flowbox/flowbox/web"

	"mvdan.cc/sh/v3/syntax"
)

// extraTools gives the tool-call node the exec tools the operator
// declared and the tools of the MCP servers the admins registered, as an
// app's node chose them (its "tools" input).
type extraTools struct {
	exec    map[string]*exectool.Tool
	mcp     *mcptool.Client
	sandbox exectool.Sandbox
	audit   *audit.Writer
	// redactor is an app's redaction, for what reaches the model without
	// passing the sandbox's chain (host tools, HTTP MCP servers).
	redactor func(ctx context.Context, appID string) *redact.Redactor
	// judge judges a host tool's command line by the app's policy.
	judge func(ctx context.Context, appID, command string) policy.Verdict
	// instance names this engine process in the records.
	instance string
}

func newExtraTools(tools []*exectool.Tool, mcp *mcptool.Client, sb exectool.Sandbox, w *audit.Writer, pol *shellPolicy) *extraTools {
	e := &extraTools{exec: map[string]*exectool.Tool{}, mcp: mcp, sandbox: sb, audit: w,
		instance: audit.DefaultInstance()}
	if pol != nil {
		e.redactor, e.judge = pol.RedactorFor, pol.judgeHost
	}
	for _, t := range tools {
		e.exec[t.Name()] = t
	}
	return e
}

var _ toolcall.ExtraTools = (*extraTools)(nil)

// For returns the chosen tools: exec tools by name, "mcp:{serverId}"
// for every tool of a server, "mcp:{serverId}/{tool}" for one. What is
// no longer there, or a server that cannot be reached, is reported
// together; the other tools are offered.
func (e *extraTools) For(ctx context.Context, scope sandbox.Scope, chosen []string) ([]toolcall.Extra, error) {
	var out []toolcall.Extra
	var errs []error
	var missing []string
	servers := map[string][]string{} // server → chosen tools ("" for all)
	var order []string
	for _, name := range chosen {
		if t, ok := e.exec[name]; ok {
			out = append(out, execExtra{t: t, e: e})
			continue
		}
		if ref, ok := strings.CutPrefix(name, "mcp:"); ok && e.mcp != nil {
			id, tool, _ := strings.Cut(ref, "/")
			if _, seen := servers[id]; !seen {
				order = append(order, id)
			}
			servers[id] = append(servers[id], tool)
			continue
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("no tool %s on this engine (ask the operator, or choose the app's tools again in the builder)", strings.Join(missing, ", ")))
	}
	target := mcptool.Target{Scope: scope, Actor: sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorAgent}}
	for _, id := range order {
		tools, err := e.mcp.Tools(ctx, id, target)
		if err != nil {
			errs = append(errs, fmt.Errorf("MCP server %s: %w", id, err))
			continue
		}
		want := servers[id]
		for _, t := range tools {
			if slices.Contains(want, "") || slices.Contains(want, t.Original) {
				out = append(out, mcpExtra{t: t, e: e})
			}
		}
	}
	return out, errors.Join(errs...)
}

// mcpExtra is an MCP server's tool as the node offers it.
type mcpExtra struct {
	t mcptool.Tool
	e *extraTools
}

func (x mcpExtra) Definition() llm.Tool { return x.t.LLM() }

// ConcurrencySafe: a tool its server says changes nothing.
func (x mcpExtra) ConcurrencySafe() bool { return x.t.ReadOnly }

func (x mcpExtra) Run(ctx context.Context, call toolcall.ExtraCall) (toolcall.ExtraResult, error) {
	start := time.Now()
	res, err := x.e.mcp.Call(ctx, x.t.Name, json.RawMessage(call.Arguments), mcptool.Target{Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved})
	if res.Command == "" {
		// An HTTP server's call passed no sandbox chain: redact and audit
		// it here (a stdio server's was a command of the chain).
		res.Text = x.e.redact(ctx, call.Scope.AppID, res.Text)
		status := audit.StatusSuccess
		if res.IsError {
			status = audit.StatusFailed
		}
		x.e.record(ctx, call, audit.Record{Tool: x.t.Name, Op: "mcp:" + x.t.ServerID + "/" + x.t.Original,
			Command: x.e.redact(ctx, call.Scope.AppID, clipText(call.Arguments, 2000)), Status: status,
			StdoutBytes: int64(len(res.Text))}, err, start)
	}
	if err != nil {
		return toolcall.ExtraResult{}, err
	}
	return toolcall.ExtraResult{Output: res.Text, IsError: res.IsError}, nil
}

// execExtra is an exec tool as the node offers it.
type execExtra struct {
	t *exectool.Tool
	e *extraTools
}

func (x execExtra) Definition() llm.Tool {
	return llm.Tool{Type: "function", Function: llm.FunctionDef{Name: x.t.Name(), Description: x.t.Description(), Parameters: x.t.InputSchema()}}
}

// ConcurrencySafe: a tool that says so and changes nothing.
func (x execExtra) ConcurrencySafe() bool { return x.t.ConcurrencySafe() && x.t.ReadOnly() }

func (x execExtra) Run(ctx context.Context, call toolcall.ExtraCall) (toolcall.ExtraResult, error) {
	start := time.Now()
	call.Actor.Op = x.t.AuditOperation()
	if x.t.RunIn() == exectool.OnHost && x.e.judge != nil {
		// The program is judged by the app's command policy like a
		// command: a forbid refuses it, an ask waits for a person.
		line := quoteArgv(x.t.Argv())
		switch v := x.e.judge(ctx, call.Scope.AppID, line); v.Decision {
		case policy.Forbid:
			err := &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification, Hint: v.Hint}
			x.e.record(ctx, call, audit.Record{Tool: x.t.Name(), Op: x.t.AuditOperation(), Command: line, Rule: v.Rule,
				Decision: audit.Refused, Status: audit.StatusRefused, ExitCode: -1}, nil, start)
			return toolcall.ExtraResult{}, err
		case policy.Ask:
			if call.Approved != line {
				return toolcall.ExtraResult{}, policy.NewAskError(v, line)
			}
		}
	}
	res, err := x.t.Run(ctx, exectool.Request{Arguments: call.Arguments, Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved, Sandbox: x.e.sandbox})
	if x.t.RunIn() == exectool.OnHost {
		// A sandbox tool's command passed the sandbox's chain (policy,
		// redaction, audit); a host tool's call is redacted and recorded
		// here.
		res.Output = x.e.redact(ctx, call.Scope.AppID, res.Output)
		status := audit.StatusSuccess
		switch {
		case res.TimedOut:
			status = audit.StatusTimedOut
		case res.IsError:
			status = audit.StatusFailed
		}
		x.e.record(ctx, call, audit.Record{Tool: x.t.Name(), Op: x.t.AuditOperation(), Command: strings.Join(x.t.Argv(), " "),
			Status: status, ExitCode: res.ExitCode, StdoutBytes: int64(len(res.Stdout)), StderrBytes: int64(len(res.Stderr)),
			Truncated: res.Truncated}, err, start)
	}
	if err != nil {
		return toolcall.ExtraResult{}, err
	}
	status := "success"
	switch {
	case res.TimedOut:
		status = "timed out"
	case res.IsError:
		status = "failed"
	}
	return toolcall.ExtraResult{Output: res.Output, IsError: res.IsError, Status: status}, nil
}

// record audits a call that passed no sandbox chain: r says what was
// called and how it ended; err, when set, overrides its status.
func (e *extraTools) record(ctx context.Context, call toolcall.ExtraCall, r audit.Record, err error, start time.Time) {
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
func (e *extraTools) redact(ctx context.Context, appID, s string) string {
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

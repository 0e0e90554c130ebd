package registry

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// Guard is what a tool call that passes no sandbox chain (a program the
// engine runs on its host, an HTTP MCP server) needs in its place: the
// app's command policy, its redaction and the audit. Every field may be
// nil: that part is then skipped.
type Guard struct {
	Audit *audit.Writer
	// Redactor is an app's redaction.
	Redactor func(ctx context.Context, appID string) *redact.Redactor
	// Judge judges a command line the engine runs on its host for an app,
	// by the app's command policy.
	Judge func(ctx context.Context, appID, command string) policy.Verdict
	// JudgeTool is the app's decision on a call of a destructive tool.
	JudgeTool func(ctx context.Context, appID string) policy.Verdict
	// Instance names this engine process in the records.
	Instance string
}

// Command applies the app's command policy to a command line the engine
// runs on its host for a call: a forbid refuses it (audited under tool
// and op), an ask waits for a person's approval of exactly that line.
func (g Guard) Command(ctx context.Context, call Call, tool, op, line string) error {
	if g.Judge == nil {
		return nil
	}
	switch v := g.Judge(ctx, call.Scope.AppID, line); v.Decision {
	case policy.Forbid:
		g.Record(ctx, call, audit.Record{Tool: tool, Op: op, Command: line, Rule: v.Rule,
			Decision: audit.Refused, Status: audit.StatusRefused, ExitCode: -1}, nil, time.Now())
		return &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification, Hint: v.Hint}
	case policy.Ask:
		if call.Approved != line {
			return policy.NewAskError(v, line)
		}
	}
	return nil
}

// Destructive applies the app's policy on destructive tools to a call
// (the registry's Before): forbid refuses it (audited), ask waits for a
// person's approval of the call as one line, the tool's name and its
// params.
func (g Guard) Destructive(ctx context.Context, t Tool, call Call) error {
	if !t.Destructive || g.JudgeTool == nil {
		return nil
	}
	v := g.JudgeTool(ctx, call.Scope.AppID)
	line := t.Name + " " + ClipText(string(call.Params), 2000)
	switch v.Decision {
	case policy.Forbid:
		g.Record(ctx, call, audit.Record{Tool: t.Name, Op: t.Name, Command: g.Redact(ctx, call.Scope.AppID, line), Rule: v.Rule,
			Decision: audit.Refused, Status: audit.StatusRefused, ExitCode: -1}, nil, time.Now())
		return &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification}
	case policy.Ask:
		if call.Approved != line {
			return policy.NewAskError(v, line)
		}
	}
	return nil
}

// Record audits a call that passed no sandbox chain: r says what was
// called and how it ended; err, when set, overrides its status.
func (g Guard) Record(ctx context.Context, call Call, r audit.Record, err error, start time.Time) {
	if g.Audit == nil {
		return
	}
	r.Time, r.Instance, r.Kind = start, g.Instance, audit.KindCommand
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
	g.Audit.Write(context.WithoutCancel(ctx), r)
}

// Redact applies the app's redaction to what a tool gave.
func (g Guard) Redact(ctx context.Context, appID, s string) string {
	if g.Redactor == nil {
		return s
	}
	r := g.Redactor(ctx, appID)
	if r == nil {
		return s
	}
	out, _ := r.Redact(s)
	return out
}

// ClipText keeps the first n bytes of s, on a rune boundary.
func ClipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// QuoteArgv is an argv as one command line, each word quoted as the
// shell would need it: what the policy judges and a person approves.
func QuoteArgv(argv []string) string {
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

package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Source gives the policy a call is judged by and, optionally, its chat's
// history (nil for none). An error refuses the call: a policy that cannot
// be read does not let commands through.
type Source func(ctx context.Context, call *sandbox.Call) (Policy, *History, error)

// AskError is the refusal of a command an ask rule matched and no person
// approved (ExecRequest.Approved): it does not run; Verdict is what the
// person asked is shown. It unwraps to a *sandbox.RefusedError, so
// errors.Is(err, sandbox.ErrRefused) holds for callers that cannot ask.
type AskError struct {
	Verdict Verdict
	// Command is the command line asked about, as judged: what a person
	// approves, and what ExecRequest.Approved must then be.
	Command string
	refused *sandbox.RefusedError
}

// NewAskError is the question an ask rule raises about command, for a
// caller that judges a command outside the sandbox chain (a program the
// engine runs on its host for a tool).
func NewAskError(v Verdict, command string) *AskError {
	return &AskError{Verdict: v, Command: command, refused: &sandbox.RefusedError{
		Rule: v.Rule, Justification: "this command needs a person's approval: " + v.Justification, Hint: v.Hint}}
}

func (e *AskError) Error() string { return e.refused.Error() }
func (e *AskError) Unwrap() error { return e.refused }

// Middleware judges every command of the sandbox chain before it runs.
// A forbidden command returns ExitCode -1 and a *sandbox.RefusedError
// naming the rule, without reaching the provider; a command an ask rule
// matched returns an *AskError unless a person approved exactly this
// command line (ExecRequest.Approved). An allowed one runs with its
// timeout clamped to the policy's, and is then added to the history
// Source gave.
func Middleware(src Source) sandbox.Middleware {
	return sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			p, h, err := src(ctx, call)
			if err != nil {
				return sandbox.ExecResult{ExitCode: -1}, fmt.Errorf("read command policy: %w", err)
			}
			v := p.Judge(call.Request.Command, h)
			switch v.Decision {
			case Forbid:
				return sandbox.ExecResult{ExitCode: -1}, &sandbox.RefusedError{Rule: v.Rule, Justification: v.Justification, Hint: v.Hint}
			case Ask:
				if call.Request.Approved != "" && call.Request.Approved == call.Request.Command {
					break
				}
				return sandbox.ExecResult{ExitCode: -1}, NewAskError(v, call.Request.Command)
			}
			if t := p.Limits.Timeout(); t > 0 && !call.Request.LongLived() && (call.Request.Timeout <= 0 || call.Request.Timeout > t) {
				call.Request.Timeout = t
			}
			res, err := next(ctx, call)
			if h != nil && err == nil {
				h.Add(call.Request.Command)
			}
			return res, err
		}
	}}
}

// Timeout is the per-command timeout, zero when the policy sets none.
func (l Limits) Timeout() time.Duration { return time.Duration(l.TimeoutSeconds) * time.Second }

// Sandbox is the part of the limits a sandbox is created with.
func (l Limits) Sandbox() sandbox.Limits {
	return sandbox.Limits{CPUCount: l.CPUs, MemoryMiB: l.MemoryMiB, Pids: l.Pids}
}

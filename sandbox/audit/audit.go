// Package audit records every call that goes through the sandbox
// manager's chain, commands and file operations alike, whatever became of
// it: who asked, in which app and chat, the command (redacted), what the
// policy decided and how it ended. Middleware is the link of the chain
// that records; Store keeps the records in MongoDB, answers filtered,
// paginated queries, exports them and prunes old ones; Writer writes them
// in batches, off the command's path.
//
// It must never change a call or its result, never fail a call because a
// record could not be written (it counts and logs that instead), and never
// store output itself: only its size.
package audit

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
)

// Kind says what a record is of.
type Kind string

const (
	KindCommand Kind = "command"
	KindFile    Kind = "file"
	// KindEgress: a connection a sandbox opened through the egress proxy
	// (sandbox/egress); Command is "METHOD host:port".
	KindEgress Kind = "egress"
	// KindTerminal: a terminal session a person opened in a sandbox
	// (L1), recorded when it ends: Time its start, DurationMs its
	// length, Bytes the keystrokes sent, StdoutBytes what it showed.
	KindTerminal Kind = "terminal"
)

// Decision is what the chain decided before the call ran.
type Decision string

const (
	// Allowed: nothing refused the call (it may still have failed).
	Allowed Decision = "allowed"
	// Refused: a policy rule (Rule says which) or a cap on running
	// sandboxes ("cap:" and the cap) refused it; it did not run.
	Refused Decision = "refused"
	// Ask: an ask rule (Rule) matched; the command waits for a person
	// (status pending) and did not run. The person's answer is a later
	// record of the same tool call: Approved, or Rejected.
	Ask Decision = "ask"
	// Approved: a person approved the command an ask rule matched
	// (sandbox.ExecRequest.Approved) and it ran.
	Approved Decision = "approved"
	// Rejected: a person rejected the command, or nobody answered in
	// time (Reason "expired"); it did not run.
	Rejected Decision = "rejected"
)

// Status is how a call ended.
type Status string

const (
	StatusSuccess Status = "success" // ran, exit code 0 (a file operation: done)
	StatusFailed  Status = "failed"  // ran, exit code not 0
	// StatusTimedOut: the command ran past its timeout and was killed.
	StatusTimedOut Status = "timed_out"
	// StatusRefused: a policy rule refused it (sandbox.ErrRefused).
	StatusRefused Status = "refused"
	// StatusLimited: a cap on running sandboxes refused to start its
	// sandbox (sandbox.ErrLimit).
	StatusLimited Status = "limited"
	// StatusUnavailable: the provider could not run it
	// (sandbox.ErrUnavailable).
	StatusUnavailable Status = "unavailable"
	// StatusDeleted: its chat or app was deleted (sandbox.ErrDeleted).
	StatusDeleted Status = "deleted"
	// StatusClientGone: the caller went away (its context ended) before
	// the call finished.
	StatusClientGone Status = "client_gone"
	// StatusError: any other error (a file not found, a bad path, ...).
	StatusError Status = "error"
	// StatusPending: an ask rule matched; the command waits for a
	// person's approval (decision Ask).
	StatusPending Status = "pending"
	// StatusRejected: a person rejected the command, or its approval
	// expired (decision Rejected).
	StatusRejected Status = "rejected"
	// StatusStarted: a long-lived command (a stdio MCP server kept
	// running, sandbox.ExecRequest.Stdin) is running: recorded at its
	// first output. Another record says how it ended.
	StatusStarted Status = "started"
)

// Statuses lists every status, for the filters of the admin page.
var Statuses = []Status{StatusSuccess, StatusFailed, StatusTimedOut, StatusRefused, StatusLimited,
	StatusUnavailable, StatusDeleted, StatusClientGone, StatusError, StatusPending, StatusRejected, StatusStarted}

// Record is one audited call, as stored in the collection.
type Record struct {
	ID   bson.ObjectID `bson:"_id"`
	Time time.Time     `bson:"time"` // when the call started, to the millisecond
	// DurationMs is how long the call took in the chain, refusals
	// included.
	DurationMs int64 `bson:"durationMs"`
	// Instance names the engine process that ran the call.
	Instance string `bson:"instance"`
	Kind     Kind   `bson:"kind"`

	// Who: the actor (sandbox.Actor) and the credential it came through.
	ActorID    string `bson:"actorId,omitempty"`
	ActorKind  string `bson:"actorKind,omitempty"`
	ToolCallID string `bson:"toolCallId,omitempty"`
	Via        string `bson:"via,omitempty"`

	// Where: the scope, whose UserID owns the chat.
	AppID     string `bson:"appId"`
	ChatID    string `bson:"chatId"`
	UserID    string `bson:"userId"`
	SandboxID string `bson:"sandboxId"`

	// What: the tool ("sandbox_shell" for the model's commands, else the
	// actor's kind), the command as the redaction hook left it, or the
	// file operation and its path.
	Tool    string `bson:"tool"`
	Command string `bson:"command,omitempty"`
	Op      string `bson:"op,omitempty"`
	Path    string `bson:"path,omitempty"`

	Decision Decision `bson:"decision"`
	Rule     string   `bson:"rule,omitempty"`
	Reason   string   `bson:"reason,omitempty"`

	Status   Status `bson:"status"`
	ExitCode int    `bson:"exitCode"`
	// StdoutBytes and StderrBytes are the sizes of the output the result
	// carries (capped by the provider when Truncated); Bytes is what a
	// file operation read or wrote.
	StdoutBytes int64 `bson:"stdoutBytes"`
	StderrBytes int64 `bson:"stderrBytes"`
	Bytes       int64 `bson:"bytes,omitempty"`
	Truncated   bool  `bson:"truncated,omitempty"`
	TimedOut    bool  `bson:"timedOut,omitempty"`
	// OOMKilled and PidsLimited: while the command ran, the OOM killer
	// of its sandbox's memory limit killed a process, or a fork failed at
	// its process limit, as the provider read its cgroups (see
	// sandbox.ExecResult: only providers that report it, and a command
	// running at the same time in the sandbox may have caused it).
	OOMKilled   bool `bson:"oomKilled,omitempty"`
	PidsLimited bool `bson:"pidsLimited,omitempty"`
	// Error is the error's text, redacted, when the call failed with one.
	Error string `bson:"error,omitempty"`
	// Transcript is a terminal session's (kind terminal) when the policy
	// asks for one: what it showed, redacted (Truncated: cut at
	// policy.MaxTranscript).
	Transcript string `bson:"transcript,omitempty"`
}

// classify gives the decision, rule, reason and status of a call that
// returned err (nil: it ran) with res; ctxErr is the caller's context's
// error when the call returned.
func classify(res sandbox.ExecResult, err, ctxErr error) (Decision, string, string, Status) {
	var refused *sandbox.RefusedError
	var limit *sandbox.LimitError
	var ask *policy.AskError
	switch {
	case errors.As(err, &ask):
		return Ask, ask.Verdict.Rule, ask.Verdict.Justification, StatusPending
	case errors.As(err, &refused):
		return Refused, refused.Rule, refused.Justification, StatusRefused
	case errors.Is(err, sandbox.ErrRefused):
		return Refused, "", "", StatusRefused
	case errors.As(err, &limit):
		return Refused, "cap:" + limit.Cap, limit.Error(), StatusLimited
	case errors.Is(err, sandbox.ErrLimit):
		return Refused, "cap", "", StatusLimited
	case errors.Is(err, sandbox.ErrDeleted):
		return Allowed, "", "", StatusDeleted
	case err != nil && (ctxErr != nil || errors.Is(err, context.Canceled)):
		return Allowed, "", "", StatusClientGone
	case errors.Is(err, sandbox.ErrUnavailable):
		return Allowed, "", "", StatusUnavailable
	case err != nil:
		return Allowed, "", "", StatusError
	case res.TimedOut:
		return Allowed, "", "", StatusTimedOut
	case res.ExitCode != 0:
		return Allowed, "", "", StatusFailed
	}
	return Allowed, "", "", StatusSuccess
}

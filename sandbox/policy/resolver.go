package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// Documents gives an app's policy document (the tool-call node's policy
// input): nil for an app without one, or no such app. An error leaves
// the app's policy unreadable, and its commands refused.
type Documents func(ctx context.Context, appID string) ([]byte, error)

// Resolver is the operator's policy (FLOWBOX_POLICY_FILE) with each
// app's tightening: the command rules and limits and the output
// redaction (sandbox/redact) every sandbox call goes through, resolved
// per app and kept while the app's document stays the same.
type Resolver struct {
	base       Policy
	baseRedact redact.Config
	// Redactor is the operator's alone: for the audit's commands, which
	// are written for every app.
	Redactor *redact.Redactor
	docs     Documents

	mu        sync.Mutex
	perApp    map[string]appPolicy     // by app id, valid while the app's policy input is the same
	histories map[string]*chatCommands // by sandbox id: earlier commands of the chat
}

type appPolicy struct {
	raw      [32]byte // the input's hash
	files    bool     // the file API's reads and downloads are redacted
	policy   Policy
	egress   []string // the app's own egress list; nil: the operator's
	redactor *redact.Redactor
	err      error
}

// chatCommands is a chat's command history for the judge (aliases and
// functions defined earlier), kept for the chats this process served
// last.
type chatCommands struct {
	h *History
}

// maxRedactedFile bounds a file read or downloaded with file redaction on
// (it is read whole to be redacted).
const maxRedactedFile = 8 << 20

// maxHistories bounds the chats whose earlier commands are remembered.
const maxHistories = 10000

// LoadResolver reads the operator's policy file; empty: the built-in
// denylist and the built-in secret detectors. A bad file is an error
// naming the file and the field.
func LoadResolver(file string, docs Documents) (*Resolver, error) {
	raw := []byte("{}")
	if file != "" {
		var err error
		if raw, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("read the shell policy (FLOWBOX_POLICY_FILE): %w", err)
		}
	}
	r, err := NewResolver(raw, docs)
	if err != nil {
		return nil, fmt.Errorf("the shell policy %s: %w", file, err)
	}
	return r, nil
}

// NewResolver is the resolver of the operator's policy document (nil:
// "{}") and the apps' documents.
func NewResolver(operator []byte, docs Documents) (*Resolver, error) {
	if operator == nil {
		operator = []byte("{}")
	}
	base, redaction, err := ParseDocument(operator)
	if err != nil {
		return nil, err
	}
	r, err := redact.New(redaction)
	if err != nil {
		return nil, fmt.Errorf("redaction: %w", err)
	}
	return &Resolver{base: base, baseRedact: redaction, Redactor: r, docs: docs,
		perApp: map[string]appPolicy{}, histories: map[string]*chatCommands{}}, nil
}

// ParseDocument reads a policy document with its redaction section.
func ParseDocument(raw []byte) (Policy, redact.Config, error) {
	p, err := Parse(raw)
	if err != nil {
		return Policy{}, redact.Config{}, err
	}
	var rc redact.Config
	if len(p.Redaction) > 0 {
		dec := json.NewDecoder(bytes.NewReader(p.Redaction))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rc); err != nil {
			return Policy{}, redact.Config{}, fmt.Errorf("redaction: %w", err)
		}
	}
	return p, rc, nil
}

// forApp is the operator's policy tightened by the app's.
func (s *Resolver) forApp(ctx context.Context, appID string) (appPolicy, error) {
	var raw []byte
	if s.docs != nil {
		var err error
		if raw, err = s.docs(ctx, appID); err != nil {
			return appPolicy{}, fmt.Errorf("read the app's policy: %w", err)
		}
	}
	if raw == nil {
		return appPolicy{policy: s.base, redactor: s.Redactor, files: s.baseRedact.Files}, nil
	}
	sum := sha256.Sum256(raw)
	s.mu.Lock()
	cached, ok := s.perApp[appID]
	s.mu.Unlock()
	if ok && cached.raw == sum {
		return cached, cached.err
	}
	ap := s.compile(raw)
	ap.raw = sum
	s.mu.Lock()
	s.perApp[appID] = ap
	s.mu.Unlock()
	return ap, ap.err
}

// resolvedKey holds, in a call's context, the app policy resolved once for
// the call by the chain's first policy link.
type resolvedKey struct{}

type resolved struct {
	appID string
	ap    appPolicy
	err   error
}

// forCall is forApp for a call going through the chain: the policy the
// first link resolved, so that the links below do not each read the app
// again on the exec path.
func (s *Resolver) forCall(ctx context.Context, appID string) (appPolicy, error) {
	if r, ok := ctx.Value(resolvedKey{}).(*resolved); ok && r.appID == appID {
		return r.ap, r.err
	}
	return s.forApp(ctx, appID)
}

// resolve is the first policy link: it reads the app's policy once for
// the call and the file operation.
func (s *Resolver) resolve() sandbox.Middleware {
	with := func(ctx context.Context, appID string) context.Context {
		ap, err := s.forApp(ctx, appID)
		return context.WithValue(ctx, resolvedKey{}, &resolved{appID: appID, ap: ap, err: err})
	}
	return sandbox.Middleware{
		Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
			return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
				return next(with(ctx, call.Scope.AppID), call)
			}
		},
		File: func(next sandbox.FileFunc) sandbox.FileFunc {
			return func(ctx context.Context, call *sandbox.FileCall) (sandbox.FileResult, error) {
				return next(with(ctx, call.Scope.AppID), call)
			}
		},
	}
}

// compile merges an app's policy document into the operator's.
func (s *Resolver) compile(raw []byte) appPolicy {
	p, rc, err := ParseDocument(raw)
	if err != nil {
		return appPolicy{err: fmt.Errorf("the app's command policy: %w", err)}
	}
	merged, err := Merge(s.base, p)
	if err != nil {
		return appPolicy{err: fmt.Errorf("the app's command policy loosens the operator's: %w", err)}
	}
	mergedRC := redact.Merge(s.baseRedact, rc)
	r, err := redact.New(mergedRC)
	if err != nil {
		return appPolicy{err: fmt.Errorf("the app's redaction: %w", err)}
	}
	// JSON's [] decodes to an empty list, which turns egress off; a
	// policy without "egress" leaves it nil: the operator's list.
	return appPolicy{policy: merged, redactor: r, egress: p.Egress, files: mergedRC.Files}
}

// EgressFor is the app's egress allowlist (nil: the operator's), for the
// sandbox manager to narrow; an app whose policy cannot be read gets none.
func (s *Resolver) EgressFor(ctx context.Context, scope sandbox.Scope) []string {
	ap, err := s.forApp(ctx, scope.AppID)
	if err != nil {
		return []string{}
	}
	return ap.egress
}

// Check says what is wrong with an app's policy document about to be
// saved: not valid, or looser than the operator's.
func (s *Resolver) Check(raw []byte) error {
	return s.compile(raw).err
}

// history is the chat's earlier commands, made on first use.
func (s *Resolver) history(sandboxID string) *History {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.histories[sandboxID]; ok {
		return c.h
	}
	if len(s.histories) >= maxHistories {
		// Forget an arbitrary chat: its aliases and functions are judged
		// as plain commands from then on, which is the stricter reading
		// only in allowlist mode; the sandbox stays the boundary.
		for k := range s.histories {
			delete(s.histories, k)
			break
		}
	}
	h := NewHistory()
	s.histories[sandboxID] = &chatCommands{h: h}
	return h
}

// Middleware is the policy's links of the sandbox chain, in this order:
// the app's policy resolved once for the call, the judge (a refused
// command never runs), the app's output limit, and the redaction (what
// runs has its output redacted before anything else sees it).
func (s *Resolver) Middleware() []sandbox.Middleware {
	judge := Middleware(func(ctx context.Context, call *sandbox.Call) (Policy, *History, error) {
		ap, err := s.forCall(ctx, call.Scope.AppID)
		if err != nil {
			return Policy{}, nil, err
		}
		return ap.policy, s.history(call.SandboxID), nil
	})
	redaction := redact.Middleware(func(ctx context.Context, call *sandbox.Call) *redact.Redactor {
		return s.redactorOf(s.forCall(ctx, call.Scope.AppID))
	}, redact.WithFiles(func(ctx context.Context, call *sandbox.FileCall) *redact.Redactor {
		// Files are redacted when the operator or the app says so.
		ap, err := s.forCall(ctx, call.Scope.AppID)
		if err == nil && ap.files || err != nil && s.baseRedact.Files {
			return s.redactorOf(ap, err)
		}
		return nil
	}, maxRedactedFile))
	limit := sandbox.OutputLimit(func(ctx context.Context, call *sandbox.Call) int64 {
		ap, err := s.forCall(ctx, call.Scope.AppID)
		if err != nil {
			return 0 // the judge refuses the call before it runs
		}
		return ap.policy.Limits.OutputBytes
	})
	// The cut is outside the redaction: the redaction sees the whole
	// output, so a secret the cut would split is redacted before it.
	return []sandbox.Middleware{s.resolve(), judge, limit, redaction}
}

// TerminalTranscript is the redactor of a terminal session's transcript
// in appID's chats when the app's policy or the operator's asks for
// transcripts; nil when neither does. An app whose policy cannot be read
// gets the operator's answer.
func (s *Resolver) TerminalTranscript(ctx context.Context, appID string) *redact.Redactor {
	ap, err := s.forApp(ctx, appID)
	if err != nil {
		if s.base.Terminal.Transcript {
			return s.Redactor
		}
		return nil
	}
	if !ap.policy.Terminal.Transcript {
		return nil
	}
	return s.redactorOf(ap, nil)
}

// RedactorFor is the app's redaction (the operator's when the app's
// policy cannot be read).
func (s *Resolver) RedactorFor(ctx context.Context, appID string) *redact.Redactor {
	return s.redactorOf(s.forApp(ctx, appID))
}

// redactorOf is an app policy's redactor, or the operator's when the
// app's policy cannot be read.
func (s *Resolver) redactorOf(ap appPolicy, err error) *redact.Redactor {
	if err == nil && ap.redactor != nil {
		return ap.redactor
	}
	return s.Redactor
}

// LimitsFor is the app's sandbox limits (memory, CPUs, processes) from
// its merged policy; the manager keeps the lower of these and the
// operator's settings.
func (s *Resolver) LimitsFor(ctx context.Context, scope sandbox.Scope) sandbox.Limits {
	ap, err := s.forApp(ctx, scope.AppID)
	if err != nil {
		return sandbox.Limits{}
	}
	return ap.policy.Limits.Sandbox()
}

// RedactCommand is the audit's view of a command: the operator's
// detectors applied.
func (s *Resolver) RedactCommand(cmd string) string {
	out, _ := s.Redactor.Redact(cmd)
	return out
}

// JudgeHost judges a command line the engine runs on its host for an
// app (a host exec tool's program) by the app's command policy, as a
// sandbox command would be; an app whose policy cannot be read is
// refused.
func (s *Resolver) JudgeHost(ctx context.Context, appID, command string) Verdict {
	ap, err := s.forApp(ctx, appID)
	if err != nil {
		return unreadable(err)
	}
	return ap.policy.Judge(command, nil)
}

// JudgeTool is the app's decision on a call of a destructive tool; an
// app whose policy cannot be read is refused.
func (s *Resolver) JudgeTool(ctx context.Context, appID string) Verdict {
	ap, err := s.forApp(ctx, appID)
	if err != nil {
		return unreadable(err)
	}
	v := Verdict{Decision: ap.policy.ForDestructiveTools(), Rule: "destructiveTools"}
	switch v.Decision {
	case Ask:
		v.Justification = "the policy asks a person to approve every call of a destructive tool"
	case Forbid:
		v.Justification = "the policy forbids destructive tools"
	}
	return v
}

// unreadable is the verdict on a call of an app whose policy cannot be
// read: refused.
func unreadable(err error) Verdict {
	return Verdict{Decision: Forbid, Rule: "policy-unreadable", Justification: err.Error()}
}

// ToolCallLimits are the app's limits on tool calls (P9), per run and
// per chat; an app whose policy cannot be read gets none here (its
// commands are refused by the judge).
func (s *Resolver) ToolCallLimits(ctx context.Context, appID string) (perRun, perChat int) {
	ap, err := s.forApp(ctx, appID)
	if err != nil {
		return 0, 0
	}
	return ap.policy.Limits.ToolCallsPerRun, ap.policy.Limits.ToolCallsPerChat
}

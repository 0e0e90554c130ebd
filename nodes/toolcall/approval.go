package toolcall

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// Approval is what a person was asked about a command, and their answer.
type Approval struct {
	ID            string `json:"id"`
	Command       string `json:"command"` // as the model wrote it
	Rule          string `json:"rule,omitempty"`
	Justification string `json:"justification,omitempty"`
	// ExpiresAt is when the question lapses; set by the edge that keeps
	// the paused run.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Decision is the answer (nodes.Answers), once given.
	Decision string `json:"decision,omitempty"`
	// Edited is the command that ran instead (Decision edit).
	Edited string `json:"edited,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AwaitingResult is the response recorded for a command that waits for
// approval; the model never reads it (it reads the answer's result).
type AwaitingResult struct {
	AwaitingApproval bool   `json:"awaitingApproval"`
	Rule             string `json:"rule,omitempty"`
	Justification    string `json:"justification,omitempty"`
}

// Approvals remembers the commands approved for a whole chat
// (approval.Store).
type Approvals interface {
	ApprovedInChat(ctx context.Context, chat sandbox.Scope, command string) (bool, error)
	ApproveInChat(ctx context.Context, chat sandbox.Scope, command string) error
}

func newApprovalID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "apr_" + hex.EncodeToString(b)
}

// editedArgs are the model's arguments with the command a person wrote
// instead; the model's timeout stays.
func editedArgs(args, command string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		obj = map[string]any{}
	}
	obj["command"] = command
	b, _ := json.Marshal(obj)
	return string(b)
}

// limits are the app's tool-call limits for one run (P9).
type limits struct {
	perRun, perChat int
	// earlier counts the chat's tool calls before this run, read once
	// when the per-chat limit is first checked (-1: not yet).
	earlier int
	// resumedAt is RunCalls when a paused run resumed: the calls before
	// are in the chat's stored turns already.
	resumedAt int
	history   StoredCalls
}

// StoredCalls gives the tool calls of a chat's stored turns, each as
// the node recorded them (a JSON list of Call); none for a new chat.
type StoredCalls interface {
	StoredToolCalls(ctx context.Context, chat sandbox.Scope) ([]json.RawMessage, error)
}

// countCalls counts the calls of stored turns toward the per-chat limit:
// a call that paused for approval counts once, in the turn that answered
// it; a call the limits refused does not count.
func countCalls(turns []json.RawMessage) int {
	n := 0
	for _, raw := range turns {
		var calls []Call
		_ = json.Unmarshal(raw, &calls)
		for _, c := range calls {
			if c.Status != registry.StatusAwaiting && c.Status != registry.StatusLimited {
				n++
			}
		}
	}
	return n
}

func (n *Node) limits(ctx context.Context, run *nodes.NodeRun) *limits {
	l := &limits{earlier: -1, history: n.cfg.History}
	if n.cfg.Limits != nil {
		l.perRun, l.perChat = n.cfg.Limits(ctx, run.Chat.AppID)
	}
	return l
}

// reached says which limit the next call would pass, or "".
func (l *limits) reached(ctx context.Context, run *nodes.NodeRun, st *roundState) string {
	if l.perRun > 0 && st.RunCalls >= l.perRun {
		return fmt.Sprintf("tool-call limit reached: this run may make at most %d tool calls (the policy's limits.toolCallsPerRun); the call did not run. Answer with what you have.", l.perRun)
	}
	if l.perChat <= 0 {
		return ""
	}
	if l.earlier < 0 {
		l.earlier = 0
		if l.history != nil {
			// Unreadable, the chat's earlier calls count as none: the
			// per-run limit and the sandbox still bound what runs.
			if turns, err := l.history.StoredToolCalls(ctx, chatScope(run)); err == nil {
				l.earlier = countCalls(turns)
			}
		}
	}
	if l.earlier+st.RunCalls-l.resumedAt >= l.perChat {
		return fmt.Sprintf("tool-call limit reached: this chat may make at most %d tool calls (the policy's limits.toolCallsPerChat); the call did not run. Tell the user to start a new chat.", l.perChat)
	}
	return ""
}

package chat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/approval"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/web/api"
)

// Approvals keeps paused runs (approval.Store).
type Approvals interface {
	Put(ctx context.Context, a approval.Approval) error
	Get(ctx context.Context, id string) (approval.Approval, *approval.Answer, error)
	Pending(ctx context.Context, chat sandbox.Scope) (string, error)
	Claim(ctx context.Context, id string, a approval.Answer) error
}

// AuditRecorder takes the audit records the chat makes itself: the
// rejections of commands that never reach the sandbox chain.
type AuditRecorder interface {
	Write(ctx context.Context, r audit.Record)
}

// DefaultApprovalTimeout is how long a command waits for approval when
// Handler.ApprovalTimeout is zero.
const DefaultApprovalTimeout = 30 * time.Minute

// interactiveAnswer is the answer to an approval, sent as a chat request
// (docs/CHAT_API.md): {"interactive": {"approvalId", "decision",
// "command"?, "reason"?}} alongside chatId and appId.
type interactiveAnswer struct {
	ApprovalID string `json:"approvalId"`
	Decision   string `json:"decision"`
	Command    string `json:"command"`
	Reason     string `json:"reason"`
}

// problem says what is wrong with the answer, or "".
func (a *interactiveAnswer) problem() string {
	switch {
	case a.ApprovalID == "":
		return "interactive.approvalId is required"
	case !slices.Contains(nodes.Answers, a.Decision):
		return fmt.Sprintf("interactive.decision must be one of %s, not %q", strings.Join(nodes.Answers, ", "), a.Decision)
	case a.Decision == nodes.Edit && strings.TrimSpace(a.Command) == "":
		return `interactive.command is required with the decision "edit": the command to run instead`
	case a.Decision != nodes.Edit && a.Command != "":
		return `interactive.command goes only with the decision "edit"`
	case len(a.Reason) > 2000:
		return "interactive.reason is over 2000 characters"
	}
	return ""
}

// question is how the answer is kept in the chat's history, as the
// person's message of the turn that resumes the run.
func (a *interactiveAnswer) question(cmd string) string {
	switch a.Decision {
	case nodes.Approve:
		return "Approved: " + cmd
	case nodes.ApproveChat:
		return "Approved for this chat: " + cmd
	case nodes.Edit:
		return "Edited and approved: " + a.Command
	}
	if a.Reason != "" {
		return "Rejected: " + cmd + " (" + a.Reason + ")"
	}
	return "Rejected: " + cmd
}

// approvalFor checks an answer before the run: the approval exists in
// this chat, waits, and has not expired. It writes the refusal and
// returns false otherwise. The chat's ownership is checked already.
func (h *Handler) approvalFor(c *gin.Context, chat history.Chat, ans *interactiveAnswer) (approval.Approval, bool) {
	ctx := c.Request.Context()
	if h.Approvals == nil {
		api.Error(c, http.StatusNotFound, "this engine keeps no approvals")
		return approval.Approval{}, false
	}
	a, answered, err := h.Approvals.Get(ctx, ans.ApprovalID)
	if err == nil && (a.ChatID != chat.ID || a.AppID != chat.AppID || a.UserID != chat.UserID) {
		err = approval.ErrNotFound // another chat's: its existence is private
	}
	switch {
	case errors.Is(err, approval.ErrNotFound):
		api.Error(c, http.StatusNotFound, fmt.Sprintf("no approval %q in this chat", ans.ApprovalID))
		return approval.Approval{}, false
	case err != nil:
		h.Log.Error("read approval", "approvalId", ans.ApprovalID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the approval; retry later")
		return approval.Approval{}, false
	case answered != nil:
		refuseAnswered(c, a, *answered)
		return approval.Approval{}, false
	case !h.Now().Before(a.ExpiresAt):
		h.lapse(ctx, a, approval.Expired, "")
		api.Error(c, http.StatusGone, fmt.Sprintf("approval %s expired at %s: the command did not run; send a new message to go on", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339)))
		return approval.Approval{}, false
	}
	return a, true
}

// refuseAnswered answers a second answer: 410 when the approval expired,
// 409 when someone answered it.
func refuseAnswered(c *gin.Context, a approval.Approval, ans approval.Answer) {
	switch ans.Decision {
	case approval.Expired:
		api.Error(c, http.StatusGone, fmt.Sprintf("approval %s expired at %s: the command did not run; send a new message to go on", a.ID, a.ExpiresAt.UTC().Format(time.RFC3339)))
	case approval.Superseded:
		api.Error(c, http.StatusGone, fmt.Sprintf("approval %s lapsed: the chat went on with a new message, and the command did not run", a.ID))
	default:
		api.Error(c, http.StatusConflict, fmt.Sprintf("approval %s was answered already (%s at %s)", a.ID, ans.Decision, ans.At.UTC().Format(time.RFC3339)))
	}
}

// claim records the person's answer; false (and the refusal written)
// when another answer came first.
func (h *Handler) claim(c *gin.Context, a approval.Approval, ans *interactiveAnswer, by string) bool {
	ctx := c.Request.Context()
	err := h.Approvals.Claim(ctx, a.ID, approval.Answer{Decision: ans.Decision, Command: ans.Command, Reason: ans.Reason, By: by, At: h.Now()})
	if errors.Is(err, approval.ErrAnswered) {
		if _, answered, err := h.Approvals.Get(ctx, a.ID); err == nil && answered != nil {
			refuseAnswered(c, a, *answered)
			return false
		}
		api.Error(c, http.StatusConflict, fmt.Sprintf("approval %s was answered already", a.ID))
		return false
	} else if err != nil {
		h.Log.Error("record approval answer", "approvalId", a.ID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not record the answer; retry later")
		return false
	}
	if ans.Decision == nodes.Reject {
		h.auditRejection(ctx, a, by, ans.Reason)
	}
	return true
}

// lapse ends an approval nobody will answer: expired, or superseded by a
// new message. Lost races are fine: someone else ended it.
func (h *Handler) lapse(ctx context.Context, a approval.Approval, decision, by string) {
	if err := h.Approvals.Claim(ctx, a.ID, approval.Answer{Decision: decision, By: by, At: h.Now()}); err == nil {
		h.auditRejection(ctx, a, by, decision)
	} else if !errors.Is(err, approval.ErrAnswered) {
		h.Log.Error("record approval lapse", "approvalId", a.ID, "err", err)
	}
}

// lapsePending ends the approval the chat waits for, if any, before a new
// message runs: the paused run does not resume.
func (h *Handler) lapsePending(ctx context.Context, chat history.Chat, by string) {
	if h.Approvals == nil || chat.CreatedAt.IsZero() {
		return
	}
	id, err := h.Approvals.Pending(ctx, chat.Scope())
	if err != nil || id == "" {
		return
	}
	a, answered, err := h.Approvals.Get(ctx, id)
	if err != nil || answered != nil {
		return
	}
	decision := approval.Superseded
	if !h.Now().Before(a.ExpiresAt) {
		decision = approval.Expired
	}
	h.lapse(ctx, a, decision, by)
}

// auditRejection records a command that did not run because a person
// rejected it or nobody answered: the chain never saw that end.
func (h *Handler) auditRejection(ctx context.Context, a approval.Approval, by, reason string) {
	if h.Audit == nil {
		return
	}
	h.Audit.Write(context.WithoutCancel(ctx), approval.RejectionRecord(a, by, reason, h.Now()))
}

// keepPaused stores a paused run, with the version of the app it runs,
// so that an answer resumes it, in any engine process; it dates the
// question's expiry in the run's detail.
func (h *Handler) keepPaused(ctx context.Context, chat history.Chat, versionID string, res *nodes.Result, command string) (time.Time, error) {
	p := res.Paused
	ttl := h.ApprovalTimeout
	if ttl <= 0 {
		ttl = DefaultApprovalTimeout
	}
	now := h.Now()
	expires := now.Add(ttl)
	for _, resp := range res.Responses {
		if d, ok := resp.Detail.(toolcall.Detail); ok {
			for i := range d.ToolCalls {
				if ap := d.ToolCalls[i].Approval; ap != nil && ap.ID == p.Request.ID && ap.Decision == "" {
					ap.ExpiresAt = expires
				}
			}
		}
	}
	if h.Approvals == nil {
		return expires, errors.New("this engine keeps no approvals")
	}
	return expires, h.Approvals.Put(ctx, approval.Approval{ID: p.Request.ID, ChatID: chat.ID, AppID: chat.AppID, UserID: chat.UserID,
		Command: command, Rule: p.Request.Rule, Justification: p.Request.Justification, ToolCallID: p.Request.ToolCallID,
		CreatedAt: now, ExpiresAt: expires, Paused: *p, VersionID: versionID})
}

// interactive is the approval question in FastGPT's interactive shape:
// the SSE event "interactive" and, without streaming, the completion's
// "interactive" field.
func interactive(req nodes.ApprovalRequest, command string, expires time.Time) gin.H {
	return gin.H{"interactive": gin.H{"type": "commandApproval", "params": gin.H{
		"approvalId": req.ID, "toolCallId": req.ToolCallID, "tool": req.Tool, "command": command,
		"rule": req.Rule, "justification": req.Justification, "hint": req.Hint,
		"expiresAt": expires.UTC().Format(time.RFC3339Nano), "answers": nodes.Answers,
	}}}
}

package chat

import (
	"context"
	"encoding/json"
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

// interactiveAnswer is the answer to what a paused run asks, sent as a
// chat request (docs/CHAT_API.md) alongside chatId and appId: to a
// command approval {"interactive": {"approvalId", "decision",
// "command"?, "reason"?}}; to an interactive node's question
// {"interactive": {"interactiveId", "value"}}, the value being an
// option's key or text (userSelect) or an object of the form's fields
// (formInput).
type interactiveAnswer struct {
	ApprovalID    string          `json:"approvalId"`
	InteractiveID string          `json:"interactiveId"`
	Decision      string          `json:"decision"`
	Command       string          `json:"command"`
	Reason        string          `json:"reason"`
	Value         json.RawMessage `json:"value"`
}

// id names the question answered.
func (a *interactiveAnswer) id() string {
	if a.ApprovalID != "" {
		return a.ApprovalID
	}
	return a.InteractiveID
}

// hasValue reports whether the answer carries a value (null counts as
// none).
func (a *interactiveAnswer) hasValue() bool {
	v := strings.TrimSpace(string(a.Value))
	return v != "" && v != "null"
}

// problem says what is wrong with the answer's shape, or "". Whether it
// fits its question is checked once the question is read.
func (a *interactiveAnswer) problem() string {
	switch {
	case a.ApprovalID != "" && a.InteractiveID != "" && a.ApprovalID != a.InteractiveID:
		return "interactive.approvalId and interactive.interactiveId name different questions; send one of them"
	case a.id() == "":
		return "interactive.approvalId (a command's approval) or interactive.interactiveId (a question of the workflow) is required"
	case a.hasValue() && (a.Decision != "" || a.Command != "" || a.Reason != ""):
		return "interactive.value answers a question of the workflow; decision, command and reason answer a command's approval: send one or the other"
	case a.hasValue():
		return ""
	case a.Decision == "":
		return fmt.Sprintf("interactive needs a value (the answer to a question of the workflow) or a decision (one of %s, for a command's approval)", strings.Join(nodes.Answers, ", "))
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

// noun names what a paused run asks, for refusals.
func noun(a approval.Approval) string {
	if a.IsCommand() {
		return "approval"
	}
	return "question"
}

// notGoneOn says what did not happen because nobody answered.
func notGoneOn(a approval.Approval) string {
	if a.IsCommand() {
		return "the command did not run"
	}
	return "the workflow did not go on"
}

// approvalFor checks an answer before the run: the approval (or an
// interactive node's question) exists in this chat, waits, has not
// expired, and the answer fits it. It writes the refusal and returns
// false otherwise; for a question, it returns the answer the node
// resumes with. The chat's ownership is checked already.
func (h *Handler) approvalFor(c *gin.Context, chat history.Chat, ans *interactiveAnswer) (approval.Approval, nodes.Answer, bool) {
	ctx := c.Request.Context()
	what := "approval"
	if ans.ApprovalID == "" {
		what = "question"
	}
	if h.Approvals == nil {
		api.Error(c, http.StatusNotFound, "this engine keeps no paused runs")
		return approval.Approval{}, nodes.Answer{}, false
	}
	a, answered, err := h.Approvals.Get(ctx, ans.id())
	if err == nil && (a.ChatID != chat.ID || a.AppID != chat.AppID || a.UserID != chat.UserID) {
		err = approval.ErrNotFound // another chat's: its existence is private
	}
	switch {
	case errors.Is(err, approval.ErrNotFound):
		api.Error(c, http.StatusNotFound, fmt.Sprintf("no %s %q in this chat", what, ans.id()))
		return approval.Approval{}, nodes.Answer{}, false
	case err != nil:
		h.Log.Error("read approval", "approvalId", ans.id(), "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the "+what+"; retry later")
		return approval.Approval{}, nodes.Answer{}, false
	case answered != nil:
		refuseAnswered(c, a, *answered)
		return approval.Approval{}, nodes.Answer{}, false
	case !h.Now().Before(a.ExpiresAt):
		h.lapse(ctx, a, approval.Expired, "")
		api.Error(c, http.StatusGone, fmt.Sprintf("%s %s expired at %s: %s; send a new message to go on", noun(a), a.ID, a.ExpiresAt.UTC().Format(time.RFC3339), notGoneOn(a)))
		return approval.Approval{}, nodes.Answer{}, false
	}
	q := &a.Paused.Request
	switch {
	case a.IsCommand() && ans.hasValue():
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("%s asks to approve a command: answer with interactive.decision (one of %s), not a value", a.ID, strings.Join(nodes.Answers, ", ")))
		return approval.Approval{}, nodes.Answer{}, false
	case a.IsCommand():
		return a, nodes.Answer{Decision: ans.Decision, Command: ans.Command, Reason: ans.Reason}, true
	case !ans.hasValue():
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("%s is a question of the workflow (%s): answer with interactive.value, not a decision", a.ID, q.Kind))
		return approval.Approval{}, nodes.Answer{}, false
	}
	var value any
	if err := json.Unmarshal(ans.Value, &value); err != nil {
		api.Error(c, http.StatusBadRequest, "interactive.value is not JSON: "+err.Error())
		return approval.Approval{}, nodes.Answer{}, false
	}
	checked, err := q.Check(value)
	if err != nil {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("%s is not answered: %v", a.ID, strings.TrimPrefix(err.Error(), nodes.ErrBadAnswer.Error()+": ")))
		return approval.Approval{}, nodes.Answer{}, false
	}
	return a, checked, true
}

// refuseAnswered answers a second answer: 410 when the approval expired,
// 409 when someone answered it.
func refuseAnswered(c *gin.Context, a approval.Approval, ans approval.Answer) {
	switch ans.Decision {
	case approval.Expired:
		api.Error(c, http.StatusGone, fmt.Sprintf("%s %s expired at %s: %s; send a new message to go on", noun(a), a.ID, a.ExpiresAt.UTC().Format(time.RFC3339), notGoneOn(a)))
	case approval.Superseded:
		api.Error(c, http.StatusGone, fmt.Sprintf("%s %s lapsed: the chat went on with a new message, and %s", noun(a), a.ID, notGoneOn(a)))
	default:
		api.Error(c, http.StatusConflict, fmt.Sprintf("%s %s was answered already (%s at %s)", noun(a), a.ID, ans.Decision, ans.At.UTC().Format(time.RFC3339)))
	}
}

// claim records the person's answer; false (and the refusal written)
// when another answer came first.
func (h *Handler) claim(c *gin.Context, a approval.Approval, ans nodes.Answer, by string) bool {
	ctx := c.Request.Context()
	stored := approval.Answer{Decision: ans.Decision, Command: ans.Command, Reason: ans.Reason, By: by, At: h.Now()}
	if !a.IsCommand() {
		stored.Decision, stored.Value = approval.Answered, string(mustJSON(ans))
	}
	err := h.Approvals.Claim(ctx, a.ID, stored)
	if errors.Is(err, approval.ErrAnswered) {
		if _, answered, err := h.Approvals.Get(ctx, a.ID); err == nil && answered != nil {
			refuseAnswered(c, a, *answered)
			return false
		}
		api.Error(c, http.StatusConflict, fmt.Sprintf("%s %s was answered already", noun(a), a.ID))
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

// waiting is what the chat waits for, if anything: its pending approval
// or question, unanswered (nil: none, or it could not be read).
func (h *Handler) waiting(ctx context.Context, chat history.Chat) *approval.Approval {
	if h.Approvals == nil || chat.CreatedAt.IsZero() {
		return nil
	}
	id, err := h.Approvals.Pending(ctx, chat.Scope())
	if err != nil || id == "" {
		return nil
	}
	a, answered, err := h.Approvals.Get(ctx, id)
	if err != nil || answered != nil {
		return nil
	}
	return &a
}

// lapsePending ends what the chat waits for (see waiting), before a new
// message runs: the paused run does not resume.
func (h *Handler) lapsePending(ctx context.Context, a *approval.Approval, by string) {
	if a == nil {
		return
	}
	decision := approval.Superseded
	if !h.Now().Before(a.ExpiresAt) {
		decision = approval.Expired
	}
	h.lapse(ctx, *a, decision, by)
}

// auditRejection records a command that did not run because a person
// rejected it or nobody answered: the chain never saw that end. An
// interactive node's question runs no command: nothing to record.
func (h *Handler) auditRejection(ctx context.Context, a approval.Approval, by, reason string) {
	if h.Audit == nil || !a.IsCommand() {
		return
	}
	h.Audit.Write(context.WithoutCancel(ctx), approval.RejectionRecord(a, by, reason, h.Now()))
}

// keepPaused stores a paused run, with the version of the app it runs,
// so that an answer resumes it, in any engine process; it dates the
// question's expiry in the run's detail. command is the approval's
// command as shown (empty for a question).
func (h *Handler) keepPaused(ctx context.Context, chat history.Chat, versionID string, res *nodes.Result, command string) (time.Time, error) {
	p := res.Paused
	ttl := h.ApprovalTimeout
	if ttl <= 0 {
		ttl = DefaultApprovalTimeout
	}
	now := h.Now()
	expires := now.Add(ttl)
	for _, resp := range res.Responses {
		switch d := resp.Detail.(type) {
		case toolcall.Detail:
			for i := range d.ToolCalls {
				if ap := d.ToolCalls[i].Approval; ap != nil && ap.ID == p.Request.ID && ap.Decision == "" {
					ap.ExpiresAt = expires
				}
			}
		case *nodes.InteractiveDetail:
			if d.Request.ID == p.Request.ID && d.Answer == nil {
				d.ExpiresAt = expires
			}
		}
	}
	if h.Approvals == nil {
		return expires, errors.New("this engine keeps no paused runs")
	}
	return expires, h.Approvals.Put(ctx, approval.Approval{ID: p.Request.ID, ChatID: chat.ID, AppID: chat.AppID, UserID: chat.UserID, Kind: p.Request.Kind,
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

// question is an interactive node's question in FastGPT's interactive
// shape (type "userSelect" with userSelectOptions, or "userInput" with
// inputForm), with the id and expiry its answer needs. description is as
// shown (redacted).
func question(req nodes.Request, description string, expires time.Time) gin.H {
	params := gin.H{"interactiveId": req.ID, "description": description, "expiresAt": expires.UTC().Format(time.RFC3339Nano)}
	typ := "userSelect"
	if req.Kind == nodes.KindFormInput {
		typ, params["inputForm"] = "userInput", req.Fields
	} else {
		params["userSelectOptions"] = req.Options
	}
	return gin.H{"interactive": gin.H{"type": typ, "params": params}}
}

package chat

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/runapp"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// What OpenAI's clients expect of the chat API (E5): a model named in
// "model", the usage of the run, their own history sent without a
// chatId, and caps answered as 429.

// historySent takes the history a request without chatId sends, as
// OpenAI's clients send their conversation: the messages before the last
// user message become the run's history, and the run keeps no chat (its
// sandbox is deleted when it ends, endEphemeral).
func (h *Handler) historySent(c *gin.Context, t *turn) bool {
	if !t.newChat || t.req.Interactive != nil {
		return true
	}
	last := -1
	for i, m := range t.req.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	for _, m := range t.req.Messages[:max(last, 0)] {
		switch m.Role {
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant:
			t.sent = append(t.sent, llm.Message{Role: m.Role, Content: m.Content.Text})
		}
	}
	if len(t.sent) == 0 {
		return true
	}
	if h.Deleter == nil {
		api.Error(c, http.StatusBadRequest, "this engine cannot run a conversation it does not keep: send only the last message, and the chatId of the chat to continue")
		return false
	}
	t.ephemeral = true
	return true
}

// history is what the run remembers: the history the request sent, or
// the chat's last 50 messages.
func (t *turn) history() []llm.Message {
	if t.ephemeral {
		return t.sent
	}
	return t.chat.History(50)
}

// endEphemeral deletes the sandbox of a run that keeps no chat, through
// the chats' deletion path, unless the run paused (its answer resumes it
// in that sandbox).
func (h *Handler) endEphemeral(ctx context.Context, t *turn, res *nodes.Result) {
	if !t.ephemeral || (res != nil && res.Paused != nil) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	scope := sandbox.Scope{AppID: t.app.ID, UserID: t.req.CustomUID, ChatID: t.req.ChatID}
	if err := h.Deleter.DeleteChats(ctx, []sandbox.Scope{scope}); err != nil {
		h.Log.Error("delete the sandbox of a run without chat", "chatId", scope.ChatID, "err", err)
	}
}

// modelApp is the app a request names in "model" when it names no
// appId: an app by id, else the default app (OpenAI's clients always
// send a model, often one of OpenAI's own).
func (h *Handler) modelApp(ctx context.Context, model string) string {
	if model = strings.TrimSpace(model); model != "" {
		if _, err := h.Apps.Get(ctx, model); err == nil {
			return model
		}
	}
	return h.DefaultApp
}

// capped answers a run that a sandbox cap refused with 429 and
// Retry-After, when the client has had nothing of the answer yet.
func capped(c *gin.Context, runErr error) bool {
	var limit *sandbox.LimitError
	if runErr == nil || !errors.As(runErr, &limit) || c.Writer.Written() {
		return false
	}
	f, _ := api.FailureOf(limit)
	f.Write(c)
	return true
}

// usage sums the model calls of a run (those of the apps it called too)
// as the models reported them.
func usage(responses []nodes.NodeResponse) llm.Usage {
	var u llm.Usage
	for _, r := range responses {
		u.PromptTokens += r.PromptTokens
		u.CompletionTokens += r.CompletionTokens
		u.TotalTokens += r.Tokens
		if d, ok := r.Detail.(runapp.Detail); ok {
			sub := usage(d.Responses)
			u.PromptTokens += sub.PromptTokens
			u.CompletionTokens += sub.CompletionTokens
			u.TotalTokens += sub.TotalTokens
		}
	}
	return u
}

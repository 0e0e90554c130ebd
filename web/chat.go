package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/nodes/toolcall"
)

// AppReader reads apps (apps.Store).
type AppReader interface {
	Get(ctx context.Context, id string) (apps.App, error)
}

// ChatHistory keeps chats (history.Store).
type ChatHistory interface {
	Owned(ctx context.Context, chatID, appID, userID string) (history.Chat, error)
	AppendTurn(ctx context.Context, chat history.Chat, question, answer history.Item, now time.Time) (history.Chat, error)
}

// ChatHandler serves POST /api/v1/chat/completions, compatible with
// FastGPT's chat API: OpenAI-shaped answers and chunks, and with detail
// the SSE events answer, flowNodeStatus, toolCall, toolParams,
// toolResponse, flowResponses and error, plus toolOutput carrying a
// command's output while it runs.
type ChatHandler struct {
	Engine  *nodes.Engine
	Apps    AppReader
	History ChatHistory
	// APIKey authorises programs that have no account (they name their
	// user in customUid); empty refuses them. Signed-in callers (a session
	// or their own API key, see Authenticate) chat as themselves.
	APIKey string
	// Access, when set, decides which apps signed-in callers may use.
	Access *Access
	// DefaultApp answers requests that name no app.
	DefaultApp string
	Now        func() time.Time
	Log        *slog.Logger

	// trace, when set (benchmarks), learns when each relayed event left
	// the engine.
	trace func(chatID string, at time.Time)
}

// maxChatBody bounds a request body.
const maxChatBody = 1 << 20

type chatRequest struct {
	ChatID    string         `json:"chatId"`
	AppID     string         `json:"appId"`
	CustomUID string         `json:"customUid"`
	Stream    bool           `json:"stream"`
	Detail    bool           `json:"detail"`
	Variables map[string]any `json:"variables"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (h *ChatHandler) authorised(c *gin.Context) bool {
	if _, ok := PrincipalOf(c); ok {
		return true
	}
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || h.APIKey == "" || subtle.ConstantTimeCompare([]byte(got), []byte(h.APIKey)) != 1 {
		apiError(c, http.StatusUnauthorized, "missing or wrong API key: send Authorization: Bearer <FLOWBOX_API_KEY>")
		return false
	}
	return true
}

// Completions runs the app's workflow for the user's last message.
func (h *ChatHandler) Completions(c *gin.Context) {
	if !h.authorised(c) {
		return
	}
	var req chatRequest
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxChatBody))
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", maxChatBody))
			return
		}
		apiError(c, http.StatusBadRequest, "the request body is not valid JSON: "+err.Error())
		return
	}
	question := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			question = req.Messages[i].Content
			break
		}
	}
	if strings.TrimSpace(question) == "" {
		apiError(c, http.StatusBadRequest, `messages must end with a non-empty {"role":"user","content":"..."}`)
		return
	}
	newChat := req.ChatID == ""
	if newChat {
		req.ChatID = newID()
	}
	if req.AppID == "" {
		req.AppID = h.DefaultApp
	}
	if req.CustomUID == "" {
		req.CustomUID = "api"
	}
	principal, signedIn := PrincipalOf(c)
	if signedIn {
		req.CustomUID = principal.UserID
	}
	ctx := c.Request.Context()
	app, err := h.Apps.Get(ctx, req.AppID)
	if err == nil && signedIn && h.Access != nil && !h.Access.CanUseApp(c, app) {
		err = apps.ErrNotFound
	}
	if errors.Is(err, apps.ErrNotFound) {
		apiError(c, http.StatusNotFound, fmt.Sprintf("no app %q", req.AppID))
		return
	} else if err != nil {
		h.Log.Error("read app", "appId", req.AppID, "err", err)
		apiError(c, http.StatusInternalServerError, "could not read the app; retry later")
		return
	}
	// A chat id made here names no stored chat: no need to look.
	chat := history.Chat{ID: req.ChatID, AppID: app.ID, UserID: req.CustomUID}
	if !newChat {
		chat, err = h.History.Owned(ctx, req.ChatID, app.ID, req.CustomUID)
	}
	if errors.Is(err, history.ErrNotOwner) {
		// Existence of another user's chat is private.
		apiError(c, http.StatusNotFound, fmt.Sprintf("no chat %q", req.ChatID))
		return
	} else if err != nil {
		h.Log.Error("read chat", "chatId", req.ChatID, "err", err)
		apiError(c, http.StatusInternalServerError, "could not read the chat; retry later")
		return
	}

	hist := chat.History(50)
	run := nodes.Chat{AppID: app.ID, UserID: req.CustomUID, ChatID: req.ChatID, Question: question, History: hist, Variables: req.Variables}
	out := newChatStream(c, req.Stream, req.Detail, req.ChatID)
	if h.trace != nil {
		out.trace = func(at time.Time) { h.trace(req.ChatID, at) }
	}
	start := h.Now()
	res, runErr := h.Engine.Run(ctx, &app.Graph, run, out.event)
	if runErr != nil && errors.Is(runErr, nodes.ErrInvalid) {
		apiError(c, http.StatusUnprocessableEntity, runErr.Error())
		return
	}
	if res == nil {
		res = &nodes.Result{}
	}
	answer := res.Answer
	if runErr != nil {
		answer += "\n[interrupted: " + runErr.Error() + "]"
	} else {
		// The client has the whole answer before the turn is written down.
		out.finish(res)
	}
	// The turn is kept even when the client went away: its commands ran.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err = h.History.AppendTurn(saveCtx, chat,
		history.Item{Role: "user", Text: question},
		history.Item{Role: "assistant", Text: answer, ToolCalls: toolCalls(res), Responses: mustJSON(res.Responses), DurationMs: h.Now().Sub(start).Milliseconds()},
		h.Now())
	if err != nil {
		h.Log.Error("record chat turn", "chatId", req.ChatID, "err", err)
	}
}

// toolCalls lists every tool call of the run, in order.
func toolCalls(res *nodes.Result) json.RawMessage {
	var all []toolcall.Call
	for _, r := range res.Responses {
		if d, ok := r.Detail.(toolcall.Detail); ok {
			all = append(all, d.ToolCalls...)
		}
	}
	if len(all) == 0 {
		return nil
	}
	return mustJSON(all)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", "unencodable: "+err.Error()))
	}
	return b
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// chatStream writes a run's events to the client in the form it asked for.
type chatStream struct {
	c              *gin.Context
	stream, detail bool
	id             string
	created        int64
	trace          func(time.Time)
}

func newChatStream(c *gin.Context, stream, detail bool, id string) *chatStream {
	s := &chatStream{c: c, stream: stream, detail: detail, id: id, created: time.Now().Unix()}
	if stream {
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
	}
	return s
}

func (s *chatStream) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func (s *chatStream) send(event string, data any) {
	if s.trace != nil {
		s.trace(time.Now())
	}
	var b []byte
	if str, ok := data.(string); ok && str == "[DONE]" {
		b = []byte(str)
	} else {
		b, _ = json.Marshal(data)
	}
	w := s.c.Writer
	if s.detail && event != "" {
		io.WriteString(w, "event: "+event+"\n")
	}
	io.WriteString(w, "data: ")
	w.Write(b)
	io.WriteString(w, "\n\n")
	w.Flush()
}

// event relays one engine event in FastGPT's SSE form: the event names
// and JSON shapes are chosen here, not in nodes.
func (s *chatStream) event(ev nodes.Event) {
	if !s.stream {
		return
	}
	if a, ok := ev.Data.(nodes.AnswerDelta); ok {
		if a.Text != "" {
			s.send("answer", s.chunk(map[string]any{"role": "assistant", "content": a.Text}, nil))
		}
		return
	}
	if !s.detail {
		return
	}
	switch d := ev.Data.(type) {
	case nodes.NodeStatus:
		s.send("flowNodeStatus", map[string]any{"status": d.Status, "name": ev.NodeName})
	case nodes.ToolCallStarted:
		s.send("toolCall", map[string]any{"tool": map[string]any{"id": d.ID, "toolName": d.Tool, "functionName": d.Tool, "params": d.Params, "response": ""}})
	case nodes.ToolParams:
		s.send("toolParams", map[string]any{"tool": map[string]any{"id": d.ID, "params": d.Params}})
	case nodes.ToolResult:
		s.send("toolResponse", map[string]any{"tool": map[string]any{"id": d.ID, "response": d.Response, "durationMs": d.DurationMs, "status": d.Status}})
	case nodes.ToolOutput:
		s.send("toolOutput", map[string]any{"tool": map[string]any{"id": d.ID, "stream": d.Stream, "text": d.Text}})
	case nodes.NodeError:
		s.send("error", map[string]any{"message": d.Message})
	}
}

// finish ends the answer: the closing chunk (and the node responses with
// detail) on a stream, or the whole completion.
func (s *chatStream) finish(res *nodes.Result) {
	if s.stream {
		s.send("answer", s.chunk(map[string]any{}, "stop"))
		if s.detail {
			s.send("flowResponses", res.Responses)
		}
		s.send("answer", "[DONE]")
		return
	}
	body := gin.H{
		"id": s.id, "object": "chat.completion", "created": s.created,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": res.Answer}, "finish_reason": "stop"}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	}
	if s.detail {
		body["responseData"] = res.Responses
	}
	s.c.JSON(http.StatusOK, body)
}

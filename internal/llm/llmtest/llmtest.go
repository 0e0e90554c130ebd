// Package llmtest is a scripted OpenAI-compatible Chat Completions endpoint
// for tests: real HTTP, real server-sent events, tool calls split across
// chunks as real endpoints send them. It replays one scripted reply per
// request and records every request it receives.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flowbox/flowbox/internal/llm"
)

// Reply is one scripted answer: an error status, or text and tool calls.
type Reply struct {
	Status     int // non-zero: answer with this HTTP status and ErrMessage
	ErrMessage string
	Text       string
	ToolCalls  []llm.ToolCall
	// Hold, when set, is closed by the test to let a streamed reply finish;
	// until then the stream stays open after its first chunk.
	Hold chan struct{}
}

// Server is the scripted endpoint; BaseURL goes into llm.Config.
type Server struct {
	BaseURL string
	mu      sync.Mutex
	replies []Reply
	got     []llm.Request
	streams []bool
	// Gone is signalled when a client disconnects in the middle of a held
	// stream.
	Gone chan struct{}
}

// New starts a server that gives the replies in order; a request past the
// last reply gets a 500 naming the problem.
func New(t testing.TB, replies ...Reply) *Server {
	s := &Server{replies: replies, Gone: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.BaseURL = srv.URL + "/v1"
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llm.Request(nil), s.got...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body struct {
		llm.Request
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := len(s.got)
	s.got = append(s.got, body.Request)
	s.streams = append(s.streams, body.Stream)
	var rep Reply
	if n < len(s.replies) {
		rep = s.replies[n]
	} else {
		rep = Reply{Status: 500, ErrMessage: fmt.Sprintf("the script has %d replies and this is request %d", len(s.replies), n+1)}
	}
	s.mu.Unlock()

	if rep.Status != 0 {
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"error":{"message":%q}}`, rep.ErrMessage)
		return
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !body.Stream {
		msg := llm.Message{Role: llm.RoleAssistant, Content: rep.Text, ToolCalls: rep.ToolCalls}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg, "finish_reason": finish}}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	delta := func(d map[string]any) { send(map[string]any{"choices": []any{map[string]any{"delta": d}}}) }
	half := len(rep.Text) / 2
	delta(map[string]any{"role": "assistant", "content": rep.Text[:half]})
	if rep.Hold != nil {
		select {
		case <-rep.Hold:
		case <-r.Context().Done():
			s.Gone <- struct{}{}
			return
		}
	}
	if rep.Text[half:] != "" {
		delta(map[string]any{"content": rep.Text[half:]})
	}
	for i, tc := range rep.ToolCalls {
		args := tc.Function.Arguments
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Function.Name, "arguments": args[:len(args)/2]}}}})
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i,
			"function": map[string]any{"arguments": args[len(args)/2:]}}}})
	}
	send(map[string]any{"choices": []any{map[string]any{"delta": map[string]any{}, "finish_reason": finish}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// Call builds a scripted tool call.
func Call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// scripted is an OpenAI-compatible server that replays one scripted
// answer per request and records what it received.
type scripted struct {
	mu       sync.Mutex
	requests []recorded
	answers  []func(w http.ResponseWriter, r *http.Request)
}

type recorded struct {
	Auth string
	Body map[string]any
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, recorded{Auth: r.Header.Get("Authorization"), Body: body})
	answer := s.answers[min(n, len(s.answers)-1)]
	s.mu.Unlock()
	answer(w, r)
}

func (s *scripted) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.requests) }

func sse(chunks ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
	}
}

func status(code int, msg string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":%q}}`, msg)
	}
}

func newClient(t *testing.T, s *scripted) *Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := NewClient(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test", RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var shellTool = Tool{Type: "function", Function: FunctionDef{Name: "sandbox_shell", Parameters: json.RawMessage(`{"type":"object"}`)}}

func TestStreamAssemblesTextAndToolCalls(t *testing.T) {
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){sse(
		`{"choices":[{"delta":{"role":"assistant","content":"Let me "}}]}`,
		`{"choices":[{"delta":{"content":"check."}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"sandbox_shell","arguments":""}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"sandbox_shell","arguments":"{\"command\":\"pwd\"}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}}]}`,
		`{"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
		`[DONE]`,
	)}}
	c := newClient(t, s)
	var streamed []string
	resp, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "hi"}}, Tools: []Tool{shellTool}},
		func(p string) { streamed = append(streamed, p) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(streamed, "|"); got != "Let me |check." {
		t.Errorf("streamed text = %q, want %q", got, "Let me |check.")
	}
	if resp.Message.Content != "Let me check." || resp.FinishReason != "tool_calls" || resp.Usage.TotalTokens != 12 {
		t.Errorf("response = %+v", resp)
	}
	want := []ToolCall{
		{ID: "call_a", Type: "function", Function: FunctionCall{Name: "sandbox_shell", Arguments: `{"command":"ls"}`}},
		{ID: "call_b", Type: "function", Function: FunctionCall{Name: "sandbox_shell", Arguments: `{"command":"pwd"}`}},
	}
	if fmt.Sprint(resp.Message.ToolCalls) != fmt.Sprint(want) {
		t.Errorf("tool calls = %+v, want %+v", resp.Message.ToolCalls, want)
	}
	r := s.requests[0]
	if r.Auth != "Bearer sk-test" || r.Body["stream"] != true || r.Body["model"] != "m" {
		t.Errorf("request = %+v", r)
	}
	if tools, _ := r.Body["tools"].([]any); len(tools) != 1 {
		t.Errorf("request tools = %v, want the one tool", r.Body["tools"])
	}
}

func TestNonStreaming(t *testing.T) {
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"message":{"role":"assistant","content":"done","tool_calls":[{"id":"c1","type":"function","function":{"name":"sandbox_shell","arguments":"{bad json"}}]},"finish_reason":"tool_calls"}]}`)
	}}}
	c := newClient(t, s)
	resp, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "done" || len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Function.Arguments != "{bad json" {
		t.Fatalf("response = %+v; broken arguments must come through untouched", resp)
	}
	if _, ok := s.requests[0].Body["stream"]; ok {
		t.Errorf("non-streaming request has a stream field: %v", s.requests[0].Body)
	}
}

func TestRetries(t *testing.T) {
	ok := sse(`{"choices":[{"delta":{"content":"fine"},"finish_reason":"stop"}]}`, `[DONE]`)
	tests := []struct {
		name     string
		answers  []func(http.ResponseWriter, *http.Request)
		wantErr  string
		requests int
	}{
		{"500 then success", []func(http.ResponseWriter, *http.Request){status(500, "boom"), ok}, "", 2},
		{"429 twice then success", []func(http.ResponseWriter, *http.Request){status(429, "slow down"), status(429, "slow down"), ok}, "", 3},
		{"always 503", []func(http.ResponseWriter, *http.Request){status(503, "down")}, "answered 503: down", 4},
		{"401 is final", []func(http.ResponseWriter, *http.Request){status(401, "bad key"), ok}, "check the model API key", 1},
		{"400 is final", []func(http.ResponseWriter, *http.Request){status(400, "bad request"), ok}, "answered 400", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{answers: tc.answers}
			c := newClient(t, s)
			resp, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}}, func(string) {})
			if tc.wantErr == "" && (err != nil || resp.Message.Content != "fine") {
				t.Fatalf("got %+v, %v; want success", resp, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if s.count() != tc.requests {
				t.Fatalf("%d requests, want %d", s.count(), tc.requests)
			}
		})
	}
}

// A stream that breaks after text reached the caller is not retried: the
// text would be shown twice.
func TestNoRetryAfterText(t *testing.T) {
	broken := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"half\"}}]}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){broken}}
	c := newClient(t, s)
	var got string
	_, err := c.Complete(context.Background(), Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}}, func(p string) { got += p })
	if err == nil || got != "half" || s.count() != 1 {
		t.Fatalf("err=%v text=%q requests=%d; want an error, the half text once, one request", err, got, s.count())
	}
}

func TestCancelMidStream(t *testing.T) {
	serverDone := make(chan struct{})
	slow := func(w http.ResponseWriter, r *http.Request) {
		defer close(serverDone)
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	s := &scripted{answers: []func(http.ResponseWriter, *http.Request){slow}}
	c := newClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}}, func(string) { cancel() })
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after cancellation")
	}
	select {
	case <-serverDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint never saw the request end")
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "api.openai.com/v1", "ftp://x/v1", "http://"} {
		if _, err := NewClient(Config{BaseURL: u}); err == nil {
			t.Errorf("NewClient(%q) accepted it", u)
		}
	}
}

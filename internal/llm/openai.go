package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config configures a Client. Zero values have the documented defaults.
type Config struct {
	// BaseURL of the endpoint, up to and without /chat/completions, e.g.
	// https://api.openai.com/v1. Required.
	BaseURL string
	// APIKey is sent as a Bearer token when set.
	APIKey string
	// HTTPClient defaults to one that waits at most 60 s for response
	// headers and has no overall timeout (streams may run long; the
	// caller's context bounds them).
	HTTPClient *http.Client
	// MaxRetries on 429, 5xx and connection errors. Default 3; negative
	// means none.
	MaxRetries int
	// RetryBase is the first backoff, doubled each retry, with jitter, and
	// overridden by a Retry-After header. Default 500 ms.
	RetryBase time.Duration
}

// Client is a Model over an OpenAI-compatible Chat Completions endpoint.
type Client struct {
	cfg      Config
	endpoint string
}

var _ Model = (*Client)(nil)

// NewClient checks the configuration and returns a client.
func NewClient(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("model base URL %q: want http(s)://host/path, e.g. https://api.openai.com/v1", cfg.BaseURL)
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 60 * time.Second
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 500 * time.Millisecond
	}
	return &Client{cfg: cfg, endpoint: u.String() + "/chat/completions"}, nil
}

// StatusError is an error answer of the endpoint.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	hint := ""
	switch {
	case e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden:
		hint = "; check the model API key"
	case e.Code == http.StatusNotFound:
		hint = "; check the model base URL and model name"
	case e.Code == http.StatusTooManyRequests:
		hint = "; the endpoint is rate limiting, retry later"
	}
	return fmt.Sprintf("model endpoint answered %d: %s%s", e.Code, e.Message, hint)
}

func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusTooManyRequests || se.Code >= 500
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errConnReset)
}

var errConnReset = errors.New("connection closed before the answer was complete")

// Complete sends the request, streaming when onText is set, and retries
// failures that may pass (429, 5xx, broken connections) as long as no
// text has reached onText yet: a retry after that would repeat it.
func (c *Client) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	delivered := false
	forward := onText
	if onText != nil {
		forward = func(s string) { delivered = true; onText(s) }
	}
	var lastErr error
	for attempt := 0; ; attempt++ {
		resp, retryAfter, err := c.once(ctx, req, forward)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil || delivered || !retryable(err) || attempt >= c.cfg.MaxRetries {
			break
		}
		wait := retryAfter
		if wait <= 0 {
			wait = c.cfg.RetryBase << attempt
			wait += time.Duration(rand.Int64N(int64(wait)/2 + 1))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	}
	return Response{}, lastErr
}

type wireRequest struct {
	Request
	Stream bool `json:"stream,omitempty"`
	// StreamOptions asks a streamed answer for its usage in a last chunk.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func (c *Client) once(ctx context.Context, req Request, onText func(string)) (Response, time.Duration, error) {
	wire := wireRequest{Request: req, Stream: onText != nil}
	if wire.Stream {
		wire.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return Response{}, 0, fmt.Errorf("encode model request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Response{}, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if onText != nil {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	hresp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return Response{}, 0, fmt.Errorf("call model endpoint: %w", err)
	}
	defer hresp.Body.Close()
	if hresp.StatusCode != http.StatusOK {
		return Response{}, retryAfter(hresp.Header.Get("Retry-After")), &StatusError{Code: hresp.StatusCode, Message: errorMessage(hresp.Body)}
	}
	if onText == nil {
		return decodeWhole(hresp.Body)
	}
	resp, err := decodeStream(hresp.Body, onText)
	return resp, 0, err
}

func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, 30*time.Second)
	}
	return 0
}

// errorMessage extracts {"error": {"message": ...}} or shows the start of
// the body.
func errorMessage(r io.Reader) string {
	data, _ := io.ReadAll(io.LimitReader(r, 8<<10))
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	if s := strings.TrimSpace(string(data)); s != "" {
		return s
	}
	return "(no message)"
}

type wireChoice struct {
	Message *Message `json:"message"`
	Delta   *struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			Index    int    `json:"index"`
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type wireResponse struct {
	Choices []wireChoice `json:"choices"`
	Usage   *Usage       `json:"usage"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func decodeWhole(r io.Reader) (Response, time.Duration, error) {
	var w wireResponse
	if err := json.NewDecoder(io.LimitReader(r, 16<<20)).Decode(&w); err != nil {
		return Response{}, 0, fmt.Errorf("decode model answer: %w", err)
	}
	if w.Error != nil {
		return Response{}, 0, fmt.Errorf("model endpoint error: %s", w.Error.Message)
	}
	if len(w.Choices) == 0 || w.Choices[0].Message == nil {
		return Response{}, 0, errors.New("model answer has no choices")
	}
	resp := Response{Message: *w.Choices[0].Message, FinishReason: w.Choices[0].FinishReason}
	resp.Message.Role = RoleAssistant
	if w.Usage != nil {
		resp.Usage = *w.Usage
	}
	return resp, 0, nil
}

// decodeStream reads server-sent events until [DONE], passing text on and
// assembling tool calls from their deltas (by index: the first delta of a
// call carries its id and name, later ones pieces of its arguments).
func decodeStream(r io.Reader, onText func(string)) (Response, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var text strings.Builder
	calls := map[int]*ToolCall{}
	resp := Response{}
	done := false
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments, event names, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var w wireResponse
		if err := json.Unmarshal([]byte(data), &w); err != nil {
			return Response{}, fmt.Errorf("decode model stream chunk: %w", err)
		}
		if w.Error != nil {
			return Response{}, fmt.Errorf("model endpoint error in stream: %s", w.Error.Message)
		}
		if w.Usage != nil {
			resp.Usage = *w.Usage
		}
		for _, ch := range w.Choices {
			if ch.FinishReason != "" {
				resp.FinishReason = ch.FinishReason
			}
			if ch.Delta == nil {
				continue
			}
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				onText(ch.Delta.Content)
			}
			for _, d := range ch.Delta.ToolCalls {
				tc := calls[d.Index]
				if tc == nil {
					tc = &ToolCall{Type: "function"}
					calls[d.Index] = tc
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				if d.Type != "" {
					tc.Type = d.Type
				}
				tc.Function.Name += d.Function.Name
				tc.Function.Arguments += d.Function.Arguments
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Response{}, fmt.Errorf("read model stream: %w", err)
	}
	if !done && resp.FinishReason == "" {
		return Response{}, errConnReset
	}
	resp.Message = Message{Role: RoleAssistant, Content: text.String()}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		tc := *calls[i]
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d", i)
		}
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, tc)
	}
	return resp, nil
}

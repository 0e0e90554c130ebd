package client_test

// A focused unit test of the retry rules: which answers are retried, for
// which methods, and how waits end. The engine cannot be made to answer
// 502 or a chosen 503 on demand, so a stand-in server scripts the
// answers; everything else is tested against the real engine
// (client_test.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/client"
)

// scripted serves the answers given, one per request, then 200 with an
// empty session list; it counts the requests.
type scripted struct {
	answers []func(w http.ResponseWriter)
	n       atomic.Int64
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(s.n.Add(1)) - 1
	if i < len(s.answers) {
		s.answers[i](w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"sessions": [], "id": "ses_1", "tool": "shell:exec", "output": {}}`))
}

func apiError(status int, kind string, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(fmt.Sprintf(`{"code": %d, "error": %q, "message": "scripted"}`, status, kind)))
	}
}

func proxyPage(status int) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html>" + http.StatusText(status) + "</html>"))
	}
}

func TestRetryRulesUnit(t *testing.T) {
	t.Parallel()
	get := func(ctx context.Context, c *client.Client) error { _, err := c.Sessions(ctx); return err }
	post := func(ctx context.Context, c *client.Client) error {
		_, err := c.Execute(ctx, "ses_1", "shell:exec", map[string]any{"command": "true"})
		return err
	}
	for _, tc := range []struct {
		name    string
		answers []func(w http.ResponseWriter)
		call    func(context.Context, *client.Client) error
		want    error // nil: success
		sent    int64
	}{
		{"503 then 200 is retried", []func(http.ResponseWriter){apiError(503, "unavailable"), apiError(503, "unavailable")}, post, nil, 3},
		{"429 with a short Retry-After is retried", []func(http.ResponseWriter){apiError(429, "rate_limited", "Retry-After", "0")}, post, nil, 2},
		{"429 with a long Retry-After is returned", []func(http.ResponseWriter){apiError(429, "rate_limited", "Retry-After", "120")}, post, client.ErrRateLimited, 1},
		{"a proxy's 502 is retried for a GET", []func(http.ResponseWriter){proxyPage(502), proxyPage(504)}, get, nil, 3},
		{"a proxy's 502 is not retried for a POST", []func(http.ResponseWriter){proxyPage(502)}, post, client.ErrUnavailable, 1},
		{"500 is not retried", []func(http.ResponseWriter){apiError(500, "internal")}, get, client.ErrInternal, 1},
		{"404 is not retried", []func(http.ResponseWriter){apiError(404, "not_found")}, get, client.ErrNotFound, 1},
		{"the attempts run out", []func(http.ResponseWriter){apiError(503, "unavailable"), apiError(503, "unavailable"), apiError(503, "unavailable"), apiError(503, "unavailable")}, get, client.ErrUnavailable, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &scripted{answers: tc.answers}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c := client.New(srv.URL, "fbk_test", client.WithRetry(4, time.Millisecond), client.WithMaxBackoff(10*time.Second))
			err := tc.call(t.Context(), c)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
			if got := s.n.Load(); got != tc.sent {
				t.Errorf("sent %d times, want %d", got, tc.sent)
			}
		})
	}
}

// TestRetryWaitCanceledUnit: a context canceled during a backoff ends
// the wait; the error says both why the call failed and why it stopped.
// The transport cancels as it answers, so the cancel surely comes before
// the hour-long wait.
func TestRetryWaitCanceledUnit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var sent atomic.Int64
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		cancel()
		return &http.Response{StatusCode: 503, Header: http.Header{}, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"code": 503, "error": "unavailable", "message": "scripted"}`))}, nil
	})}
	c := client.New("http://flowbox.invalid", "fbk_test", client.WithHTTPClient(hc), client.WithRetry(4, time.Hour), client.WithMaxBackoff(time.Hour))
	_, err := c.Sessions(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("got %v, want context.Canceled and ErrUnavailable", err)
	}
	if got := sent.Load(); got != 1 {
		t.Errorf("sent %d times, want 1", got)
	}
}

// TestProxyErrorUnit: an answer without the API's error shape gets the
// kind of its status and keeps its body as the message.
func TestProxyErrorUnit(t *testing.T) {
	t.Parallel()
	s := &scripted{answers: []func(http.ResponseWriter){proxyPage(502)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := client.New(srv.URL, "fbk_test", client.WithRetry(1, time.Millisecond))
	_, err := c.Sessions(t.Context())
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 502 || apiErr.Kind != "unavailable" || !strings.Contains(apiErr.Message, "Bad Gateway") {
		t.Errorf("got %v (%#v), want a 502 of kind unavailable with the page as message", err, apiErr)
	}
}

// Package client is the Go client of Flowbox's sandbox service API
// (/api/sandbox/v1, described in docs/SANDBOX_API.md): programs that are
// not Flowbox apps use it to make sessions (sandboxes with an owner), run
// tools in them (shell:exec, file:*, skills, exec and MCP tools), stream a
// command's output, move files in and out, and keep a session's sandbox
// as a snapshot that new sessions start from.
//
//	c := client.New("https://flowbox.example.com", os.Getenv("FLOWBOX_API_KEY"))
//	s, err := c.CreateSession(ctx, client.SessionOptions{Name: "report"})
//	...
//	res, err := c.Exec(ctx, s.ID, "python3 -c 'print(6*7)'")
//	fmt.Print(res.Stdout) // 42
//
// # Errors
//
// Every error the API answers is an *Error carrying the status, the stable
// kind and the message; check it with errors.Is against the sentinels
// (ErrNotFound, ErrRateLimited, ...) or errors.As for the details. A
// command that fails (exit code ≠ 0, a timeout) is not an error: it is a
// Result with IsError set, as the API answers it.
//
// # Retries
//
// The client retries transient failures with exponential backoff and
// jitter (WithRetry; 4 attempts by default), waiting no longer than the
// context allows:
//
//   - 503 and 429 answers are retried for every request: the engine gives
//     them before it runs anything. Their Retry-After is honoured; one
//     longer than the longest backoff (WithMaxBackoff) is not slept through
//     but returned, with the wait in Error.RetryAfter (a cap on running
//     sandboxes asks for a minute, which a program may rather spend
//     otherwise).
//   - A request that certainly did not reach the engine (the connection
//     could not be made, e.g. refused while the engine restarts) is retried.
//   - 502 and 504 answers (from a proxy in front of the engine) and
//     connections that break once the request was sent are retried only
//     for GET, PUT and DELETE: a POST that creates a session or executes a
//     tool may have run, and running it twice is worse than an error.
//   - Nothing else is: not other 4xx answers, not 500, and never a
//     command's own failure.
//
// A request body must be replayable to be retried: the client encodes
// JSON bodies once and sends the same bytes again. Upload retries only
// when its reader is an io.Seeker (an *os.File, *bytes.Reader,
// *strings.Reader), rewound before each attempt; any other reader is sent
// once. A streamed answer (ExecuteStream, Download) is never retried once
// it has begun.
//
// The package talks HTTP only and imports nothing of the engine; it must
// stay usable from any Go program.
package client

import (
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
	"strings"
	"syscall"
	"time"
)

// apiPrefix is where the engine serves the sandbox API.
const apiPrefix = "/api/sandbox/v1"

// Client calls one engine with one key. It is safe for concurrent use.
type Client struct {
	baseURL    string
	key        string
	http       *http.Client
	userAgent  string
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
}

// Option changes a Client made by New.
type Option func(*Client)

// WithHTTPClient sends the requests with hc instead of a client of the
// package's own (no overall timeout, since streams and downloads may be
// long: bound calls with their contexts).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry sets how many times a request is tried in all (1: no retry)
// and the first backoff, doubled at each further attempt.
func WithRetry(attempts int, backoff time.Duration) Option {
	return func(c *Client) {
		c.attempts = max(attempts, 1)
		c.backoff = max(backoff, time.Millisecond)
	}
}

// WithMaxBackoff caps one wait between attempts (default 10s), including
// the wait a 429's Retry-After asks for.
func WithMaxBackoff(d time.Duration) Option { return func(c *Client) { c.maxBackoff = d } }

// WithUserAgent names the program in the User-Agent header, which the
// engine's logs show.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the engine at baseURL (such as
// https://flowbox.example.com) calling with key, a personal or an app
// API key (fbk_...).
func New(baseURL, key string, opts ...Option) *Client {
	c := &Client{
		baseURL:    strings.TrimRight(baseURL, "/"),
		key:        key,
		http:       &http.Client{},
		userAgent:  "flowbox-go-client",
		attempts:   4,
		backoff:    200 * time.Millisecond,
		maxBackoff: 10 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// request is one API call, kept whole so that it can be sent again.
type request struct {
	method string
	path   string     // under apiPrefix, escaped
	query  url.Values // may be nil
	header http.Header
	// body is sent as is; seeker, when set, is rewound to bodyStart
	// before each attempt; a body that is neither is sent once.
	body      io.Reader
	bodyBytes []byte
	seeker    io.Seeker
	bodyStart int64
}

// jsonRequest encodes v once, so that every attempt sends the same bytes.
func jsonRequest(method, path string, v any) (*request, error) {
	r := &request{method: method, path: path, header: http.Header{}}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode the %s %s body: %w", method, path, err)
		}
		r.bodyBytes = b
		r.header.Set("Content-Type", "application/json")
	}
	return r, nil
}

// replayable reports whether the body can be sent again.
func (r *request) replayable() bool {
	return r.body == nil || r.seeker != nil
}

// idempotent reports whether sending the request twice does no more than
// sending it once, which makes an answer lost on the way safe to retry.
func (r *request) idempotent() bool {
	return r.method == http.MethodGet || r.method == http.MethodPut || r.method == http.MethodDelete
}

// do sends r, retrying as the package comment says, and returns the first
// answer that is a success (2xx), for the caller to read and close.
// Anything else is returned as an error, an *Error for the API's answers.
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.send(ctx, r)
		if err == nil && resp.StatusCode < 300 {
			return resp, nil
		}
		var retry bool
		var wait time.Duration
		if err != nil {
			// err is a *url.Error, which names the method and the URL.
			retry = ctx.Err() == nil && (notSent(err) || r.idempotent())
		} else {
			apiErr := readError(resp)
			err = apiErr
			switch resp.StatusCode {
			case http.StatusServiceUnavailable, http.StatusTooManyRequests:
				// A wait longer than any backoff is the caller's to
				// decide on; Error.RetryAfter says how long.
				retry = apiErr.RetryAfter <= c.maxBackoff
				wait = apiErr.RetryAfter
			case http.StatusBadGateway, http.StatusGatewayTimeout:
				retry = r.idempotent()
			}
		}
		if !retry || attempt >= c.attempts || !r.replayable() {
			return nil, err
		}
		if werr := sleep(ctx, max(wait, c.backoffFor(attempt))); werr != nil {
			return nil, fmt.Errorf("%w; gave up waiting to retry: %w", err, werr)
		}
	}
}

// send makes one attempt.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	u := c.baseURL + apiPrefix + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	body := r.body
	switch {
	case r.bodyBytes != nil:
		body = bytes.NewReader(r.bodyBytes)
	case r.seeker != nil:
		if _, err := r.seeker.Seek(r.bodyStart, io.SeekStart); err != nil {
			return nil, fmt.Errorf("rewind the body: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("User-Agent", c.userAgent)
	return c.http.Do(req)
}

// backoffFor is the wait after the attempt-th failure: exponential, with
// equal jitter so that many clients do not come back at the same instant.
func (c *Client) backoffFor(attempt int) time.Duration {
	d := c.backoff << min(attempt-1, 30)
	if d <= 0 || d > c.maxBackoff {
		d = c.maxBackoff
	}
	half := d / 2
	return half + rand.N(half+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notSent reports whether err means the request never reached the
// engine: the connection could not be made at all.
func notSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// getJSON and sendJSON make one call whose answer is JSON, decoded into
// out (which may be nil).
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	r, _ := jsonRequest(http.MethodGet, path, nil)
	r.query = query
	return c.call(ctx, r, out)
}

func (c *Client) sendJSON(ctx context.Context, method, path string, in, out any) error {
	r, err := jsonRequest(method, path, in)
	if err != nil {
		return err
	}
	return c.call(ctx, r, out)
}

func (c *Client) call(ctx context.Context, r *request, out any) error {
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", r.method, r.path, err)
	}
	return nil
}

// sessionPath is the path of a session's resource, sub a suffix such as
// "/execute".
func sessionPath(id, sub string) string {
	return "/sessions/" + url.PathEscape(id) + sub
}

package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// credentials adds a server's headers and bearer token to the requests
// that go to the server's own origin, never to another one a redirect
// leads to, and notes whether the server refused them.
type credentials struct {
	base    http.RoundTripper
	origin  string
	headers map[string]string
	token   string

	mu      sync.Mutex
	refused int // the first 401 or 403 status seen
}

func (c *credentials) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL) == c.origin {
		req = req.Clone(req.Context())
		for name, v := range c.headers {
			req.Header.Set(name, v)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
	}
	resp, err := c.base.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		c.mu.Lock()
		if c.refused == 0 {
			c.refused = resp.StatusCode
		}
		c.mu.Unlock()
	}
	return resp, err
}

func (c *credentials) refusal() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// connect opens a session with an HTTP server. Each operation has its
// own session: nothing is kept between a listing and a call, so a server
// restarted meanwhile (and its sessions lost) costs nothing.
func (c *Client) connect(ctx context.Context, srv Server) (*mcp.ClientSession, *credentials, error) {
	u, err := url.Parse(srv.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("its url: %w", err)
	}
	base := c.cfg.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cred := &credentials{base: base, origin: origin(u), headers: srv.Headers, token: srv.Token}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: cred, CheckRedirect: c.cfg.HTTPClient.CheckRedirect, Jar: c.cfg.HTTPClient.Jar},
		// One request, one answer: no reconnection, no stream for
		// messages the server would send later.
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: "1"},
		// No roots, sampling or elicitation: the engine answers no
		// requests of servers.
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, nil, httpErr(ctx, cctx, cred, c.cfg.ConnectTimeout.String(), "connect", err)
	}
	return cs, cred, nil
}

// closeLater ends a session without waiting: closing sends the server a
// DELETE that a server still busy with an abandoned call may hold for
// seconds (the SDK bounds it to 5), and the run need not wait for it.
func closeLater(cs *mcp.ClientSession) {
	go func() { _ = cs.Close() }()
}

// httpErr says why an exchange with an HTTP server failed: the
// credentials refused, no answer in time, or the error as it came.
func httpErr(parent, ctx context.Context, cred *credentials, timeout, doing string, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("%s: %w", doing, parent.Err())
	}
	if status := cred.refusal(); status != 0 {
		return fmt.Errorf("it refused the engine's credentials (HTTP %d %s): check the token and headers registered for it", status, http.StatusText(status))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s", doing, timeout)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// httpTools lists an HTTP server's tools, every page.
func (c *Client) httpTools(ctx context.Context, srv Server) ([]*mcp.Tool, error) {
	cs, cred, err := c.connect(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer closeLater(cs)
	lctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return nil, httpErr(ctx, lctx, cred, c.cfg.CallTimeout.String(), "list its tools", err)
		}
		tools = append(tools, tool)
		if len(tools) >= maxTools {
			break
		}
	}
	return tools, nil
}

// httpCall calls a tool of an HTTP server.
func (c *Client) httpCall(ctx context.Context, srv Server, tool string, args json.RawMessage) (Result, error) {
	cs, cred, err := c.connect(ctx, srv)
	if err != nil {
		return Result{}, err
	}
	defer closeLater(cs)
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			return Result{}, &rpcError{method: "tools/call", msg: wireMessage(wire)}
		}
		return Result{}, httpErr(ctx, cctx, cred, c.cfg.CallTimeout.String(), "call "+tool, err)
	}
	return resultOf(res), nil
}

// Package mcptool is the client side of MCP (B7) for the tool registry:
// the registry of the MCP servers admins register (Store), and a Client
// that lists their tools under names a model may use and calls them.
//
// HTTP servers are reached from the engine over streamable HTTP, with the
// headers and bearer token registered for them. Stdio servers run inside
// the chat's sandbox, as commands of the sandbox manager, so that the
// command policy, the approvals, the audit and the redaction apply to them
// as to any command the agent runs.
//
// A stdio server is kept running in the chat's sandbox where the sandbox
// gives commands standard input (session.go): one long-lived command per
// server and sandbox, one MCP session over its input and output for every
// listing and call of that chat. Elsewhere (a sandbox without standard
// input: Docker without the agent) a stdio server lives for one operation
// (one listing page or one call): each operation is one command that
// starts the server, writes initialize, notifications/initialized and the
// request to it, keeps its input open until the answer is out (many
// servers, the Go SDK's among them, drop what they are doing at the end
// of their input) or most of the timeout has passed, and then closes it
// so that the server ends. A server that keeps state between calls loses
// it there; one that asks the client something before it answers waits
// until the command's timeout; one that does not end at the end of its
// input holds the command until its timeout, its answer still used. The
// command line is the same for the same request, so that a person
// approves exactly what runs.
//
// It must never run a stdio server on the engine's host, never send a
// server's secrets anywhere but to that server, and never fail a run
// because a server is down or broken: that is a result the model reads.
package mcptool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/sandbox"
)

// Defaults of Config.
const (
	DefaultCacheTTL       = 5 * time.Minute
	DefaultFailureTTL     = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultCallTimeout    = 30 * time.Second
	DefaultMaxResultBytes = 64 << 10
)

// maxTools bounds the tools taken from one server: beyond, the model's
// context would fill with declarations.
const maxTools = 256

// clientName is how the engine introduces itself to servers.
const clientName = "flowbox"

// Sandbox runs commands in chats' sandboxes; *sandbox.Manager satisfies
// it.
type Sandbox interface {
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	// Ensure makes the scope's sandbox run and counts a use of it.
	Ensure(ctx context.Context, scope sandbox.Scope) (string, error)
}

// Servers is the registry the client reads servers from; *Store
// satisfies it.
type Servers interface {
	Get(ctx context.Context, id string) (Server, error)
}

// Config configures a Client. Zero values have the documented defaults.
type Config struct {
	// Servers is the registry (required).
	Servers Servers
	// Sandbox runs stdio servers; without it they are unavailable.
	Sandbox Sandbox
	// HTTPClient is the base of the requests to HTTP servers: its
	// Transport (default the outbound client's: public addresses only)
	// and CheckRedirect are
	// used, its Timeout is not (the timeouts below bound each exchange).
	HTTPClient *http.Client
	// CacheTTL is how long a server's tool list is used before it is
	// fetched again (default 5 minutes).
	CacheTTL time.Duration
	// FailureTTL is how long a failed listing is remembered, so that a
	// server that is down does not cost every turn a timeout (default
	// 30 s). Refresh ignores it.
	FailureTTL time.Duration
	// ConnectTimeout bounds reaching an HTTP server and the MCP
	// handshake (default 10 s).
	ConnectTimeout time.Duration
	// CallTimeout bounds one listing or call: the request to an HTTP
	// server, or the whole sandbox command of a stdio server, its start
	// included (default 30 s; the sandbox clamps it to 1 s–300 s).
	CallTimeout time.Duration
	// MaxResultBytes bounds the text of a call's result the model reads;
	// the middle of a longer one is cut (default 64 KiB).
	MaxResultBytes int
	// Now is the clock of the cache (default time.Now).
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Target is the chat an operation serves and who asks for it. Stdio
// servers run in Scope's sandbox with Actor and OnOutput passed to the
// sandbox (see sandbox.ExecRequest); HTTP servers ignore it.
type Target struct {
	Scope    sandbox.Scope
	Actor    sandbox.Actor
	OnOutput func(s sandbox.Stream, p []byte)
	// Approved is the command line a person approved (Result.Command of
	// the call an ask rule stopped), as sandbox.ExecRequest.Approved.
	Approved string
}

// Tool is one of a server's tools as the model is offered it.
type Tool struct {
	// Name is what the model calls it: "{serverID}__{tool}", valid for
	// model APIs (^[a-zA-Z0-9_-]{1,64}$), unique among all servers' tools.
	Name string
	// ServerID and ServerName say whose tool it is; Original is the
	// server's own name for it.
	ServerID   string
	ServerName string
	Original   string
	Title      string
	// Description is the server's, as it gave it.
	Description string
	// InputSchema is the JSON Schema of the arguments (an object schema
	// when the server gave none).
	InputSchema json.RawMessage
	// ReadOnly is the server's readOnlyHint: the tool changes nothing.
	ReadOnly bool
	// Destructive is the server's destructiveHint, nil when it gave none
	// (MCP then means true for a tool that is not read-only).
	Destructive *bool
}

// LLM is the tool's declaration for the model, its description saying
// which server it comes from.
func (t Tool) LLM() llm.Tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	desc = strings.TrimSpace(fmt.Sprintf("(MCP server %s) %s", t.ServerName, desc))
	return llm.Tool{Type: "function", Function: llm.FunctionDef{Name: t.Name, Description: desc, Parameters: t.InputSchema}}
}

// Result is what a call gives the model.
type Result struct {
	// Text is what the model reads: the tool's output, or why there is
	// none.
	Text string
	// IsError: the tool failed, or the server could not be used.
	IsError bool
	// Command is the command line run in the sandbox for a stdio server,
	// as the policy and the audit saw it; a person approves exactly this
	// line (Target.Approved). Empty for HTTP servers.
	Command string
}

// ServerError is a server's failure while its tools were listed.
type ServerError struct {
	ServerID string
	Err      error
}

func (e *ServerError) Error() string { return fmt.Sprintf("MCP server %q: %v", e.ServerID, e.Err) }
func (e *ServerError) Unwrap() error { return e.Err }

// Client lists and calls the tools of registered MCP servers. It is safe
// for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	cache    map[string]*entry
	sessions map[string]*sessionSlot // the stdio servers kept running (session.go)
	closed   bool                    // by Close: no server starts
}

// entry is one server's tool list (per sandbox for stdio servers).
type entry struct {
	// lock lets one fetch run at a time; a waiter gives up with its
	// context.
	lock chan struct{}

	mu sync.Mutex
	// starts counts the fetches begun; gen is the number of the one
	// stored (0: none yet).
	starts, gen uint64
	tools       []Tool
	err         error // a remembered failure, instead of tools
	at          time.Time
	version     string // the server's settings the list came from
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	if cfg.Servers == nil {
		return nil, errors.New("mcptool: Config.Servers is required")
	}
	if cfg.HTTPClient == nil {
		// Public addresses only: a server's URL is typed by a person.
		cfg.HTTPClient = outbound.Allow{}.Client(outbound.Options{Redirects: 10})
	}
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.FailureTTL <= 0 {
		cfg.FailureTTL = DefaultFailureTTL
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Client{cfg: cfg, log: cfg.Logger, cache: map[string]*entry{}}, nil
}

// Tools returns a server's tools, from the cache while it is fresh. For
// a stdio server the list is fetched in the target's sandbox (which
// starts it, as a command would), and kept per sandbox. Errors:
// ErrNotFound, ErrDisabled, a server that cannot be reached or answers
// wrong (a *ServerError), and the sandbox's own errors for stdio servers
// (policy refusals, sandbox.ErrUnavailable, ...), which callers handle as
// they would for a command.
func (c *Client) Tools(ctx context.Context, serverID string, t Target) ([]Tool, error) {
	return c.tools(ctx, serverID, t, false)
}

// Refresh fetches a server's tools now, as Tools does otherwise. Of
// several refreshes at once, a fetch that started after a refresh was
// asked serves it too.
func (c *Client) Refresh(ctx context.Context, serverID string, t Target) ([]Tool, error) {
	return c.tools(ctx, serverID, t, true)
}

// ToolsOf returns the tools of several servers, in their order. A server
// that fails leaves its tools out; the error joins one *ServerError per
// such server, so that the others' tools are still offered.
func (c *Client) ToolsOf(ctx context.Context, serverIDs []string, t Target) ([]Tool, error) {
	var all []Tool
	var errs []error
	for _, id := range serverIDs {
		tools, err := c.Tools(ctx, id, t)
		if err != nil {
			var se *ServerError
			if !errors.As(err, &se) {
				err = &ServerError{ServerID: id, Err: err}
			}
			errs = append(errs, err)
			continue
		}
		all = append(all, tools...)
	}
	return all, errors.Join(errs...)
}

func (c *Client) tools(ctx context.Context, serverID string, t Target, force bool) ([]Tool, error) {
	srv, err := c.server(ctx, serverID)
	if err != nil {
		return nil, err
	}
	return c.list(ctx, srv, t, force)
}

// server reads an enabled server from the registry.
func (c *Client) server(ctx context.Context, id string) (Server, error) {
	srv, err := c.cfg.Servers.Get(ctx, id)
	if err != nil {
		return Server{}, err
	}
	if !srv.Enabled {
		return Server{}, fmt.Errorf("MCP server %q: %w; an admin may enable it", id, ErrDisabled)
	}
	return srv, nil
}

// list returns srv's tools from the cache or a fetch, one fetch at a time
// per entry.
func (c *Client) list(ctx context.Context, srv Server, t Target, force bool) ([]Tool, error) {
	e := c.entry(cacheKey(srv, t))
	version := fingerprint(srv)
	e.mu.Lock()
	asked := e.starts
	if !force {
		if tools, err, ok := c.freshLocked(e, version); ok {
			e.mu.Unlock()
			return tools, err
		}
	}
	e.mu.Unlock()

	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the tools of MCP server %q: %w", srv.ID, ctx.Err())
	}
	defer func() { <-e.lock }()

	// Another caller may have fetched while this one waited: a fresh list
	// serves a listing, one fetched since the refresh was asked serves it.
	e.mu.Lock()
	if tools, err, ok := c.freshLocked(e, version); ok && (!force || e.gen > asked) {
		e.mu.Unlock()
		return tools, err
	}
	e.starts++
	mine := e.starts
	e.mu.Unlock()

	tools, err := c.fetch(ctx, srv, t)
	if err != nil && !remembered(ctx, err) {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gen, e.tools, e.err, e.at, e.version = mine, tools, err, c.cfg.Now(), version
	if err != nil {
		return nil, err
	}
	return slices.Clone(tools), nil
}

// freshLocked returns e's list or remembered failure if it is still
// good for version.
func (c *Client) freshLocked(e *entry, version string) ([]Tool, error, bool) {
	if e.gen == 0 || e.version != version {
		return nil, nil, false
	}
	age := c.cfg.Now().Sub(e.at)
	if e.err != nil {
		return nil, e.err, age < c.cfg.FailureTTL
	}
	return slices.Clone(e.tools), nil, age < c.cfg.CacheTTL
}

// remembered reports whether a failed listing is cached: a server's own
// failure is; the sandbox's refusals and the end of the caller's context
// are not (they depend on the caller, and the next one may fare better).
func remembered(ctx context.Context, err error) bool {
	var se *sandboxError
	return !errors.As(err, &se) && ctx.Err() == nil
}

// entry returns the cache entry of key, creating it, and drops the
// entries nobody refreshed for a while (a stdio server has one per
// sandbox).
func (c *Client) entry(key string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[key]; ok {
		return e
	}
	now := c.cfg.Now()
	for k, e := range c.cache {
		if !e.mu.TryLock() {
			continue
		}
		stale := e.gen > 0 && now.Sub(e.at) > 2*max(c.cfg.CacheTTL, c.cfg.FailureTTL) && len(e.lock) == 0
		e.mu.Unlock()
		if stale {
			delete(c.cache, k)
		}
	}
	e := &entry{lock: make(chan struct{}, 1)}
	c.cache[key] = e
	return e
}

func cacheKey(srv Server, t Target) string {
	if srv.Transport == TransportStdio {
		return srv.ID + "/" + t.Scope.SandboxID()
	}
	return srv.ID
}

// fingerprint changes when the settings a list depends on change, the
// credentials included (a list that failed on them is tried again).
func fingerprint(srv Server) string {
	b, _ := json.Marshal([]any{srv.UpdatedAt.UnixNano(), srv.Name, srv.Transport, srv.URL, srv.Command, srv.Headers, srv.Token})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fetch asks the server for its tools.
func (c *Client) fetch(ctx context.Context, srv Server, t Target) ([]Tool, error) {
	var raw []*mcp.Tool
	var err error
	switch srv.Transport {
	case TransportHTTP:
		raw, err = c.httpTools(ctx, srv)
	case TransportStdio:
		raw, err = c.stdioTools(ctx, srv, t)
	default:
		err = fmt.Errorf("unknown transport %q", srv.Transport)
	}
	if err != nil {
		if !remembered(ctx, err) {
			return nil, err
		}
		var re *rpcError
		if !errors.As(err, &re) {
			err = errors.New(scrub(srv, err.Error()))
		}
		return nil, &ServerError{ServerID: srv.ID, Err: err}
	}
	return convertTools(srv, raw), nil
}

// convertTools names a server's tools for the model.
func convertTools(srv Server, raw []*mcp.Tool) []Tool {
	raw = slices.DeleteFunc(slices.Clone(raw), func(t *mcp.Tool) bool { return t == nil || t.Name == "" })
	if len(raw) > maxTools {
		raw = raw[:maxTools]
	}
	originals := make([]string, len(raw))
	for i, t := range raw {
		originals[i] = t.Name
	}
	names := toolNames(srv.ID, originals)
	out := make([]Tool, len(raw))
	for i, t := range raw {
		tool := Tool{Name: names[i], ServerID: srv.ID, ServerName: srv.Name, Original: t.Name, Title: t.Title,
			Description: t.Description, InputSchema: schemaOf(t.InputSchema)}
		if a := t.Annotations; a != nil {
			tool.ReadOnly, tool.Destructive = a.ReadOnlyHint, a.DestructiveHint
			if tool.Title == "" {
				tool.Title = a.Title
			}
		}
		out[i] = tool
	}
	return out
}

// schemaOf is a tool's input schema as JSON; an object schema without
// properties when the server gave none that is an object.
func schemaOf(s any) json.RawMessage {
	empty := json.RawMessage(`{"type":"object","properties":{}}`)
	if s == nil {
		return empty
	}
	b, err := json.Marshal(s)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return empty
	}
	return b
}

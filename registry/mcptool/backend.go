package mcptool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
)

// Backend is the registry's "mcp" backend: the tools of the MCP servers
// the admins registered (N6), named "mcp:{serverId}/{tool}". The
// connections and tool lists are shared; a stdio server runs in the
// session's sandbox.
type Backend struct {
	servers *Store
	client  *Client
	guard   registry.Guard
}

// NewBackend is the backend of the servers in servers, reached through
// client (nil: none). A call that passes no sandbox chain answers to
// guard (the app's redaction and the audit).
func NewBackend(servers *Store, client *Client, guard registry.Guard) *Backend {
	return &Backend{servers: servers, client: client, guard: guard}
}

func (b *Backend) Prefix() string { return "mcp" }

// Shutdown ends the stdio servers kept running in sandboxes.
func (b *Backend) Shutdown(ctx context.Context) error {
	if b.client == nil {
		return nil
	}
	return b.client.Close()
}

// Tools lists every registered server's tools; a server that cannot be
// reached is reported and its tools left out.
func (b *Backend) Tools(ctx context.Context, scope sandbox.Scope) ([]registry.Tool, error) {
	if b.servers == nil {
		return nil, nil
	}
	servers, err := b.servers.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []registry.Tool
	var errs []error
	for _, srv := range servers {
		if !srv.Enabled || srv.Transport != TransportHTTP && scope.ChatID == "" {
			continue // a stdio server is listed in a session's sandbox
		}
		tools, err := b.Expand(ctx, scope, "mcp:"+srv.ID)
		errs = append(errs, err)
		out = append(out, tools...)
	}
	return out, errors.Join(errs...)
}

// Expand gives every tool of one server ("mcp:{serverId}"), or the one
// tool a full name names.
func (b *Backend) Expand(ctx context.Context, scope sandbox.Scope, name string) ([]registry.Tool, error) {
	if b.client == nil {
		return nil, fmt.Errorf("%w %q: no MCP servers on this engine", registry.ErrNoTool, name)
	}
	id, want, _ := strings.Cut(strings.TrimPrefix(name, "mcp:"), "/")
	tools, err := b.client.Tools(ctx, id, Target{Scope: scope, Actor: sandbox.Actor{UserID: scope.UserID, Kind: sandbox.ActorAgent}})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w %q: no MCP server %s", registry.ErrNoTool, name, id)
		}
		return nil, fmt.Errorf("MCP server %s: %w", id, err)
	}
	var out []registry.Tool
	for _, t := range tools {
		if want == "" || want == t.Original {
			out = append(out, b.tool(t))
		}
	}
	if want != "" && len(out) == 0 {
		return nil, fmt.Errorf("%w %q: MCP server %s has no tool %s", registry.ErrNoTool, name, id, want)
	}
	return out, nil
}

// Warmup lists the tools of every enabled HTTP server, so that the
// first session or chat that uses them finds them cached. A stdio server
// is listed in a sandbox, on its first use.
func (b *Backend) Warmup(ctx context.Context) error {
	if b.servers == nil || b.client == nil {
		return nil
	}
	servers, err := b.servers.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, srv := range servers {
		if srv.Enabled && srv.Transport == TransportHTTP {
			if _, err := b.client.Tools(ctx, srv.ID, Target{}); err != nil {
				errs = append(errs, fmt.Errorf("MCP server %s: %w", srv.ID, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (b *Backend) Find(ctx context.Context, scope sandbox.Scope, name string) (registry.Tool, error) {
	if !strings.Contains(name, "/") {
		return registry.Tool{}, fmt.Errorf("%w %q: name one tool, mcp:{server}/{tool}", registry.ErrNoTool, name)
	}
	tools, err := b.Expand(ctx, scope, name)
	if err != nil {
		return registry.Tool{}, err
	}
	return tools[0], nil
}

// tool is an MCP server's tool as the registry lists it; the model knows
// it by its server-prefixed name. Concurrency-safe: a tool its server
// says changes nothing.
func (b *Backend) tool(t Tool) registry.Tool {
	def := t.LLM()
	destructive := !t.ReadOnly
	if t.Destructive != nil {
		destructive = *t.Destructive
	}
	return registry.Tool{Name: "mcp:" + t.ServerID + "/" + t.Original, ModelName: t.Name, Description: def.Function.Description,
		InputSchema: t.InputSchema, ReadOnly: t.ReadOnly, Destructive: destructive, ConcurrencySafe: t.ReadOnly,
		Run: func(ctx context.Context, call registry.Call) (registry.Result, error) { return b.run(ctx, t, call) }}
}

func (b *Backend) run(ctx context.Context, t Tool, call registry.Call) (registry.Result, error) {
	start := time.Now()
	if call.Actor.Tool == "" {
		call.Actor.Tool = t.Name
	}
	res, err := b.client.Call(ctx, t.Name, call.Params, Target{Scope: call.Scope, Actor: call.Actor,
		OnOutput: call.OnOutput, Approved: call.Approved})
	if res.Command == "" {
		// A call that ran no command of its own passed no sandbox chain
		// (an HTTP server's; a call to a stdio server kept running):
		// redact and audit it here. A stdio server's call that was a
		// command was audited by the chain.
		res.Text = b.guard.Redact(ctx, call.Scope.AppID, res.Text)
		status := audit.StatusSuccess
		if res.IsError {
			status = audit.StatusFailed
		}
		b.guard.Record(ctx, call, audit.Record{Tool: t.Name, Op: "mcp:" + t.ServerID + "/" + t.Original,
			Command: b.guard.Redact(ctx, call.Scope.AppID, registry.ClipText(string(call.Params), 2000)), Status: status,
			StdoutBytes: int64(len(res.Text))}, err, start)
	}
	if err != nil {
		return registry.Result{}, err
	}
	return registry.Result{Text: res.Text, IsError: res.IsError}, nil
}

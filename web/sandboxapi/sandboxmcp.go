package sandboxapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
)

// Version is the engine's version as its MCP server tells clients.
const Version = "2"

// mcpCall is what the MCP server's tools run with: the session and who
// calls, from the request the route checked.
type mcpCall struct {
	session sessions.Session
	actor   sandbox.Actor
}

type mcpCallKey struct{}

// MCP serves /api/sandbox/v1/sessions/{id}/mcp: the registry's tools
// over MCP (streamable HTTP), run in the caller's session with the
// caller's credentials, as execute runs them.
func (h *API) MCP(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	_, actor := caller(c)
	ctx := context.WithValue(c.Request.Context(), mcpCallKey{}, mcpCall{session: s, actor: actor})
	h.mcp().ServeHTTP(c.Writer, c.Request.WithContext(ctx))
}

// mcp is the MCP handler, made on first use. It is stateless (every
// request is complete in itself, no Mcp-Session-Id), so nothing of one
// caller's MCP session can be reached through another's request.
func (h *API) mcp() *mcp.StreamableHTTPHandler {
	h.mcpOnce.Do(func() {
		h.mcpHandler = mcp.NewStreamableHTTPHandler(h.mcpServer, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	})
	return h.mcpHandler
}

// mcpServer is the MCP server of one request: the tools the registry
// lists for its session.
func (h *API) mcpServer(req *http.Request) *mcp.Server {
	call, _ := req.Context().Value(mcpCallKey{}).(mcpCall)
	srv := mcp.NewServer(&mcp.Implementation{Name: "flowbox-sandbox", Version: Version}, nil)
	tools, err := h.Tools.List(req.Context(), call.session.Scope())
	if err != nil {
		h.log().Warn("sandbox MCP server: some tools are not listed", "err", err)
	}
	// Only the session's tools are offered, and so callable.
	ts, err := h.toolScope(req.Context(), call.session.AppID)
	if err != nil {
		h.log().Warn("sandbox MCP server: the session's tools", "session", call.session.ID, "err", err)
	}
	tools = ts.offered(tools)
	for _, t := range tools {
		readOnly, destructive := t.ReadOnly, t.Destructive
		srv.AddTool(&mcp.Tool{Name: registry.PlainName(t.Name), Title: t.Name, Description: t.Description,
			InputSchema: t.InputSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive}},
			func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return h.mcpRun(ctx, call, t, r.Params.Arguments)
			})
	}
	return srv
}

// mcpRun runs one tool call. What the caller got wrong and what the
// policy refused are tool errors the client's model can read; only a
// failure of the engine is a protocol error.
func (h *API) mcpRun(ctx context.Context, call mcpCall, t registry.Tool, args json.RawMessage) (*mcp.CallToolResult, error) {
	actor := call.actor
	actor.Tool = t.Name
	res, err := h.Tools.Execute(ctx, t, registry.Call{Scope: call.session.Scope(), Actor: actor, Params: args})
	if err != nil {
		f := h.classify("mcp", err)
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: f.Message}}}, nil
	}
	out := &mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}}
	if res.Output != nil {
		out.StructuredContent = res.Output
	}
	return out, nil
}

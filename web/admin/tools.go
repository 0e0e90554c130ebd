package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/web/api"
)

// MCPServers is the registry of MCP servers (mcptool.Store).
type MCPServers interface {
	Put(ctx context.Context, srv mcptool.Server) (mcptool.Server, error)
	Update(ctx context.Context, srv mcptool.Server) (mcptool.Server, error)
	Get(ctx context.Context, id string) (mcptool.Server, error)
	List(ctx context.Context) ([]mcptool.Server, error)
	Delete(ctx context.Context, id string) error
}

// MCPTools lists a server's tools (mcptool.Client): Tools from its cache
// when fresh, Refresh now.
type MCPTools interface {
	Tools(ctx context.Context, serverID string, t mcptool.Target) ([]mcptool.Tool, error)
	Refresh(ctx context.Context, serverID string, t mcptool.Target) ([]mcptool.Tool, error)
}

// serverChoice is a server as builders choose it: as a whole, or tool by
// tool where its tools can be listed (HTTP servers; a stdio server's are
// listed in a chat's sandbox).
type serverChoice struct {
	mcptool.PublicServer
	Tools []toolChoice `json:"tools,omitempty"`
	// ToolsError says why the tools are not listed.
	ToolsError string `json:"toolsError,omitempty"`
}

type toolChoice struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ReadOnly    bool   `json:"readOnly"`
}

// ExecToolInfo is an exec tool as builders see it.
type ExecToolInfo struct {
	Name            string `json:"name"`
	Description     string `json:"description"`
	RunIn           string `json:"runIn"`
	ReadOnly        bool   `json:"readOnly"`
	Destructive     bool   `json:"destructive"`
	ConcurrencySafe bool   `json:"concurrencySafe"`
}

// Tools serves what the tool-call node may offer besides the
// sandbox (N6): the operator's exec tools, listed for builders, and the
// MCP servers admins register. Secrets of the servers (headers, tokens)
// never leave: every answer carries the public view.
type Tools struct {
	Servers MCPServers
	Client  MCPTools
	Exec    []ExecToolInfo
}

// serverBody is a server as an admin sends it.
type serverBody struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Transport string            `json:"transport"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Token     string            `json:"token"`
	Command   []string          `json:"command"`
	Enabled   *bool             `json:"enabled"`
}

func (b serverBody) server() mcptool.Server {
	enabled := b.Enabled == nil || *b.Enabled
	return mcptool.Server{ID: b.ID, Name: b.Name, Transport: b.Transport, URL: b.URL, Headers: b.Headers, Token: b.Token,
		Command: b.Command, Enabled: enabled}
}

// Choices serves GET /api/tools: the exec tools and the enabled MCP
// servers an app's tool-call node may offer.
func (h *Tools) Choices(c *gin.Context) {
	servers, err := h.Servers.List(c.Request.Context())
	if err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	pub := []serverChoice{}
	for _, s := range servers {
		if !s.Enabled {
			continue
		}
		p := serverChoice{PublicServer: s.Public()}
		p.Headers, p.URL = nil, "" // builders need the name, not the address
		if s.Transport == mcptool.TransportHTTP && h.Client != nil {
			// Cached for minutes; a server that is slow to answer costs
			// the builder its tool-by-tool choice, not its page.
			ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
			tools, err := h.Client.Tools(ctx, s.ID, mcptool.Target{})
			cancel()
			if err != nil {
				p.ToolsError = err.Error()
			}
			for _, t := range tools {
				p.Tools = append(p.Tools, toolChoice{Name: t.Original, Description: t.Description, ReadOnly: t.ReadOnly})
			}
		}
		pub = append(pub, p)
	}
	exec := h.Exec
	if exec == nil {
		exec = []ExecToolInfo{}
	}
	c.JSON(http.StatusOK, gin.H{"execTools": exec, "mcpServers": pub})
}

// ServerList serves GET /admin/api/mcp-servers.
func (h *Tools) ServerList(c *gin.Context) {
	servers, err := h.Servers.List(c.Request.Context())
	if err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	out := make([]mcptool.PublicServer, len(servers))
	for i, s := range servers {
		out[i] = s.Public()
	}
	c.JSON(http.StatusOK, gin.H{"servers": out})
}

// CreateServer serves POST /admin/api/mcp-servers.
func (h *Tools) CreateServer(c *gin.Context) {
	var b serverBody
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10), &b); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"id", "name", "transport": "http"|"stdio", "url", "headers", "token", "command", "enabled"}: `+err.Error())
		return
	}
	srv, err := h.Servers.Put(c.Request.Context(), b.server())
	if err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	c.JSON(http.StatusCreated, gin.H{"server": srv.Public()})
}

// UpdateServer serves PUT /admin/api/mcp-servers/{id}: the whole
// server; a header value or token of "•••" keeps the stored one.
func (h *Tools) UpdateServer(c *gin.Context) {
	var b serverBody
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10), &b); err != nil {
		api.Error(c, http.StatusBadRequest, "the request body is not a server: "+err.Error())
		return
	}
	b.ID = c.Param("id")
	srv, err := h.Servers.Update(c.Request.Context(), b.server())
	if err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	c.JSON(http.StatusOK, gin.H{"server": srv.Public()})
}

// DeleteServer serves DELETE /admin/api/mcp-servers/{id}.
func (h *Tools) DeleteServer(c *gin.Context) {
	if err := h.Servers.Delete(c.Request.Context(), c.Param("id")); err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": c.Param("id")})
}

// RefreshServer serves POST /admin/api/mcp-servers/{id}/refresh: the
// server's tools, fetched now. A stdio server runs inside a chat's
// sandbox and is listed when a chat first uses it.
func (h *Tools) RefreshServer(c *gin.Context) {
	ctx := c.Request.Context()
	srv, err := h.Servers.Get(ctx, c.Param("id"))
	if err != nil {
		api.Fail(c, err, "the MCP servers could not be read or written")
		return
	}
	if srv.Transport != mcptool.TransportHTTP {
		api.Error(c, http.StatusBadRequest, "a stdio server runs inside each chat's sandbox: its tools are listed when a chat first uses it")
		return
	}
	tools, err := h.Client.Refresh(ctx, srv.ID, mcptool.Target{})
	if err != nil {
		api.Error(c, http.StatusBadGateway, err.Error())
		return
	}
	out := make([]gin.H, len(tools))
	for i, t := range tools {
		out[i] = gin.H{"name": t.Name, "tool": t.Original, "description": t.Description, "readOnly": t.ReadOnly, "inputSchema": t.InputSchema}
	}
	c.JSON(http.StatusOK, gin.H{"server": srv.Public(), "tools": out})
}

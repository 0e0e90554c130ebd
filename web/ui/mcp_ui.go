package ui

import "github.com/gin-gonic/gin"

// MCP is the admins' page of the MCP servers. The browser app draws the list
// from /admin/api/mcp-servers and redraws it after each change; the edit
// form is filled from the public view, so the servers' secrets never
// reach the page (a masked value sent back keeps the stored one).
func (u *UI) MCP(c *gin.Context) {
	u.Render(c, "mcp", Translate(Lang(c), "mcpServers"), nil)
}

// Package admin serves the engine's operators and admins: the gate in
// front of every /admin route, the audit, the
// skills catalogue, the MCP servers and tools, and the queue dashboard,
// served offline.
package admin

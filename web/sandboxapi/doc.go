// Package sandboxapi serves the sandbox service API under
// /api/sandbox/v1: sessions, commands, files, warm-up, the tools a program
// may call and each session's MCP endpoint, with its OpenAPI document.
// Its callers are programs with a personal or app key.
package sandboxapi

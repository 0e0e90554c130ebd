// Package chat serves chat users and programs that chat: the chat API
// (POST /api/v1/chat/completions, OpenAI- and FastGPT-compatible, with
// its SSE stream, and POST /api/v1/chat/stop that ends a run), the run
// limits on chats, approvals and interactive answers, and an app's chats
// (list, read, rename, delete). It reaches sandboxes only through the
// workflow engine and the sandbox.Manager.
package chat

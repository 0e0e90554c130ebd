// Package llm talks to language models through the OpenAI Chat Completions
// protocol: any compatible endpoint (base URL, key, model), streamed or
// not, with tool calls; and Demo, a built-in offline model for running the
// product without a key. It knows nothing of workflows, chats or sandboxes
// beyond the tool calls a model makes; it must never log API keys or
// message contents.
package llm

import (
	"context"
	"encoding/json"
)

// Roles of a message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in the wire shape of the protocol.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is a function call the model asks for. Arguments is the JSON
// text exactly as the model sent it, which may be broken: callers parse it
// leniently.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool declares a function the model may call.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is a tool's name, description and JSON Schema parameters.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is one completion request.
type Request struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Tools       []Tool    `json:"tools,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
}

// Usage counts tokens as the endpoint reports them (zero when it does not).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Response is the model's whole answer: text, tool calls, or both.
type Response struct {
	Message      Message
	FinishReason string
	Usage        Usage
}

// Model answers chat requests. OnText, when not nil, receives the answer's
// text as it is produced (streaming); the returned Response holds all of
// it either way.
type Model interface {
	Complete(ctx context.Context, req Request, onText func(string)) (Response, error)
}

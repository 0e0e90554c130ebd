package client

import (
	"context"
	"encoding/json"
)

// Tool is one tool the caller may execute.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of its params.
	InputSchema     json.RawMessage `json:"inputSchema"`
	ReadOnly        bool            `json:"readOnly"`
	Destructive     bool            `json:"destructive"`
	ConcurrencySafe bool            `json:"concurrencySafe"`
}

// Tools lists the tools the caller may execute.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var out struct {
		Tools []Tool `json:"tools"`
	}
	if err := c.getJSON(ctx, "/tools", nil, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

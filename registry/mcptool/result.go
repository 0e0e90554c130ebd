package mcptool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultOf is a tool's result as the model reads it: its text contents,
// a summary of the others, and its structured content as JSON unless a
// text already says exactly that (servers are asked to send both).
func resultOf(r *mcp.CallToolResult) Result {
	if r == nil {
		return Result{}
	}
	var parts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image%s, %d bytes]", ofType(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio%s, %d bytes]", ofType(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			parts = append(parts, embedded(c.Resource))
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("[%s content]", strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp.")))
		}
	}
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil && !saysAlready(parts, b) {
			parts = append(parts, string(b))
		}
	}
	return Result{Text: strings.Join(parts, "\n"), IsError: r.IsError}
}

func ofType(mime string) string {
	if mime == "" {
		return ""
	}
	return " " + mime
}

// embedded is a resource sent inside a result: its text, or what it is.
func embedded(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource]"
	case r.Text != "":
		return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
	}
	return fmt.Sprintf("[resource %s%s, %d bytes]", r.URI, ofType(r.MIMEType), len(r.Blob))
}

// saysAlready reports whether one of the texts is the JSON b.
func saysAlready(texts []string, b []byte) bool {
	for _, t := range texts {
		// Decoded and encoded again: the server's encoder may space and
		// order keys otherwise than Go's.
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			if again, err := json.Marshal(v); err == nil && bytes.Equal(again, b) {
				return true
			}
		}
	}
	return false
}

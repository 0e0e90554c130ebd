package mcptool

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResultOf(t *testing.T) {
	tests := []struct {
		name    string
		in      *mcp.CallToolResult
		want    string
		isError bool
	}{
		{"texts", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}, &mcp.TextContent{Text: "two"}}}, "one\ntwo", false},
		{"error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, "boom", true},
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"b": 2, "a": 1}}, `{"a":1,"b":2}`, false},
		{"structured said already", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{ "b": 2, "a": 1 }`}},
			StructuredContent: map[string]any{"a": 1, "b": 2}}, `{ "b": 2, "a": 1 }`, false},
		{"structured besides a text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sum computed"}},
			StructuredContent: map[string]any{"sum": 3}}, "sum computed\n{\"sum\":3}", false},
		{"others summarized", &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
			&mcp.ResourceLink{Name: "report", URI: "file:///r.txt"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", Text: "inside"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.bin", MIMEType: "application/zip", Blob: make([]byte, 7)}},
		}}, "[image image/png, 1234 bytes]\n[audio audio/wav, 10 bytes]\n[resource report: file:///r.txt]\n[resource file:///a.txt]\ninside\n[resource file:///b.bin application/zip, 7 bytes]", false},
		{"nil", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resultOf(tt.in)
			if got.Text != tt.want || got.IsError != tt.isError {
				t.Errorf("got %q (isError %v); want %q (isError %v)", got.Text, got.IsError, tt.want, tt.isError)
			}
		})
	}
}

func TestClip(t *testing.T) {
	s := "αβγδεζηθικλμνξοπ" // two bytes a letter
	got := clip(s, 10)
	if got == s || !strings.Contains(got, "bytes cut") {
		t.Fatalf("clip: got %q; want a marked cut", got)
	}
	for _, r := range got {
		if r == '\uFFFD' {
			t.Fatalf("clip cut a character in two: %q", got)
		}
	}
	if clip("short", 10) != "short" {
		t.Error("clip changed a short text")
	}
}

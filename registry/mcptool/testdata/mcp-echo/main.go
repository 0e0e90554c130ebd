// Command mcp-echo is a tiny MCP server on stdio for the tests of
// registry/mcptool: they build it statically and run it inside real
// sandboxes. It offers echo, add, big, sleep and count (which says how
// many times it was called by this process). With -mute it reads its input
// to the end and exits without a word, as a broken server would.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type bigIn struct {
	Bytes int `json:"bytes"`
}

type sleepIn struct {
	Seconds float64 `json:"seconds"`
}

func main() {
	mute := flag.Bool("mute", false, "read the input and exit without answering")
	flag.Parse()
	if *mute {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	// A line on stderr, as many servers log there: the client must not
	// take it for an answer.
	fmt.Fprintln(os.Stderr, "mcp-echo: starting")
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-echo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Send the text back.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	// big answers with more than a command's output keeps.
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answer with that many bytes."},
		func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})
	// sleep answers after a while, or gives up when its request is
	// cancelled, as this SDK's servers do at the end of their input.
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Wait, then say so."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	// count keeps state between calls: a server kept running answers 1,
	// 2, 3; one started for each call always 1.
	var calls atomic.Int64
	mcp.AddTool(s, &mcp.Tool{Name: "count", Description: "Count the calls of this process.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			n := calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d (pid %d)", n, os.Getpid())}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

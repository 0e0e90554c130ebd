package chat

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/nodes"
)

// Every engine event's FastGPT form, byte for byte: FastGPT clients and
// the chat page (web/ui/app/src/sse.ts) parse these. A unit test of the
// mapping in chatStream, with no router: the router's part is in
// chat_api_test.go.
func TestSSEEventMapping(t *testing.T) {
	tests := []struct {
		name        string
		data        nodes.EventData
		event, json string // "" for nothing sent
	}{
		{"answer", nodes.AnswerDelta{Text: "hi"}, "answer",
			`{"choices":[{"delta":{"content":"hi","role":"assistant"},"finish_reason":null,"index":0}],"created":7,"id":"chat-1","model":"demo","object":"chat.completion.chunk"}`},
		{"empty answer", nodes.AnswerDelta{}, "", ""},
		{"node status", nodes.NodeStatus{Status: nodes.StatusRunning}, "flowNodeStatus", `{"name":"Agent","nodeId":"agent","status":"running"}`},
		{"node done", nodes.NodeDone{Response: nodes.NodeResponse{NodeID: "agent", Name: "Agent", Type: "tools", RunningTime: 1.5,
			Outputs: map[string]any{"answerText": "secret"}, Branches: []string{"catch"}, Error: "boom"}}, "flowNodeResponse",
			`{"branches":["catch"],"error":"boom","moduleName":"Agent","moduleType":"tools","nodeId":"agent","runningTime":1.5}`},
		{"tool call", nodes.ToolCallStarted{ID: "c1", Tool: "sandbox_shell", Params: `{"command":"ls"}`}, "toolCall",
			`{"tool":{"functionName":"sandbox_shell","id":"c1","params":"{\"command\":\"ls\"}","response":"","toolName":"sandbox_shell"}}`},
		{"tool params", nodes.ToolParams{ID: "c1", Params: `{"command":"ls"}`}, "toolParams", `{"tool":{"id":"c1","params":"{\"command\":\"ls\"}"}}`},
		{"tool output", nodes.ToolOutput{ID: "c1", Stream: "stderr", Text: "err\n"}, "toolOutput", `{"tool":{"id":"c1","stream":"stderr","text":"err\n"}}`},
		{"tool result", nodes.ToolResult{ID: "c1", Tool: "sandbox_shell", Response: `{"stdout":""}`, DurationMs: 12, Status: "success"}, "toolResponse",
			`{"tool":{"durationMs":12,"id":"c1","response":"{\"stdout\":\"\"}","status":"success"}}`},
		{"error", nodes.NodeError{Message: "sandbox service temporarily unavailable, retry later"}, "error",
			`{"message":"sandbox service temporarily unavailable, retry later"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			s := newChatStream(c, true, true, "chat-1")
			s.created, s.model = 7, "demo"
			s.event(nodes.Event{NodeID: "agent", NodeName: "Agent", Data: tc.data})
			want := ""
			if tc.event != "" {
				want = "event: " + tc.event + "\ndata: " + tc.json + "\n\n"
			}
			if got := w.Body.String(); got != want {
				t.Errorf("sent %q\nwant %q", got, want)
			}
		})
	}
}

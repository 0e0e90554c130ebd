package chat

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/runapp"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// toolCalls lists every tool call of the run, in order, with those of
// the apps it called whose details it keeps.
func toolCalls(res *nodes.Result) json.RawMessage {
	var all []toolcall.Call
	var collect func([]nodes.NodeResponse)
	collect = func(responses []nodes.NodeResponse) {
		for _, r := range responses {
			switch d := r.Detail.(type) {
			case toolcall.Detail:
				all = append(all, d.ToolCalls...)
			case runapp.Detail:
				collect(d.Responses)
			}
		}
	}
	collect(res.Responses)
	if len(all) == 0 {
		return nil
	}
	return mustJSON(all)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(fmt.Sprintf("%q", "unencodable: "+err.Error()))
	}
	return b
}

// chatStream writes a run's events to the client in the form it asked for.
type chatStream struct {
	c              *gin.Context
	stream, detail bool
	id             string
	replyID        string // the reply's responseChatItemId
	created        int64
	trace          func(time.Time)
	// redactor, when set, redacts the model's answer (answer holds back
	// what could be the start of a secret across deltas) and the commands
	// it wrote.
	redactor *redact.Redactor
	answer   *redact.Transformer
	// approval, when set, is the question of a paused run: sent before
	// the stream closes, or in the completion.
	approval gin.H
	// askedDetail sends approval as the event "interactive" even without
	// detail: the client asked for it, and a share link that hides the
	// tool cards still shows its workflow's questions.
	askedDetail bool
	// versionID names the app's version that runs ("" for its draft).
	versionID string
	// model is the app's id, echoed as OpenAI's answers echo the model;
	// includeUsage sends a last chunk with the run's usage.
	model        string
	includeUsage bool
}

func newChatStream(c *gin.Context, stream, detail bool, id string) *chatStream {
	s := &chatStream{c: c, stream: stream, detail: detail, id: id, created: time.Now().Unix()}
	if stream {
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
	}
	return s
}

func (s *chatStream) chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func (s *chatStream) send(event string, data any) {
	s.write(s.detail, event, data)
}

// write writes one SSE message; named: with its event line.
func (s *chatStream) write(named bool, event string, data any) {
	if s.trace != nil {
		s.trace(time.Now())
	}
	var b []byte
	if str, ok := data.(string); ok && str == "[DONE]" {
		b = []byte(str)
	} else {
		b, _ = json.Marshal(data)
	}
	w := s.c.Writer
	if named && event != "" {
		io.WriteString(w, "event: "+event+"\n")
	}
	io.WriteString(w, "data: ")
	w.Write(b)
	io.WriteString(w, "\n\n")
	w.Flush()
}

// event relays one engine event in FastGPT's SSE form: the event names
// and JSON shapes are chosen here, not in nodes.
func (s *chatStream) event(ev nodes.Event) {
	if !s.stream {
		return
	}
	if a, ok := ev.Data.(nodes.AnswerDelta); ok {
		text := a.Text
		if s.answer != nil {
			text = string(s.answer.Transform([]byte(text)))
		}
		if text != "" {
			s.send("answer", s.chunk(map[string]any{"role": "assistant", "content": text}, nil))
		}
		return
	}
	if !s.detail {
		return
	}
	switch ev.Data.(type) {
	case nodes.ToolCallStarted, nodes.NodeDone:
		// The model's text before a tool call, or of a node that ended, is
		// complete: what redaction held back goes out first, in order.
		s.flushAnswer()
	}
	switch d := ev.Data.(type) {
	case nodes.NodeStatus:
		s.send("flowNodeStatus", map[string]any{"status": d.Status, "name": ev.NodeName, "nodeId": ev.NodeID})
	case nodes.NodeDone:
		// What lights the node up in a builder; its inputs and outputs come
		// with flowResponses, redacted, when the run ends.
		r := d.Response
		s.send("flowNodeResponse", map[string]any{"nodeId": r.NodeID, "moduleName": r.Name, "moduleType": r.Type,
			"runningTime": r.RunningTime, "error": r.Error, "branches": r.Branches})
	case nodes.ToolCallStarted:
		s.send("toolCall", map[string]any{"tool": map[string]any{"id": d.ID, "toolName": d.Tool, "functionName": d.Tool, "params": redactArgs(s.redactor, d.Params), "response": ""}})
	case nodes.ToolParams:
		s.send("toolParams", map[string]any{"tool": map[string]any{"id": d.ID, "params": redactArgs(s.redactor, d.Params)}})
	case nodes.ToolResult:
		s.send("toolResponse", map[string]any{"tool": map[string]any{"id": d.ID, "response": d.Response, "durationMs": d.DurationMs, "status": d.Status}})
	case nodes.ToolOutput:
		s.send("toolOutput", map[string]any{"tool": map[string]any{"id": d.ID, "stream": d.Stream, "text": d.Text}})
	case nodes.NodeError:
		s.send("error", map[string]any{"message": d.Message})
	}
}

// flushAnswer sends what the answer's redaction held back, and starts
// the next stretch of answer afresh.
func (s *chatStream) flushAnswer() {
	if s.answer == nil {
		return
	}
	if rest := s.answer.Flush(); len(rest) > 0 {
		s.send("answer", s.chunk(map[string]any{"role": "assistant", "content": string(rest)}, nil))
	}
	s.answer = s.redactor.Transformer()
}

// finish ends the answer: the closing chunk (and the node responses with
// detail) on a stream, or the whole completion.
func (s *chatStream) finish(res *nodes.Result) {
	if s.stream {
		s.flushAnswer()
		if s.approval != nil && (s.detail || s.askedDetail) {
			s.write(true, "interactive", s.approval)
		}
		s.send("answer", s.chunk(map[string]any{}, "stop"))
		if s.includeUsage {
			s.send("answer", map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
				"choices": []any{}, "usage": usage(res.Responses)})
		}
		if s.detail {
			s.send("appVersion", map[string]any{"versionId": s.versionID})
			s.send("flowResponses", res.Responses)
		}
		s.send("answer", "[DONE]")
		return
	}
	body := gin.H{
		"id": s.id, "object": "chat.completion", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": res.Answer}, "finish_reason": "stop"}},
		"usage":   usage(res.Responses),
		// FastGPT does not echo it; a client that let it be made learns it here.
		"responseChatItemId": s.replyID,
		// The app's version that answered; "" for its draft.
		"versionId": s.versionID,
	}
	if s.detail {
		body["responseData"] = res.Responses
	}
	if s.approval != nil {
		body["interactive"] = s.approval["interactive"]
	}
	s.c.JSON(http.StatusOK, body)
}

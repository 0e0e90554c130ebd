package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/registry"
)

// NodeType runs the nodes of one type. Run returns the node's outputs (the
// keys its template declares); an error marks the node failed.
type NodeType interface {
	Run(ctx context.Context, run *NodeRun) (map[string]any, error)
}

// NodeRun is one node's execution.
type NodeRun struct {
	Node   *Node
	Inputs map[string]any // resolved, with defaults, checked against the template
	Chat   Chat
	// Emit streams an event of this node to the caller.
	Emit func(EventData)
	// Detail, when set by the node, is recorded in its response (for
	// example the tool calls it made).
	Detail any
	// Warning, when set, is recorded as the node's error while its outputs
	// stay usable: the node ended on an error it turned into output (N5).
	Warning string
	// Resume, when set, continues this node where it paused (see
	// Interrupt) with a person's answer.
	Resume *NodeResume
}

// Chat is the conversation a run belongs to.
type Chat struct {
	AppID, UserID, ChatID string
	// Question is the user's new message.
	Question string
	// History holds the earlier turns, oldest first.
	History   []llm.Message
	Variables map[string]any
	// Via names the credential the run came through (sandbox.Actor.Via),
	// for the audit.
	Via string
	// Resume, when set, continues a paused run instead of starting one:
	// the nodes that ended before the pause do not run again.
	Resume *Resume
}

// Event is one event streamed while a graph runs: the node it comes from
// and what happened. How an event looks on the wire is the caller's
// business (web speaks FastGPT's SSE).
type Event struct {
	NodeID   string
	NodeName string
	Data     EventData
}

// EventData is what an event carries: one of AnswerDelta, NodeStatus,
// ToolCallStarted, ToolParams, ToolOutput, ToolResult, NodeError or
// ApprovalRequest.
type EventData interface{ isEventData() }

// AnswerDelta is the next piece of the answer text.
type AnswerDelta struct{ Text string }

// NodeStatus says the node entered a status; the engine sends
// StatusRunning when a node starts.
type NodeStatus struct{ Status string }

// StatusRunning is the status of a node that has started.
const StatusRunning = "running"

// ToolCallStarted says the model called a tool. Params are the arguments
// as the model sent them, which may be broken JSON.
type ToolCallStarted struct{ ID, Tool, Params string }

// ToolParams are the arguments of the tool call ID.
type ToolParams struct{ ID, Params string }

// ToolOutput is a piece of a command's output while it runs. Stream is
// "stdout" or "stderr".
type ToolOutput struct{ ID, Stream, Text string }

// ToolResult ends the tool call ID. Response is the JSON the model reads.
type ToolResult struct {
	ID, Tool, Response string
	DurationMs         int64
	Status             registry.Status
}

// NodeError says the node failed, or ended on an error it turned into
// output.
type NodeError struct{ Message string }

func (AnswerDelta) isEventData()     {}
func (NodeStatus) isEventData()      {}
func (ToolCallStarted) isEventData() {}
func (ToolParams) isEventData()      {}
func (ToolOutput) isEventData()      {}
func (ToolResult) isEventData()      {}
func (NodeError) isEventData()       {}

// NodeResponse records one node's run (FastGPT's flowResponses entry).
type NodeResponse struct {
	NodeID      string         `json:"nodeId"`
	Name        string         `json:"moduleName"`
	Type        string         `json:"moduleType"`
	RunningTime float64        `json:"runningTime"` // seconds
	Inputs      map[string]any `json:"inputs,omitempty"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Error       string         `json:"error,omitempty"`
	Skipped     bool           `json:"skipped,omitempty"`
	Detail      any            `json:"detail,omitempty"`
}

// Result is a finished run.
type Result struct {
	// Answer is every answer event's text, in order.
	Answer    string
	Responses []NodeResponse
	// Paused, when set, says the run stopped at a node that waits for a
	// person; the nodes after it did not run.
	Paused *Paused
}

// Engine runs graphs.
type Engine struct {
	Templates Templates
	Types     map[string]NodeType
	// Now is the clock for running times; default time.Now.
	Now func() time.Time
}

// Run validates the graph and runs every node in dependency order. A node
// that fails records its error; nodes that reference its outputs are
// skipped, and every other node still runs. Events go to emit as they
// happen, from the calling goroutine only. The error is for a graph that
// cannot run at all (invalid) or a cancelled context.
func (e *Engine) Run(ctx context.Context, g *Graph, chat Chat, emit func(Event)) (*Result, error) {
	if err := e.Templates.Validate(g); err != nil {
		return nil, err
	}
	order, err := g.order()
	if err != nil {
		return nil, err
	}
	now := e.Now
	if now == nil {
		now = time.Now
	}
	if emit == nil {
		emit = func(Event) {}
	}
	res := &Result{}
	var answer strings.Builder
	outputs := map[string]map[string]any{}
	failed := map[string]string{} // node → why
	resume := chat.Resume
	if resume != nil {
		for id, out := range resume.Paused.Outputs {
			outputs[id] = out
		}
		for id, why := range resume.Paused.Failed {
			failed[id] = why
		}
	}
	for _, n := range order {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if _, done := outputs[n.NodeID]; done && resume != nil {
			continue
		}
		if _, done := failed[n.NodeID]; done && resume != nil {
			continue
		}
		name := n.Name
		if name == "" {
			name = n.NodeID
		}
		resp := NodeResponse{NodeID: n.NodeID, Name: name, Type: n.Type}
		t := e.Templates[n.Type]
		inputs, blockedBy, err := resolve(t.withDefaults(n.Inputs), outputs, failed)
		switch {
		case blockedBy != "":
			resp.Skipped = true
			resp.Error = fmt.Sprintf("skipped: it uses the output of node %q, which failed", blockedBy)
			failed[n.NodeID] = resp.Error
			res.Responses = append(res.Responses, resp)
			continue
		case err == nil:
			err = t.validateValues(inputs)
		}
		resp.Inputs = inputs
		nodeEmit := func(data EventData) {
			if a, ok := data.(AnswerDelta); ok {
				answer.WriteString(a.Text)
			}
			emit(Event{NodeID: n.NodeID, NodeName: name, Data: data})
		}
		start := now()
		if err == nil {
			nodeEmit(NodeStatus{Status: StatusRunning})
			typ := e.Types[n.Type]
			if typ == nil {
				err = fmt.Errorf("node type %q is declared but not installed in this engine", n.Type)
			} else {
				run := &NodeRun{Node: n, Inputs: inputs, Chat: chat, Emit: nodeEmit}
				if resume != nil && resume.Paused.NodeID == n.NodeID {
					run.Resume = &NodeResume{Request: resume.Paused.Request, State: resume.Paused.State, Answer: resume.Answer}
				}
				var out map[string]any
				out, err = typ.Run(ctx, run)
				resp.Outputs, resp.Detail, resp.Error = out, run.Detail, run.Warning
				var pause *Interrupt
				if errors.As(err, &pause) {
					resp.Outputs = nil
					resp.RunningTime = now().Sub(start).Seconds()
					res.Responses = append(res.Responses, resp)
					res.Answer = answer.String()
					res.Paused = &Paused{NodeID: n.NodeID, Request: pause.Request, State: pause.State, Outputs: outputs, Failed: failed}
					return res, nil
				}
				outputs[n.NodeID] = out
			}
		}
		resp.RunningTime = now().Sub(start).Seconds()
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return res, ctx.Err()
			}
			resp.Error = err.Error()
			failed[n.NodeID] = err.Error()
			nodeEmit(NodeError{Message: fmt.Sprintf("node %s: %v", name, err)})
		}
		res.Responses = append(res.Responses, resp)
	}
	res.Answer = answer.String()
	return res, nil
}

// resolve turns raw inputs into values, replacing references with the
// referenced outputs: a value that is exactly one reference takes the
// output's value and type; references inside a longer string are replaced
// by the output's text.
func resolve(raw map[string]json.RawMessage, outputs map[string]map[string]any, failed map[string]string) (map[string]any, string, error) {
	values := make(map[string]any, len(raw))
	for key, r := range raw {
		for _, ref := range refsIn(r) {
			if _, bad := failed[ref.NodeID]; bad {
				return nil, ref.NodeID, nil
			}
		}
		if ref, ok := pureRef(r); ok {
			values[key] = outputs[ref.NodeID][ref.Key]
			continue
		}
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return nil, "", fmt.Errorf("input %q: %w", key, err)
		}
		if s, ok := v.(string); ok {
			v = refRe.ReplaceAllStringFunc(s, func(m string) string {
				sub := refRe.FindStringSubmatch(m)
				return text(outputs[sub[1]][sub[2]])
			})
		}
		values[key] = v
	}
	return values, "", nil
}

func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

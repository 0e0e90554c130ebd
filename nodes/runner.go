package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// Tokens, when set by the node, are the model tokens it used (Count
	// sets them), PromptTokens and CompletionTokens their parts.
	Tokens, PromptTokens, CompletionTokens int
	// Resume, when set, continues this node where it paused (see
	// Interrupt) with a person's answer.
	Resume *NodeResume
	// Branches, when set by the node, are the branches it took (see
	// Edge.SourceHandle); nil is the ordinary way out.
	Branches []string
	// SetVariables, when set by the node, change global variables once
	// the node has ended (variableUpdate).
	SetVariables map[string]any
	// Variables are the global and system variables as the node starts;
	// Declared the app's global variables as the graph declares them.
	Variables map[string]any
	Declared  []Variable
	// Entry, for the first node of a loop's body (loopStart), is what the
	// loop gives this round.
	Entry map[string]any
	// Body, for a node with children (loop), runs them once: entry goes
	// to their loopStart, and the result is what their loopEnd received
	// (nil when it did not run), with the children's responses.
	Body func(ctx context.Context, entry map[string]any) (map[string]any, []NodeResponse, error)
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
// ToolCallStarted, ToolParams, ToolOutput, ToolResult, NodeError,
// NodeDone or ApprovalRequest.
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
func (NodeDone) isEventData()        {}

// NodeDone says a node ended; it carries the node's response, so that a
// builder lights the node up while the run goes on (FastGPT's
// flowNodeResponse).
type NodeDone struct{ Response NodeResponse }

// NodeResponse records one node's run (FastGPT's flowResponses entry).
type NodeResponse struct {
	NodeID      string         `json:"nodeId"`
	Name        string         `json:"moduleName"`
	Type        string         `json:"moduleType"`
	RunningTime float64        `json:"runningTime"` // seconds
	Inputs      map[string]any `json:"inputs,omitempty"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Error       string         `json:"error,omitempty"`
	Detail      any            `json:"detail,omitempty"`
	// Tokens are the model tokens the node used (prompt and completion).
	Tokens           int `json:"tokens,omitempty"`
	PromptTokens     int `json:"promptTokens,omitempty"`
	CompletionTokens int `json:"completionTokens,omitempty"`
	// Branches are the branches the node took, when not the ordinary one.
	Branches []string `json:"branches,omitempty"`
}

// Result is a finished run.
type Result struct {
	// Answer is every answer event's text, in order.
	Answer    string
	Responses []NodeResponse
	// Paused, when set, says the run stopped at a node that waits for a
	// person; the nodes after it did not run.
	Paused *Paused
	// Failed, when set, says the run ended because a node failed that has
	// no error branch; its message names the node.
	Failed string
}

// Engine runs graphs.
type Engine struct {
	Templates Templates
	Types     map[string]NodeType
	// Now is the clock for running times; default time.Now.
	Now func() time.Time
	// MaxNodeRuns bounds the node runs of one turn, each round of a loop
	// counted; zero means DefaultMaxNodeRuns.
	MaxNodeRuns int
}

// DefaultMaxNodeRuns is the bound on a turn's node runs unless the engine
// says otherwise.
const DefaultMaxNodeRuns = 500

// Text is a value as a text shows it: a string as it is, nothing as
// nothing, anything else as JSON (how references inside a longer text are
// filled in).
func Text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Brancher is implemented by the node types whose nodes choose among
// branches of their own (x-branches): it lists a node's branches.
type Brancher interface {
	Branches(n *Node) []string
}

// Checker is implemented by the node types whose nodes follow rules of
// their own beyond their template's schema, checked when a graph is saved:
// it lists what is wrong with node n of graph g.
type Checker interface {
	Check(g *Graph, n *Node) []Problem
}

// Check is what a graph must pass to be saved: Templates.Check, edges that
// leave from branches their nodes have, and the rules of node types that
// are Checkers.
func (e *Engine) Check(g *Graph) error {
	var problems []Problem
	var invalid *ValidationError
	if err := e.Templates.Check(g); errors.As(err, &invalid) {
		problems = invalid.Problems
	} else if err != nil {
		return err
	}
	byID := map[string]*Node{}
	for i := range g.Nodes {
		byID[g.Nodes[i].NodeID] = &g.Nodes[i]
	}
	for _, edge := range g.Edges {
		src := byID[edge.Source]
		if src == nil || edge.SourceHandle == "" || edge.SourceHandle == CatchBranch {
			continue
		}
		b, ok := e.Types[src.Type].(Brancher)
		if !ok {
			continue
		}
		if branches := b.Branches(src); !slices.Contains(branches, edge.SourceHandle) {
			problems = append(problems, Problem{NodeID: src.NodeID, Field: "sourceHandle",
				Message: fmt.Sprintf("the node has no branch %q (its branches: %s); connect from one of them", edge.SourceHandle, strings.Join(branches, ", "))})
		}
	}
	for i := range g.Nodes {
		if c, ok := e.Types[g.Nodes[i].Type].(Checker); ok {
			problems = append(problems, c.Check(g, &g.Nodes[i])...)
		}
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}

// Count adds a model call's usage, as the model reported it, to the
// node's tokens.
func (r *NodeRun) Count(u llm.Usage) {
	r.Tokens += u.TotalTokens
	r.PromptTokens += u.PromptTokens
	r.CompletionTokens += u.CompletionTokens
}

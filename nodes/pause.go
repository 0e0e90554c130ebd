package nodes

import (
	"encoding/json"
	"fmt"
)

// A run pauses when a node needs a person's answer (P10: approving a
// command). The node returns an *Interrupt; the engine stops there and
// returns a Result whose Paused holds what a later run needs to go on:
// the node's own state and the outputs of the nodes before it. Paused is
// plain JSON, so that the caller stores it and any engine process resumes
// the run (Chat.Resume) after the answer arrives, after a restart too.

// The answers a person may give to an ApprovalRequest.
const (
	Approve     = "approve"     // run the command once
	ApproveChat = "approveChat" // run it, and identical commands of this chat without asking
	Edit        = "edit"        // run Answer.Command instead, judged again by the policy
	Reject      = "reject"      // do not run it; Answer.Reason goes to the model
)

// Answers lists the answers, in the order they are offered.
var Answers = []string{Approve, ApproveChat, Edit, Reject}

// ApprovalRequest asks a person to approve a command before it runs: the
// event a node emits when it pauses, and what Paused keeps of it.
type ApprovalRequest struct {
	ID         string `json:"id"`
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	// Command is the command line as the model wrote it (not redacted:
	// the edge that shows it redacts it).
	Command       string `json:"command"`
	Rule          string `json:"rule,omitempty"`
	Justification string `json:"justification,omitempty"`
	Hint          string `json:"hint,omitempty"`
}

func (ApprovalRequest) isEventData() {}

// Interrupt, returned by a NodeType's Run, pauses the run until a person
// answers Request. State is what the node needs to go on, in its own
// JSON; the node records its Detail as usual.
type Interrupt struct {
	Request ApprovalRequest
	State   json.RawMessage
}

func (i *Interrupt) Error() string {
	return fmt.Sprintf("paused: waiting for a person to answer approval %s", i.Request.ID)
}

// Paused is a run stopped at a node.
type Paused struct {
	NodeID  string          `json:"nodeId"`
	Request ApprovalRequest `json:"request"`
	State   json.RawMessage `json:"state"`
	// Outputs and Failed are those of the nodes that ended before the
	// pause: they do not run again.
	Outputs map[string]map[string]any `json:"outputs,omitempty"`
	// Taken are the branches those nodes took, when not the ordinary one;
	// Skipped the nodes that were skipped.
	Taken   map[string][]string `json:"taken,omitempty"`
	Skipped []string            `json:"skipped,omitempty"`
	// Variables are the global variables as they were at the pause.
	Variables map[string]any `json:"variables,omitempty"`
	// Failed is read from runs paused by earlier versions, whose failed
	// nodes did not end the run; their nodes count as skipped.
	Failed map[string]string `json:"failed,omitempty"`
}

// Answer is a person's answer to an ApprovalRequest.
type Answer struct {
	Decision string `json:"decision"` // one of Answers
	Command  string `json:"command,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Resume continues a paused run with the answer.
type Resume struct {
	Paused Paused
	Answer Answer
}

// NodeResume is what the paused node gets back when its run resumes.
type NodeResume struct {
	Request ApprovalRequest
	State   json.RawMessage
	Answer  Answer
}

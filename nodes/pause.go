package nodes

import (
	"encoding/json"
	"fmt"
)

// A run pauses when a node needs a person's answer: to approve a command
// (P10), to choose an option (userSelect) or to fill in a form
// (formInput). The node returns an *Interrupt; the engine stops there and
// returns a Result whose Paused holds what a later run needs to go on:
// the node's own state and the outputs of the nodes before it. Paused is
// plain JSON, so that the caller stores it and any engine process resumes
// the run (Chat.Resume) after the answer arrives, after a restart too.

// The answers a person may give to a command approval.
const (
	Approve     = "approve"     // run the command once
	ApproveChat = "approveChat" // run it, and identical commands of this chat without asking
	Edit        = "edit"        // run Answer.Command instead, judged again by the policy
	Reject      = "reject"      // do not run it; Answer.Reason goes to the model
)

// Answers lists the answers, in the order they are offered.
var Answers = []string{Approve, ApproveChat, Edit, Reject}

// The kinds of Request. A command approval's kind is empty: runs paused
// before interactive nodes existed stored none.
const (
	KindApproval   = ""
	KindUserSelect = "userSelect" // choose one of Options
	KindFormInput  = "formInput"  // fill in Fields
)

// Request is what a paused run asks a person: the event a node emits
// when it pauses, and what Paused keeps of it. Kind says which question
// it is and which fields it uses.
type Request struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`

	// A command approval's: the call and the command line as the model
	// wrote it (not redacted: the edge that shows it redacts it), with the
	// policy's reasons.
	ToolCallID    string `json:"toolCallId,omitempty"`
	Tool          string `json:"tool,omitempty"`
	Command       string `json:"command,omitempty"`
	Rule          string `json:"rule,omitempty"`
	Justification string `json:"justification,omitempty"`
	Hint          string `json:"hint,omitempty"`

	// An interactive node's: what the person is asked, and the options
	// (userSelect) or the fields (formInput) they answer with.
	Description string         `json:"description,omitempty"`
	Options     []SelectOption `json:"options,omitempty"`
	Fields      []FormField    `json:"fields,omitempty"`
}

// ApprovalRequest is the Request of a command approval (KindApproval).
type ApprovalRequest = Request

// IsApproval reports whether the request asks to approve a command.
func (r *Request) IsApproval() bool { return r.Kind == KindApproval }

func (Request) isEventData() {}

// Interrupt, returned by a NodeType's Run, pauses the run until a person
// answers Request. State is what the node needs to go on, in its own
// JSON; the node records its Detail as usual.
type Interrupt struct {
	Request Request
	State   json.RawMessage
}

func (i *Interrupt) Error() string {
	if i.Request.IsApproval() {
		return fmt.Sprintf("paused: waiting for a person to answer approval %s", i.Request.ID)
	}
	return fmt.Sprintf("paused: waiting for a person to answer %s %s", i.Request.Kind, i.Request.ID)
}

// Paused is a run stopped at a node.
type Paused struct {
	NodeID  string          `json:"nodeId"`
	Request Request         `json:"request"`
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

// Answer is a person's answer to a Request: a Decision (with Command or
// Reason) for a command approval, Choice for a userSelect, Form for a
// formInput. Request.Check makes one from what a person sent.
type Answer struct {
	Decision string `json:"decision,omitempty"` // one of Answers
	Command  string `json:"command,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Choice is the key of the option chosen.
	Choice string `json:"choice,omitempty"`
	// Form holds the form's answered fields by key, each of its field's
	// type; fields left empty are absent, or hold their default.
	Form map[string]any `json:"form,omitempty"`
}

// Resume continues a paused run with the answer.
type Resume struct {
	Paused Paused
	Answer Answer
}

// NodeResume is what the paused node gets back when its run resumes.
type NodeResume struct {
	Request Request
	State   json.RawMessage
	Answer  Answer
}

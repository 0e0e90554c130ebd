// Package nodes is the workflow engine: an app is a graph of typed nodes
// described by JSON, validated against the node templates in schemas/nodes,
// and run in dependency order with its events streamed to the caller.
// Node types are plugins (NodeType); the tool-call node lives in
// nodes/toolcall. The engine reaches sandboxes only through the node types
// that use them, and must never know HTTP or storage shapes.
package nodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Graph is an app's workflow.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Variables are the app's global variables: what the chat asks before
	// it starts (W3), referenced as {{$VARIABLE_NODE_ID.key$}}.
	Variables []Variable `json:"variables,omitempty"`
	// Notes are the builder's comment notes on the canvas; the engine
	// never reads them.
	Notes []Note `json:"notes,omitempty"`
}

// Note is a comment on the canvas (FastGPT's comment node).
type Note struct {
	ID       string   `json:"id"`
	Text     string   `json:"text"`
	Position Position `json:"position"`
}

// Variable is one global variable of an app (FastGPT's chatConfig
// variables).
type Variable struct {
	Key         string          `json:"key"`
	Label       string          `json:"label,omitempty"`
	Type        string          `json:"type"` // one of VariableTypes
	Required    bool            `json:"required,omitempty"`
	Default     json.RawMessage `json:"defaultValue,omitempty"`
	Options     []string        `json:"options,omitempty"` // for "select"
	Description string          `json:"description,omitempty"`
}

// VariableTypes are the types a global variable may have.
var VariableTypes = []string{"string", "number", "boolean", "select", "json"}

// VariablesNode is the node id references use for global and system
// variables, as FastGPT spells it.
const VariablesNode = "VARIABLE_NODE_ID"

// SystemVariables are the variables every run has beside the app's own.
var SystemVariables = map[string]string{
	"appId": "string", "chatId": "string", "userId": "string",
	"cTime": "string", "histories": "array",
}

// Node is one step of the workflow. Inputs map input keys to JSON values;
// a string value may reference other nodes' outputs as {{$nodeId.key$}}.
type Node struct {
	NodeID string                     `json:"nodeId"`
	Type   string                     `json:"type"`
	Name   string                     `json:"name,omitempty"`
	Inputs map[string]json.RawMessage `json:"inputs,omitempty"`
	// Outputs declares outputs beyond the template's, for the types whose
	// outputs their builder chooses (x-dynamic-outputs: a code node's
	// results, a form's fields).
	Outputs []NodeOutput `json:"outputs,omitempty"`
	// ParentNodeID, when set, puts the node inside a loop: it runs once
	// per item of that loop node, with the loop's other children.
	ParentNodeID string `json:"parentNodeId,omitempty"`
	// Position is where the builder's canvas draws the node, as FastGPT
	// keeps it; the runner never reads it. Nil: the canvas lays the node
	// out itself.
	Position *Position `json:"position,omitempty"`
	// Size is how large the canvas draws a node that holds others (a
	// loop, its body inside it), as the builder set it; the runner never
	// reads it. Nil: the canvas sizes the node to its body.
	Size *Size `json:"size,omitempty"`
}

// NodeOutput is an output a node declares itself.
type NodeOutput struct {
	Key   string `json:"key"`
	Type  string `json:"type"` // string, number, boolean, object, array or any
	Label string `json:"label,omitempty"`
}

// Position is a point on the builder's canvas.
type Position struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Size is a width and a height on the builder's canvas.
type Size struct {
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// Edge orders two nodes: target runs after source, when the source took
// the edge's branch.
type Edge struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// SourceHandle names the branch of the source the edge leaves from:
	// empty for the node's ordinary way out, one of the branches its type
	// offers (an ifElseNode's "IF", "ELSE IF 1", ..., "ELSE"; a
	// classifyQuestion's class keys), or CatchBranch.
	SourceHandle string `json:"sourceHandle,omitempty"`
}

// CatchBranch is the branch a node takes when it fails; a node with an
// edge from it does not end the run when it fails (W4). Its output
// "error" says why it failed.
const CatchBranch = "catch"

// Clone returns a copy of the graph that shares nothing a caller may
// change with g (raw input values are never changed in place).
func (g Graph) Clone() Graph {
	g.Nodes = slices.Clone(g.Nodes)
	for i := range g.Nodes {
		n := &g.Nodes[i]
		n.Inputs = maps.Clone(n.Inputs)
		n.Outputs = slices.Clone(n.Outputs)
		if n.Position != nil {
			p := *n.Position
			n.Position = &p
		}
		if n.Size != nil {
			z := *n.Size
			n.Size = &z
		}
	}
	g.Edges = slices.Clone(g.Edges)
	g.Variables = slices.Clone(g.Variables)
	for i := range g.Variables {
		g.Variables[i].Options = slices.Clone(g.Variables[i].Options)
	}
	g.Notes = slices.Clone(g.Notes)
	return g
}

// Ref is a reference to another node's output.
type Ref struct {
	NodeID, Key string
}

var refRe = regexp.MustCompile(`\{\{\$([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\$\}\}`)

// refsIn lists the references in a raw input value: those in its strings,
// wherever they are (a list of conditions holds them in its items).
func refsIn(raw json.RawMessage) []Ref {
	// JSON can spell "{{$" only as itself or with \u escapes: without
	// either there is nothing to decode.
	if !bytes.Contains(raw, []byte(refMark)) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []Ref
	eachString(v, func(s string) {
		if !strings.Contains(s, refMark) {
			return
		}
		for _, m := range refRe.FindAllStringSubmatch(s, -1) {
			out = append(out, Ref{NodeID: m[1], Key: m[2]})
		}
	})
	return out
}

// refMark begins every reference; a string without it holds none, which
// spares the regular expression most strings.
const refMark = "{{$"

// eachString calls f with every string in a JSON value, at any depth.
func eachString(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, x := range v {
			eachString(x, f)
		}
	case map[string]any:
		for _, x := range v {
			eachString(x, f)
		}
	}
}

// pureRef reports whether the raw value is exactly one reference; such an
// input takes the referenced output's value with its type.
func pureRef(raw json.RawMessage) (Ref, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return Ref{}, false
	}
	return pureRefIn(s)
}

// pureRefIn reports whether s is exactly one reference (spaces around it
// aside), and which.
func pureRefIn(s string) (Ref, bool) {
	if !strings.Contains(s, refMark) {
		return Ref{}, false
	}
	m := refRe.FindStringSubmatch(s)
	if m == nil || m[0] != strings.TrimSpace(s) {
		return Ref{}, false
	}
	return Ref{NodeID: m[1], Key: m[2]}, true
}

// ValidationError lists everything wrong with a graph, each problem naming
// the node and input it concerns.
type ValidationError struct {
	Problems []Problem
}

// Problem is one thing wrong with a graph: the node it concerns (empty
// for the graph as a whole), the input, output or edge handle (empty for
// the node as a whole), and what is wrong, in words that say what to do.
type Problem struct {
	NodeID  string `json:"nodeId,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	switch {
	case p.NodeID != "" && p.Field != "":
		return fmt.Sprintf("node %q %s: %s", p.NodeID, p.Field, p.Message)
	case p.NodeID != "":
		return fmt.Sprintf("node %q: %s", p.NodeID, p.Message)
	}
	return p.Message
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return "invalid workflow: " + strings.Join(lines, "; ")
}

// ErrInvalid is wrapped by every ValidationError, for errors.Is.
var ErrInvalid = errors.New("invalid workflow")

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// order returns the nodes in an order where every node comes after the
// nodes it depends on (edges and references); an error names a cycle.
func (g *Graph) order() ([]*Node, error) {
	index := map[string]*Node{}
	for i := range g.Nodes {
		index[g.Nodes[i].NodeID] = &g.Nodes[i]
	}
	deps := map[string]map[string]bool{}
	add := func(from, to string) {
		if deps[to] == nil {
			deps[to] = map[string]bool{}
		}
		deps[to][from] = true
	}
	for _, e := range g.Edges {
		add(e.Source, e.Target)
	}
	for _, n := range g.Nodes {
		for _, raw := range n.Inputs {
			for _, r := range refsIn(raw) {
				if r.NodeID != n.NodeID {
					add(r.NodeID, n.NodeID)
				}
			}
		}
	}
	var out []*Node
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(id string, path []string) error
	visit = func(id string, path []string) error {
		switch state[id] {
		case 1:
			return fmt.Errorf("the nodes form a cycle: %s", strings.Join(append(path, id), " → "))
		case 2:
			return nil
		}
		state[id] = 1
		sorted := make([]string, 0, len(deps[id]))
		for dep := range deps[id] {
			sorted = append(sorted, dep)
		}
		sort.Strings(sorted)
		for _, dep := range sorted {
			if index[dep] == nil {
				continue // reported by validation
			}
			if err := visit(dep, append(path, id)); err != nil {
				return err
			}
		}
		state[id] = 2
		out = append(out, index[id])
		return nil
	}
	// Visit in declaration order so that independent nodes keep it.
	for _, n := range g.Nodes {
		if err := visit(n.NodeID, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ErrVariables is wrapped by the error of a run whose chat gives the
// app's variables wrong values, or none for a required one.
var ErrVariables = errors.New("the chat's variables do not fit the app")

// VariablesError lists what is wrong with the variables a chat gives.
type VariablesError struct {
	Problems []string
}

func (e *VariablesError) Error() string {
	return "the chat's variables do not fit the app: " + strings.Join(e.Problems, "; ")
}

func (e *VariablesError) Unwrap() error { return ErrVariables }

// CheckVariables checks the values a chat gives against the app's
// variables: each of the declared type, and each required one given or
// defaulted. Values for variables the app does not declare are left to
// the nodes.
func CheckVariables(declared []Variable, values map[string]any) error {
	var problems []string
	for _, v := range declared {
		val, given := values[v.Key]
		if !given || val == nil || val == "" {
			if v.Required && (len(v.Default) == 0 || string(v.Default) == "null" || string(v.Default) == `""`) {
				name := v.Label
				if name == "" {
					name = v.Key
				}
				problems = append(problems, fmt.Sprintf("%q (%s) is required: give it in variables.%s", name, v.Type, v.Key))
			}
			continue
		}
		if why := VariableValueProblem(v, val); why != "" {
			problems = append(problems, fmt.Sprintf("variables.%s %s", v.Key, why))
		}
	}
	if len(problems) > 0 {
		return &VariablesError{Problems: problems}
	}
	return nil
}

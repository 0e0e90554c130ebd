// Package fastgpt imports the workflow JSON FastGPT exports ({nodes,
// edges, chatConfig}, or a template file that wraps it in "workflow") as a
// Flowbox graph, with a report of every node imported and of every node,
// field and edge that could not be mapped, and why.
//
// The node templates drive the mapping: a FastGPT node becomes a node of
// the Flowbox type of the same name, keeping the inputs its template
// declares; what no template has is left out and reported. A small table
// of per-type cases covers what names alone cannot (the tool-call node's
// tools, text nodes' own inputs, FastGPT's 0–10 temperature, ...).
//
// Import never returns a graph the templates refuse (Templates.Validate):
// what cannot be made valid is left out and reported. It reads and writes
// no storage and knows nothing of HTTP.
package fastgpt

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowbox/flowbox/nodes"
)

// Report says how a FastGPT workflow was imported.
type Report struct {
	// Imported are the nodes of the graph, by their Flowbox type.
	Imported []Imported `json:"imported"`
	// Skipped are FastGPT's nodes left out, with their FastGPT type.
	Skipped []Skipped `json:"skipped"`
	// Fields are inputs, settings, references and edges that were left
	// out or changed on the way.
	Fields []Field `json:"fields"`
	// Problems are what the engine would refuse when the graph is saved
	// (Templates.Check): nodes nothing leads to, references of the wrong
	// type. The graph is stored with them; the canvas marks them.
	Problems []nodes.Problem `json:"problems"`
}

// Imported is a node of the imported graph.
type Imported struct {
	NodeID string `json:"nodeId"`
	Type   string `json:"type"`
	Name   string `json:"name"`
}

// Skipped is a FastGPT node that is not in the graph.
type Skipped struct {
	NodeID string `json:"nodeId"`
	Type   string `json:"type"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Field is something of a node (or, with no NodeID, of the workflow)
// that was left out or changed.
type Field struct {
	NodeID string `json:"nodeId"`
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Result is an imported workflow.
type Result struct {
	Graph  nodes.Graph
	Report Report
	// Name is the app's name when the JSON carries one (FastGPT's
	// template files do; its exports do not).
	Name string
}

// ErrFormat is wrapped by every error of Import: the data is not a FastGPT
// workflow that can be imported. The error's text says why.
var ErrFormat = errors.New("not an importable FastGPT workflow")

func formatError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
}

// Import converts FastGPT's workflow JSON into a graph that templates
// accept, and says what it left out.
func Import(data []byte, templates nodes.Templates) (*Result, error) {
	wf, name, err := parse(data)
	if err != nil {
		return nil, err
	}
	c := newConverter(wf, templates)
	c.assignIDs()
	c.variables()
	c.settings()
	c.classify()
	c.convertNodes()
	c.convertEdges()
	if err := c.repair(); err != nil {
		return nil, err
	}
	c.finish()
	return &Result{Graph: c.g, Report: c.report, Name: name}, nil
}

// workflow is FastGPT's stored workflow (StoreNodeItemType,
// StoreEdgeItemType, AppChatConfigType).
type workflow struct {
	Nodes      []fnode                    `json:"nodes"`
	Edges      []fedge                    `json:"edges"`
	ChatConfig map[string]json.RawMessage `json:"chatConfig"`
}

type fnode struct {
	NodeID       string          `json:"nodeId"`
	Name         string          `json:"name"`
	FlowNodeType string          `json:"flowNodeType"`
	ParentNodeID string          `json:"parentNodeId"`
	Position     *nodes.Position `json:"position"`
	Inputs       []finput        `json:"inputs"`
	Outputs      []foutput       `json:"outputs"`
	PluginID     string          `json:"pluginId"`
}

type finput struct {
	Key               string          `json:"key"`
	RenderTypeList    []string        `json:"renderTypeList"`
	SelectedTypeIndex *int            `json:"selectedTypeIndex"`
	ValueType         string          `json:"valueType"`
	Value             json.RawMessage `json:"value"`
	CanEdit           bool            `json:"canEdit"`
}

type foutput struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	Type      string `json:"type"`
	ValueType string `json:"valueType"`
	Label     string `json:"label"`
}

type fedge struct {
	Source       string `json:"source"`
	Target       string `json:"target"`
	SourceHandle string `json:"sourceHandle"`
}

// parse reads the JSON in any of the shapes FastGPT writes a workflow in.
func parse(data []byte) (*workflow, string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, "", formatError("the workflow is not a JSON object: %v", err)
	}
	var name string
	if inner, ok := top["workflow"]; ok {
		// A template file: {name, intro, ..., workflow: {nodes, edges, chatConfig}}.
		_ = json.Unmarshal(top["name"], &name)
		if err := json.Unmarshal(inner, &top); err != nil {
			return nil, "", formatError("its \"workflow\" is not a JSON object: %v", err)
		}
	}
	switch {
	case top["modules"] != nil:
		return nil, "", formatError("this is FastGPT's module format from before version 4.8; open the app in a current FastGPT and export it again")
	case top["aiSettings"] != nil:
		return nil, "", formatError("this is the configuration of a FastGPT simple app, not a workflow; convert the app to a workflow in FastGPT and export that")
	case top["nodes"] == nil:
		return nil, "", formatError("there is no \"nodes\" list; export the workflow from FastGPT's workflow editor (Export → JSON)")
	}
	var wf workflow
	raw, _ := json.Marshal(top)
	if err := json.Unmarshal(raw, &wf); err != nil {
		return nil, "", formatError("its nodes or edges do not have FastGPT's shape: %v", err)
	}
	if len(wf.Nodes) == 0 {
		return nil, "", formatError("the workflow has no nodes")
	}
	for i, n := range wf.Nodes {
		if n.FlowNodeType == "" || n.NodeID == "" {
			return nil, "", formatError("node %d has no nodeId or flowNodeType; this is not FastGPT's workflow JSON", i)
		}
	}
	return &wf, strings.TrimSpace(name), nil
}

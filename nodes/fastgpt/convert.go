package fastgpt

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/flowbox/flowbox/nodes"
)

// converter holds one import's state: FastGPT's nodes by id, the Flowbox
// ids they get, the graph being built and the report.
type converter struct {
	wf      *workflow
	ts      nodes.Templates
	schemas map[string]*schemaInfo

	byID map[string]*fnode   // FastGPT id → node (the first of a duplicate id)
	ids  map[string]string   // FastGPT id → Flowbox id
	from map[string]*fnode   // Flowbox id → the FastGPT node it came from
	role map[string]nodeRole // FastGPT id → what it becomes
	// tools maps a node FastGPT connects to a tool-call node as a tool to
	// that tool-call node's name.
	tools map[string]string

	g       nodes.Graph
	report  Report
	startID string // the Flowbox id of the workflow's start
}

type nodeRole int

const (
	roleSkip   nodeRole = iota // left out (reported)
	roleNode                   // a node of the graph
	roleConfig                 // FastGPT's system configuration: variables and settings
	roleNote                   // a comment: a note on the canvas
)

func newConverter(wf *workflow, ts nodes.Templates) *converter {
	c := &converter{wf: wf, ts: ts, schemas: map[string]*schemaInfo{},
		byID: map[string]*fnode{}, ids: map[string]string{}, from: map[string]*fnode{},
		role: map[string]nodeRole{}, tools: map[string]string{},
		g: nodes.Graph{Nodes: []nodes.Node{}, Edges: []nodes.Edge{}}}
	c.report = Report{Imported: []Imported{}, Skipped: []Skipped{}, Fields: []Field{}, Problems: []nodes.Problem{}}
	for i := range wf.Nodes {
		n := &wf.Nodes[i]
		if c.byID[n.NodeID] == nil {
			c.byID[n.NodeID] = n
		}
	}
	return c
}

func (c *converter) field(nodeID, field, format string, args ...any) {
	c.report.Fields = append(c.report.Fields, Field{NodeID: nodeID, Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (c *converter) skip(n *fnode, format string, args ...any) {
	c.role[n.NodeID] = roleSkip
	c.report.Skipped = append(c.report.Skipped, Skipped{NodeID: n.NodeID, Type: n.FlowNodeType, Name: n.Name, Reason: fmt.Sprintf(format, args...)})
}

var (
	nodeIDRe  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	badIDChar = regexp.MustCompile(`[^A-Za-z0-9_-]`)
)

// assignIDs keeps FastGPT's node ids where Flowbox accepts them (they
// usually are: nanoids), and renames the others.
func (c *converter) assignIDs() {
	used := map[string]bool{nodes.VariablesNode: true}
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		id := n.NodeID
		if !nodeIDRe.MatchString(id) || used[id] {
			base := badIDChar.ReplaceAllString(id, "_")
			if len(base) > 56 {
				base = base[:56]
			}
			if base == "" || base == nodes.VariablesNode {
				base = "node"
			}
			id = base
			for k := 2; used[id]; k++ {
				id = fmt.Sprintf("%s_%d", base, k)
			}
			c.field(id, "nodeId", "FastGPT's node id %q is not a valid Flowbox node id or is used twice; the node is %q here", n.NodeID, id)
		}
		used[id] = true
		if _, ok := c.ids[n.NodeID]; !ok {
			c.ids[n.NodeID] = id
		}
		c.from[id] = n
	}
}

// typeAliases are FastGPT types whose Flowbox type has another name.
var typeAliases = map[string]string{
	"app":       "runApp", // FastGPT's run-app module
	"appModule": "runApp", // FastGPT's team app used as a node
}

// typeReasons say why a FastGPT type has no Flowbox counterpart, where the
// bare name would not.
var typeReasons = map[string]string{
	"datasetSearchNode": "knowledge-base search: Flowbox has no knowledge bases",
	"datasetConcatNode": "it joins knowledge-base search results: Flowbox has no knowledge bases",
	"cfr":               "it rewrites questions for knowledge-base search: Flowbox has no knowledge bases",
	"pluginModule":      "a FastGPT plugin or system tool, which Flowbox does not have",
	"tool":              "a FastGPT tool, which Flowbox does not have; Flowbox's tool-call node uses exec tools, MCP servers and skills",
	"toolSet":           "a FastGPT tool set, which Flowbox does not have; Flowbox's tool-call node uses exec tools, MCP servers and skills",
	"pluginInput":       "the input of a FastGPT plugin; a Flowbox app starts at a workflowStart node",
	"pluginOutput":      "the output of a FastGPT plugin; Flowbox apps answer through their nodes",
	"lafModule":         "it calls a Laf cloud function, which Flowbox does not have; an HTTP request node can call the function's URL",
	"customFeedback":    "it adds feedback to the chat record, which Flowbox does not keep",
	"stopTool":          "it only works inside FastGPT's tool calls",
	"toolParams":        "it only works inside FastGPT's tool calls",
	"agent":             "FastGPT's agent node; Flowbox's tool-call node (tools) is the nearest, add one by hand",
	"emptyNode":         "an empty node that does nothing",
}

// classify decides what every FastGPT node becomes.
func (c *converter) classify() {
	for _, e := range c.wf.Edges {
		if toolEdge(e) {
			if src := c.byID[e.Source]; src != nil {
				c.tools[e.Target] = src.Name
			}
		}
	}
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		if c.byID[n.NodeID] != n {
			c.skip(n, "another node has the same id %q", n.NodeID)
			continue
		}
		switch n.FlowNodeType {
		case "userGuide", "pluginConfig":
			c.role[n.NodeID] = roleConfig
			continue
		case "comment":
			c.role[n.NodeID] = roleNote
			continue
		}
		if tools, ok := c.tools[n.NodeID]; ok {
			c.skip(n, "a tool of the tool-call node %q: Flowbox's tool-call node calls exec tools, MCP servers and skills, not workflow nodes", tools)
			continue
		}
		if c.ts[c.flowboxType(n)] == nil {
			why := typeReasons[n.FlowNodeType]
			if why == "" {
				why = fmt.Sprintf("Flowbox has no node type %q", n.FlowNodeType)
			}
			c.skip(n, "%s", why)
			continue
		}
		c.role[n.NodeID] = roleNode
	}
	// A node inside a container left out goes with it.
	for changed := true; changed; {
		changed = false
		for i := range c.wf.Nodes {
			n := &c.wf.Nodes[i]
			if c.role[n.NodeID] != roleNode || n.ParentNodeID == "" {
				continue
			}
			switch p := c.byID[n.ParentNodeID]; {
			case p == nil:
				c.skip(n, "it is inside the node %q, which is not in the workflow", n.ParentNodeID)
				changed = true
			case c.role[p.NodeID] != roleNode:
				c.skip(n, "it is inside %s %q, which was left out", p.FlowNodeType, p.Name)
				changed = true
			}
		}
	}
}

func (c *converter) flowboxType(n *fnode) string {
	if t, ok := typeAliases[n.FlowNodeType]; ok {
		return t
	}
	return n.FlowNodeType
}

// uiOnly are FastGPT inputs that only say how its editor draws a node, or
// placeholders of the editor; nothing is lost without them.
var uiOnly = map[string]bool{
	"childrenNodeIdList": true, "nodeWidth": true, "nodeHeight": true, "loopNodeInputHeight": true,
	"system_addInputParam": true, "system_addOutputParam": true,
}

// sameAsFlowbox are FastGPT settings whose value is what Flowbox does
// anyway: not reported when Flowbox's template does not take them.
var sameAsFlowbox = map[string]any{
	"isResponseAnswerText": true,  // model nodes stream their answer
	"aiChatVision":         false, // no images reach Flowbox's models
	"aiChatReasoning":      true,
	"aiChatQuoteRole":      "system",
}

// fieldReasons add why Flowbox does without a FastGPT input.
var fieldReasons = map[string]string{
	"quoteQA":              "it takes knowledge-base quotes, and Flowbox has no knowledge bases",
	"datasets":             "Flowbox has no knowledge bases",
	"maxToken":             "Flowbox does not bound the length of a model's answer",
	"isResponseAnswerText": "Flowbox's model nodes always send their answer to the user",
	"fileUrlList":          "Flowbox's model nodes read no files",
	"aiChatVision":         "FastGPT sends the chat's images to the model; Flowbox's model nodes send text",
	"aiChatTopP":           "Flowbox sets no top-p",
	"aiChatStopSign":       "Flowbox sets no stop sequence",
	"aiChatResponseFormat": "Flowbox asks for no response format",
	"aiChatJsonSchema":     "Flowbox asks for no response format",
}

// inlined are the FastGPT types whose own inputs ({{name}} in their text)
// become references in the text when Flowbox's template has no such input.
var inlined = map[string]bool{"textEditor": true, "httpRequest468": true}

func (c *converter) convertNodes() {
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		switch c.role[n.NodeID] {
		case roleNote:
			c.note(n)
			continue
		case roleNode:
		default:
			continue
		}
		node := nodes.Node{NodeID: c.ids[n.NodeID], Type: c.flowboxType(n), Name: n.Name, Inputs: map[string]json.RawMessage{}}
		if n.Position != nil {
			p := *n.Position
			node.Position = &p
		}
		if n.ParentNodeID != "" {
			node.ParentNodeID = c.ids[n.ParentNodeID]
		}
		if node.Type == "workflowStart" && node.ParentNodeID == "" && c.startID == "" {
			c.startID = node.NodeID
		}
		c.inputs(n, &node)
		c.outputs(n, &node)
		if node.Type == "runApp" && n.PluginID != "" {
			c.field(node.NodeID, "pluginId", "it runs FastGPT's app %q, which is not a Flowbox app; choose the app to run", n.PluginID)
		}
		if len(node.Inputs) == 0 {
			node.Inputs = nil
		}
		c.g.Nodes = append(c.g.Nodes, node)
	}
	c.startDefaults()
}

// startDefaults gives the inputs whose template default names the start
// "start" (the user's question) the workflow's own start, where FastGPT's
// start has another id.
func (c *converter) startDefaults() {
	if c.startID == "" || c.startID == "start" {
		return
	}
	for i := range c.g.Nodes {
		node := &c.g.Nodes[i]
		for k, def := range c.ts[node.Type].Defaults {
			if _, set := node.Inputs[k]; set || !strings.Contains(string(def), "{{$start.") {
				continue
			}
			if node.Inputs == nil {
				node.Inputs = map[string]json.RawMessage{}
			}
			node.Inputs[k] = json.RawMessage(strings.ReplaceAll(string(def), "{{$start.", "{{$"+c.startID+"."))
		}
	}
}

func (c *converter) note(n *fnode) {
	var text string
	for _, in := range n.Inputs {
		if in.Key == "commentText" {
			_ = json.Unmarshal(in.Value, &text)
		}
	}
	note := nodes.Note{ID: c.ids[n.NodeID], Text: text}
	if n.Position != nil {
		note.Position = *n.Position
	}
	c.g.Notes = append(c.g.Notes, note)
}

// inputs maps a node's FastGPT inputs to the ones its template declares.
func (c *converter) inputs(n *fnode, node *nodes.Node) {
	info := c.schema(node.Type)
	own := map[string]string{} // the node's own inputs, to write into its text
	for _, in := range n.Inputs {
		if uiOnly[in.Key] {
			continue
		}
		takes := info.props[in.Key] || (in.CanEdit && info.additional && nodes.VariablesNode != in.Key)
		val, set, note := c.value(n, in)
		if !takes {
			if inlined[n.FlowNodeType] && in.CanEdit {
				own[in.Key] = ownText(val, set)
				continue
			}
			if note != "" {
				c.field(node.NodeID, in.Key, "%s", note)
			}
			if !set || isDefault(in.Key, val) {
				continue
			}
			why := fmt.Sprintf("field %s of node %s (%s) is not used by Flowbox", in.Key, n.Name, n.FlowNodeType)
			if r := fieldReasons[in.Key]; r != "" {
				why += ": " + r
			}
			c.field(node.NodeID, in.Key, "%s", why)
			continue
		}
		if note != "" {
			c.field(node.NodeID, in.Key, "%s", note)
		}
		if !set {
			if in.Key == "model" && strings.TrimSpace(string(in.Value)) == `""` {
				c.field(node.NodeID, in.Key, "no model was chosen in FastGPT; the node uses Flowbox's default")
			}
			continue
		}
		val = c.special(n, node, in.Key, val)
		if val != nil {
			node.Inputs[in.Key] = val
		}
	}
	if len(own) > 0 {
		for k, raw := range node.Inputs {
			node.Inputs[k] = mapStrings(raw, func(s string) string { return inline(s, node.NodeID, own) })
		}
		names := slices.Sorted(maps.Keys(own))
		c.field(node.NodeID, strings.Join(names, ", "), "the node's own inputs (FastGPT's {{name}} in its text) became references written into the text, as Flowbox nodes take them")
	}
}

// ownText is what stands for one of a node's own inputs in its text.
func ownText(val json.RawMessage, set bool) string {
	if !set {
		return ""
	}
	var s string
	if json.Unmarshal(val, &s) == nil {
		return s
	}
	return string(val)
}

// inline writes a node's own inputs into a text: {{name}} and the
// node's reference to itself {{$self.name$}}.
func inline(s, self string, own map[string]string) string {
	for k, v := range own {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
		s = strings.ReplaceAll(s, "{{$"+self+"."+k+"$}}", v)
	}
	return s
}

// isDefault says whether a value is what Flowbox does anyway.
func isDefault(key string, val json.RawMessage) bool {
	want, ok := sameAsFlowbox[key]
	if !ok {
		return false
	}
	var got any
	return json.Unmarshal(val, &got) == nil && got == want
}

// special applies the per-type cases to a value the template takes; nil
// leaves the input out (the template's default applies).
func (c *converter) special(n *fnode, node *nodes.Node, key string, val json.RawMessage) json.RawMessage {
	switch key {
	case "temperature":
		// FastGPT's temperature is 0–10, scaled to each model's own
		// maximum; Flowbox's is the model's own, 0–2.
		var t float64
		if json.Unmarshal(val, &t) != nil {
			return val
		}
		scaled := float64(int(t/5*100+0.5)) / 100
		if t != 0 {
			c.field(node.NodeID, key, "FastGPT's temperature %v (of 0–10, scaled to each model's maximum) is %v on Flowbox's 0–2 scale; check it for your model", t, scaled)
		}
		out, _ := json.Marshal(scaled)
		return out
	}
	if node.Type == "runApp" && key == "app" {
		c.field(node.NodeID, key, "it names FastGPT's app %s, which is not a Flowbox app; choose the app to run", string(val))
	}
	return val
}

// outputs copies the outputs a FastGPT node's builder added (a code
// node's results, a form's fields) for the types whose nodes declare
// their own.
func (c *converter) outputs(n *fnode, node *nodes.Node) {
	t := c.ts[node.Type]
	if !t.DynamicOutputs {
		return
	}
	seen := map[string]bool{}
	for _, o := range n.Outputs {
		if o.Key == "" || fixedOutputs[o.Key] || seen[o.Key] {
			continue
		}
		if _, ok := t.Outputs[o.Key]; ok {
			continue
		}
		seen[o.Key] = true
		label := o.Label
		if label == o.Key {
			label = ""
		}
		node.Outputs = append(node.Outputs, nodes.NodeOutput{Key: o.Key, Type: outputType(o.ValueType), Label: label})
	}
}

// fixedOutputs are the outputs FastGPT's node types have themselves
// (NodeOutputKeyEnum); every other output was added by a builder.
var fixedOutputs = map[string]bool{
	"userChatInput": true, "history": true, "answerText": true, "reasoningText": true, "success": true, "failed": true,
	"system_text": true, "system_addOutputParam": true, "system_rawResponse": true, "system_error": true,
	"system_error_text": true, "userFiles": true, "quoteQA": true, "cqResult": true, "fields": true,
	"system_resultTrue": true, "system_resultFalse": true, "selectedTools": true, "httpRawResponse": true,
	"pluginStart": true, "ifElseResult": true, "selectResult": true, "loopArray": true, "loopStartInput": true,
	"loopStartIndex": true, "formInputResult": true, "fileTitle": true, "error": true,
}

// outputType is the Flowbox type of a FastGPT value type.
func outputType(valueType string) string {
	switch valueType {
	case "string", "number", "boolean", "object":
		return valueType
	case "arrayString", "arrayNumber", "arrayBoolean", "arrayObject", "arrayAny", "chatHistory", "datasetQuote":
		return "array"
	}
	return "any"
}

// toolEdge says whether an edge connects a tool to a tool-call node
// (FastGPT's "selectedTools" handle).
func toolEdge(e fedge) bool {
	return e.SourceHandle == "selectedTools" || strings.HasSuffix(e.SourceHandle, "-source-selectedTools")
}

// handleOf is the Flowbox branch of a FastGPT edge's source handle:
// "<id>-source-right" (or left, top, bottom) is the ordinary way out,
// "<id>-source_catch-right" the error branch, "<id>-source-<branch>" a
// branch (IF, ELSE IF 1, ELSE, a class's or an option's key).
func handleOf(e fedge) string {
	h := e.SourceHandle
	if strings.HasPrefix(h, e.Source+"-source_catch-") {
		return nodes.CatchBranch
	}
	var branch string
	if rest, ok := strings.CutPrefix(h, e.Source+"-source-"); ok {
		branch = rest
	} else if i := strings.Index(h, "-source-"); i >= 0 {
		branch = h[i+len("-source-"):]
	} else if strings.Contains(h, "-source_catch-") {
		return nodes.CatchBranch
	}
	switch branch {
	case "right", "left", "top", "bottom":
		return ""
	}
	return branch
}

func (c *converter) convertEdges() {
	seen := map[nodes.Edge]bool{}
	for _, e := range c.wf.Edges {
		if toolEdge(e) {
			continue
		}
		src, dst := c.byID[e.Source], c.byID[e.Target]
		if src == nil || dst == nil {
			missing := e.Target
			if src == nil {
				missing = e.Source
			}
			c.field("", "edges", "an edge names the node %q, which is not in the workflow; it is left out", missing)
			continue
		}
		if c.role[src.NodeID] != roleNode || c.role[dst.NodeID] != roleNode {
			continue // the node left out is reported
		}
		edge := nodes.Edge{Source: c.ids[src.NodeID], Target: c.ids[dst.NodeID], SourceHandle: handleOf(e)}
		if !seen[edge] {
			seen[edge] = true
			c.g.Edges = append(c.g.Edges, edge)
		}
	}
}

func (c *converter) finish() {
	for _, n := range c.g.Nodes {
		c.report.Imported = append(c.report.Imported, Imported{NodeID: n.NodeID, Type: n.Type, Name: n.Name})
	}
	c.report.Problems = Problems(c.ts.Check(&c.g))
}

// Problems lists the problems of a Check error (none for nil).
func Problems(err error) []nodes.Problem {
	out := []nodes.Problem{}
	if ve, ok := err.(*nodes.ValidationError); ok {
		out = append(out, ve.Problems...)
	} else if err != nil {
		out = append(out, nodes.Problem{Message: err.Error()})
	}
	return out
}

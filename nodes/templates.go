package nodes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/flowbox/flowbox/schemas"
)

// Template is a node type's declaration, read from schemas/nodes/<type>.json:
// its inputs (a JSON Schema with labels and defaults) and its outputs.
type Template struct {
	Type        string
	Label       map[string]string // language → label
	Description string
	// Schema is the template file as JSON, for the app builder UI.
	Schema   json.RawMessage
	Defaults map[string]json.RawMessage
	Outputs  map[string]Output
	// Inputs are the declared types of the inputs (x-reference when the
	// input is only ever a reference), for checking references.
	Inputs map[string]string
	// Group is where the builder's palette lists the type (x-group, as
	// FastGPT groups its nodes); "hidden" types are not in the palette.
	Group string
	// Catch says whether nodes of this type may have an error branch
	// (x-catch); Branches whether they choose among branches of their own
	// (x-branches); DynamicOutputs whether a node declares outputs of
	// its own (x-dynamic-outputs).
	Catch, Branches, DynamicOutputs bool
	// OutputsFrom names a list input whose records' keys are outputs of
	// the node too (x-outputs-from: a text extraction's fields), typed by
	// their valueType.
	OutputsFrom string
	compiled    *jsonschema.Schema
}

// Output is one declared output of a node type.
type Output struct {
	Type  string            `json:"type"`
	Label map[string]string `json:"x-label"`
}

// Templates are the node types an app may use.
type Templates map[string]*Template

// LoadTemplates compiles every template under schemas/nodes.
func LoadTemplates() (Templates, error) {
	files, err := fs.Glob(schemas.FS, "nodes/*.json")
	if err != nil {
		return nil, err
	}
	out := Templates{}
	for _, f := range files {
		data, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			return nil, err
		}
		t, err := ParseTemplate(strings.TrimSuffix(path.Base(f), ".json"), data)
		if err != nil {
			return nil, err
		}
		out[t.Type] = t
	}
	return out, nil
}

// ParseTemplate compiles one node type's template.
func ParseTemplate(typ string, data []byte) (*Template, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("node template %s: %w", typ, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("flowbox/nodes/"+typ, doc); err != nil {
		return nil, fmt.Errorf("node template %s: %w", typ, err)
	}
	sch, err := c.Compile("flowbox/nodes/" + typ)
	if err != nil {
		return nil, fmt.Errorf("node template %s: %w", typ, err)
	}
	var meta struct {
		Label       map[string]string `json:"x-label"`
		Description string            `json:"description"`
		Properties  map[string]struct {
			Default   json.RawMessage `json:"default"`
			Type      any             `json:"type"`
			Reference string          `json:"x-reference"`
		} `json:"properties"`
		Outputs        map[string]Output `json:"x-outputs"`
		Group          string            `json:"x-group"`
		Catch          bool              `json:"x-catch"`
		Branches       bool              `json:"x-branches"`
		DynamicOutputs bool              `json:"x-dynamic-outputs"`
		OutputsFrom    string            `json:"x-outputs-from"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("node template %s: %w", typ, err)
	}
	t := &Template{Type: typ, Label: meta.Label, Description: meta.Description, Schema: data,
		Defaults: map[string]json.RawMessage{}, Outputs: meta.Outputs, Inputs: map[string]string{},
		Group: meta.Group, Catch: meta.Catch, Branches: meta.Branches, DynamicOutputs: meta.DynamicOutputs, OutputsFrom: meta.OutputsFrom, compiled: sch}
	if t.Group == "" {
		t.Group = "other"
	}
	for k, p := range meta.Properties {
		if len(p.Default) > 0 {
			t.Defaults[k] = p.Default
		}
		if s, ok := p.Type.(string); ok {
			t.Inputs[k] = s
		}
		if p.Reference != "" {
			t.Inputs[k] = p.Reference
		}
	}
	return t, nil
}

var (
	nodeIDRe      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	variableKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// Validate checks what a graph needs to run: unique node ids, known
// types, loops' bodies well formed, edges between existing nodes of the
// same loop body (or none), references to existing nodes, variables and
// declared outputs, inputs of the declared types (a reference stands for
// any type here: its value is checked when the graph runs), no cycle, one
// start node. Check adds what a graph must have to be saved.
func (ts Templates) Validate(g *Graph) error {
	v := &validation{ts: ts, g: g, byID: map[string]*Node{}}
	v.nodes()
	v.variables()
	v.edges()
	v.inputs()
	if len(v.problems) == 0 {
		if _, err := g.order(); err != nil {
			v.bad("", "", "%v; a workflow repeats work only through a loop node", err)
		}
	}
	return v.result()
}

// Check is Validate, and what is refused when a graph is saved (W3):
// nodes no edge leads to from the start, and references whose type does
// not fit the input.
func (ts Templates) Check(g *Graph) error {
	if err := ts.Validate(g); err != nil {
		return err
	}
	v := &validation{ts: ts, g: g, byID: map[string]*Node{}}
	for i := range g.Nodes {
		v.byID[g.Nodes[i].NodeID] = &g.Nodes[i]
	}
	v.reachable()
	v.referenceTypes()
	return v.result()
}

type validation struct {
	ts       Templates
	g        *Graph
	byID     map[string]*Node
	problems []Problem
}

func (v *validation) bad(node, field, format string, args ...any) {
	v.problems = append(v.problems, Problem{NodeID: node, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validation) result() error {
	if len(v.problems) > 0 {
		return &ValidationError{Problems: v.problems}
	}
	return nil
}

func (v *validation) nodes() {
	ts, g := v.ts, v.g
	starts := 0
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch {
		case !nodeIDRe.MatchString(n.NodeID):
			v.bad("", "", "node %d: nodeId %q must be 1-64 letters, digits, '_' or '-'", i, n.NodeID)
		case n.NodeID == VariablesNode:
			v.bad(n.NodeID, "", "%s is the name of the variables; give the node another id", VariablesNode)
		case v.byID[n.NodeID] != nil:
			v.bad(n.NodeID, "", "the node id appears twice; node ids must be unique")
		}
		v.byID[n.NodeID] = n
		if ts[n.Type] == nil {
			v.bad(n.NodeID, "", "unknown type %q (known: %s)", n.Type, strings.Join(ts.names(), ", "))
		}
		if n.Type == "workflowStart" && n.ParentNodeID == "" {
			starts++
		}
	}
	if starts != 1 {
		v.bad("", "", "a workflow needs exactly one workflowStart node, it has %d", starts)
	}
	// Loops' bodies: children of a loop node, one loopStart each.
	bodyStarts := map[string]int{}
	for _, n := range g.Nodes {
		inLoop := n.ParentNodeID != ""
		if inLoop {
			p := v.byID[n.ParentNodeID]
			switch {
			case p == nil:
				v.bad(n.NodeID, "parentNodeId", "the loop %q it is in does not exist", n.ParentNodeID)
			case p.Type != "loop":
				v.bad(n.NodeID, "parentNodeId", "only a loop node holds other nodes; %q is a %s node", p.NodeID, p.Type)
			}
		}
		switch n.Type {
		case "workflowStart":
			if inLoop {
				v.bad(n.NodeID, "", "the workflow start cannot be inside a loop")
			}
		case "loopStart":
			if !inLoop {
				v.bad(n.NodeID, "", "a loop start belongs inside a loop node")
			}
			bodyStarts[n.ParentNodeID]++
		case "loopEnd":
			if !inLoop {
				v.bad(n.NodeID, "", "a loop end belongs inside a loop node")
			}
		}
	}
	for _, n := range g.Nodes {
		if n.Type == "loop" && bodyStarts[n.NodeID] != 1 {
			v.bad(n.NodeID, "", "a loop needs exactly one loop start inside it, it has %d", bodyStarts[n.NodeID])
		}
	}
}

func (v *validation) variables() {
	seen := map[string]bool{}
	for i, x := range v.g.Variables {
		field := fmt.Sprintf("variables[%d]", i)
		switch {
		case !variableKeyRe.MatchString(x.Key):
			v.bad("", field, "variable key %q must start with a letter or '_' and hold only letters, digits and '_' (at most 64)", x.Key)
		case seen[x.Key]:
			v.bad("", field, "variable %q is declared twice", x.Key)
		case SystemVariables[x.Key] != "":
			v.bad("", field, "variable %q is a system variable; give yours another key", x.Key)
		}
		seen[x.Key] = true
		if !slices.Contains(VariableTypes, x.Type) {
			v.bad("", field, "variable %q has type %q; use one of %s", x.Key, x.Type, strings.Join(VariableTypes, ", "))
			continue
		}
		if x.Type == "select" && len(x.Options) == 0 {
			v.bad("", field, "variable %q is a select without options; list the options", x.Key)
		}
		if len(x.Default) > 0 && string(x.Default) != "null" {
			var val any
			if err := json.Unmarshal(x.Default, &val); err != nil {
				v.bad("", field, "variable %q: the default is not JSON: %v", x.Key, err)
			} else if why := VariableValueProblem(x, val); why != "" {
				v.bad("", field, "variable %q: the default %s", x.Key, why)
			}
		}
	}
}

// VariableValueProblem says what is wrong with a value given to a
// variable ("" when nothing is).
func VariableValueProblem(x Variable, val any) string {
	switch x.Type {
	case "string":
		if _, ok := val.(string); !ok {
			return "must be text"
		}
	case "number":
		if _, ok := val.(float64); !ok {
			return "must be a number"
		}
	case "boolean":
		if _, ok := val.(bool); !ok {
			return "must be true or false"
		}
	case "select":
		s, _ := val.(string)
		if !slices.Contains(x.Options, s) {
			return fmt.Sprintf("must be one of %s", strings.Join(x.Options, ", "))
		}
	}
	return ""
}

func (v *validation) edges() {
	for _, e := range v.g.Edges {
		src, dst := v.byID[e.Source], v.byID[e.Target]
		if src == nil || dst == nil {
			v.bad(e.Source, "edge", "the edge %s → %s names a node that does not exist", e.Source, e.Target)
			continue
		}
		if src.ParentNodeID != dst.ParentNodeID {
			v.bad(e.Target, "edge", "the edge from %q crosses a loop's border; nodes inside a loop connect only to each other", e.Source)
		}
		if dst.Type == "workflowStart" || dst.Type == "loopStart" {
			v.bad(e.Target, "edge", "nothing may lead into a start node (the edge from %q)", e.Source)
		}
		t := v.ts[src.Type]
		switch {
		case t == nil || e.SourceHandle == "":
		case e.SourceHandle == CatchBranch && !t.Catch:
			v.bad(e.Source, "sourceHandle", "%s nodes have no error branch", src.Type)
		case e.SourceHandle != CatchBranch && !t.Branches:
			v.bad(e.Source, "sourceHandle", "%s nodes have no branch %q; connect from the node's ordinary handle", src.Type, e.SourceHandle)
		}
	}
}

// scopeOf is the chain of loops a node is in, innermost first.
func (v *validation) scopeOf(n *Node) []string {
	var out []string
	for p := n.ParentNodeID; p != "" && len(out) < len(v.byID); {
		out = append(out, p)
		if v.byID[p] == nil {
			break
		}
		p = v.byID[p].ParentNodeID
	}
	return out
}

// output is the declared output key of node src ("" type: none).
func (v *validation) output(src *Node, key string) Output {
	t := v.ts[src.Type]
	if t == nil {
		return Output{}
	}
	if o, ok := t.Outputs[key]; ok {
		return o
	}
	if key == "error" && t.Catch {
		return Output{Type: "string"}
	}
	if t.OutputsFrom != "" {
		var records []struct {
			Key       string `json:"key"`
			ValueType string `json:"valueType"`
		}
		_ = json.Unmarshal(src.Inputs[t.OutputsFrom], &records)
		for _, r := range records {
			if r.Key == key {
				if r.ValueType == "" {
					r.ValueType = "string"
				}
				return Output{Type: r.ValueType}
			}
		}
	}
	if t.DynamicOutputs {
		for _, o := range src.Outputs {
			if o.Key == key {
				typ := o.Type
				if typ == "" {
					typ = "any"
				}
				return Output{Type: typ}
			}
		}
	}
	return Output{}
}

func (v *validation) variableType(key string) string {
	if t := SystemVariables[key]; t != "" {
		return t
	}
	for _, x := range v.g.Variables {
		if x.Key == key {
			switch x.Type {
			case "string", "select":
				return "string"
			case "json":
				return "any"
			}
			return x.Type
		}
	}
	return ""
}

func (v *validation) inputs() {
	for i := range v.g.Nodes {
		n := &v.g.Nodes[i]
		t := v.ts[n.Type]
		if t == nil {
			continue
		}
		checked := map[string]any{}
		byRef := map[string]bool{}
		for key, raw := range t.withDefaults(n.Inputs) {
			for _, r := range refsIn(raw) {
				v.reference(n, key, r)
			}
			if _, ok := pureRef(raw); ok {
				byRef[key] = true
				continue
			}
			val, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				v.bad(n.NodeID, key, "not JSON: %v", err)
				continue
			}
			checked[key] = val
		}
		if err := t.compiled.Validate(checked); err != nil {
			for _, p := range schemaProblems(err, byRef) {
				v.bad(n.NodeID, p.Field, "%s", p.Message)
			}
		}
	}
}

func (v *validation) reference(n *Node, key string, r Ref) {
	if r.NodeID == VariablesNode {
		if v.variableType(r.Key) == "" {
			v.bad(n.NodeID, key, "references the variable %q, which the app does not declare", r.Key)
		}
		return
	}
	src := v.byID[r.NodeID]
	switch {
	case src == nil:
		v.bad(n.NodeID, key, "references node %q, which does not exist", r.NodeID)
	case v.ts[src.Type] != nil && v.output(src, r.Key).Type == "":
		v.bad(n.NodeID, key, "references %s.%s, but %s nodes have no output %q", r.NodeID, r.Key, src.Type, r.Key)
	case src.ParentNodeID != "" && !slices.Contains(v.scopeOf(n), src.ParentNodeID):
		v.bad(n.NodeID, key, "references %s.%s, which is inside a loop: only the loop's own nodes see it; use the loop's results", r.NodeID, r.Key)
	}
}

// reachable refuses nodes that no path of edges leads to from the start
// (inside a loop: from its loop start).
func (v *validation) reachable() {
	next := map[string][]string{}
	for _, e := range v.g.Edges {
		next[e.Source] = append(next[e.Source], e.Target)
	}
	seen := map[string]bool{}
	var walk func(id string)
	walk = func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		for _, t := range next[id] {
			walk(t)
		}
	}
	for _, n := range v.g.Nodes {
		if n.Type == "workflowStart" || n.Type == "loopStart" {
			walk(n.NodeID)
		}
	}
	for _, n := range v.g.Nodes {
		if !seen[n.NodeID] && (n.ParentNodeID == "" || seen[n.ParentNodeID]) {
			v.bad(n.NodeID, "", "nothing leads to this node, so it never runs; connect it, or delete it")
		}
	}
}

// referenceTypes refuses an input given by one reference whose value's
// type does not fit the input's.
func (v *validation) referenceTypes() {
	for i := range v.g.Nodes {
		n := &v.g.Nodes[i]
		t := v.ts[n.Type]
		for key, raw := range n.Inputs {
			r, ok := pureRef(raw)
			want := t.Inputs[key]
			if !ok || want == "" || want == "any" {
				continue
			}
			var got string
			if r.NodeID == VariablesNode {
				got = v.variableType(r.Key)
			} else if src := v.byID[r.NodeID]; src != nil {
				got = v.output(src, r.Key).Type
			}
			if got != "" && got != "any" && got != want {
				v.bad(n.NodeID, key, "takes %s, but %s.%s is %s", a(want), r.NodeID, r.Key, a(got))
			}
		}
	}
}

// a names a value type for a sentence.
func a(typ string) string {
	switch typ {
	case "string":
		return "text"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return typ
}

// withDefaults returns the inputs with the template's defaults filled in.
func (t *Template) withDefaults(in map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(t.Defaults)+len(in))
	for k, v := range t.Defaults {
		out[k] = v
	}
	for k, v := range in {
		out[k] = v
	}
	return out
}

// validateValues checks resolved input values against the template.
func (t *Template) validateValues(values map[string]any) error {
	var v any = values
	if !plainJSON(v) { // outputs of Go types of their own: checked as JSON
		doc, err := json.Marshal(values)
		if err != nil {
			return err
		}
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(doc)); err != nil {
			return err
		}
	}
	if err := t.compiled.Validate(v); err != nil {
		var lines []string
		for _, p := range schemaProblems(err, nil) {
			if p.Field == "" {
				lines = append(lines, "inputs: "+p.Message)
			} else {
				lines = append(lines, "input "+p.Field+": "+p.Message)
			}
		}
		return errors.New(strings.Join(lines, ", "))
	}
	return nil
}

// plainJSON reports whether v holds only the types encoding/json decodes
// to, which the schema validator reads as they are.
func plainJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, float64, string:
		return true
	case []any:
		for _, x := range v {
			if !plainJSON(x) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, x := range v {
			if !plainJSON(x) {
				return false
			}
		}
		return true
	}
	return false
}

var english = message.NewPrinter(language.English)

// schemaProblems turns a validation error into one problem per failing
// input. Inputs in byRef are given by references, checked when the graph
// runs: their absence is not a problem here.
func schemaProblems(err error, byRef map[string]bool) []Problem {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Problem{{Message: err.Error()}}
	}
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(e.Causes) == 0 {
			for _, m := range req.Missing {
				if len(e.InstanceLocation) > 0 || !byRef[m] {
					field := strings.Join(append(slices.Clone(e.InstanceLocation), m), "/")
					out = append(out, Problem{Field: field, Message: "missing; give it a value"})
				}
			}
			return
		}
		if len(e.Causes) == 0 {
			field := strings.Join(e.InstanceLocation, "/")
			out = append(out, Problem{Field: field, Message: e.ErrorKind.LocalizedString(english)})
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

func (ts Templates) names() []string {
	var out []string
	for k, t := range ts {
		if t.Group != "hidden" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

package nodes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
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
	compiled *jsonschema.Schema
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
	c := jsonschema.NewCompiler()
	raws := map[string][]byte{}
	for _, f := range files {
		data, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("node template %s: %w", f, err)
		}
		typ := strings.TrimSuffix(path.Base(f), ".json")
		if err := c.AddResource("flowbox/nodes/"+typ, doc); err != nil {
			return nil, fmt.Errorf("node template %s: %w", f, err)
		}
		raws[typ] = data
	}
	out := Templates{}
	for typ, data := range raws {
		sch, err := c.Compile("flowbox/nodes/" + typ)
		if err != nil {
			return nil, fmt.Errorf("node template %s: %w", typ, err)
		}
		var meta struct {
			Label       map[string]string `json:"x-label"`
			Description string            `json:"description"`
			Properties  map[string]struct {
				Default json.RawMessage `json:"default"`
			} `json:"properties"`
			Outputs map[string]Output `json:"x-outputs"`
		}
		if err := json.Unmarshal(data, &meta); err != nil {
			return nil, fmt.Errorf("node template %s: %w", typ, err)
		}
		t := &Template{Type: typ, Label: meta.Label, Description: meta.Description, Schema: data,
			Defaults: map[string]json.RawMessage{}, Outputs: meta.Outputs, compiled: sch}
		for k, p := range meta.Properties {
			if len(p.Default) > 0 {
				t.Defaults[k] = p.Default
			}
		}
		out[typ] = t
	}
	return out, nil
}

var nodeIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Validate checks a graph against the templates: unique node ids, known
// types, edges and references between existing nodes and declared
// outputs, inputs of the declared types (a reference stands for any type:
// its value is checked when the graph runs), no cycle, one start node.
func (ts Templates) Validate(g *Graph) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byID := map[string]*Node{}
	starts := 0
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch {
		case !nodeIDRe.MatchString(n.NodeID):
			bad("node %d: nodeId %q must be 1-64 letters, digits, '_' or '-'", i, n.NodeID)
		case byID[n.NodeID] != nil:
			bad("node %q appears twice", n.NodeID)
		}
		byID[n.NodeID] = n
		if ts[n.Type] == nil {
			bad("node %q: unknown type %q (known: %s)", n.NodeID, n.Type, strings.Join(ts.names(), ", "))
		}
		if n.Type == "workflowStart" {
			starts++
		}
	}
	if starts != 1 {
		bad("a workflow needs exactly one workflowStart node, it has %d", starts)
	}
	for _, e := range g.Edges {
		if byID[e.Source] == nil || byID[e.Target] == nil {
			bad("edge %s → %s names a node that does not exist", e.Source, e.Target)
		}
	}
	for _, n := range g.Nodes {
		t := ts[n.Type]
		if t == nil {
			continue
		}
		checked := map[string]any{}
		byRef := map[string]bool{}
		for key, raw := range t.withDefaults(n.Inputs) {
			for _, r := range refsIn(raw) {
				src := byID[r.NodeID]
				switch {
				case src == nil:
					bad("node %q input %q references node %q, which does not exist", n.NodeID, key, r.NodeID)
				case ts[src.Type] != nil && ts[src.Type].Outputs[r.Key].Type == "":
					bad("node %q input %q references %s.%s, but %s nodes have no output %q", n.NodeID, key, r.NodeID, r.Key, src.Type, r.Key)
				}
			}
			if _, ok := pureRef(raw); ok {
				byRef[key] = true
				continue
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				bad("node %q input %q is not JSON: %v", n.NodeID, key, err)
				continue
			}
			checked[key] = v
		}
		if err := t.compiled.Validate(checked); err != nil {
			if p := schemaProblem(err, byRef); p != "" {
				bad("node %q (%s): %s", n.NodeID, n.Type, p)
			}
		}
	}
	if len(problems) == 0 {
		if _, err := g.order(); err != nil {
			bad("%v", err)
		}
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
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
	doc, err := json.Marshal(values)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	if err := t.compiled.Validate(v); err != nil {
		return fmt.Errorf("%s", schemaProblem(err, nil))
	}
	return nil
}

var english = message.NewPrinter(language.English)

// schemaProblem turns a validation error into one line naming each failing
// input. Inputs in byRef are given by references, checked when the graph
// runs: their absence is not a problem here.
func schemaProblem(err error, byRef map[string]bool) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(e.Causes) == 0 {
			var missing []string
			for _, m := range req.Missing {
				if !byRef[m] {
					missing = append(missing, m)
				}
			}
			if len(missing) == 0 {
				return
			}
			req = &kind.Required{Missing: missing}
			lines = append(lines, "inputs: "+req.LocalizedString(english))
			return
		}
		if len(e.Causes) == 0 {
			where := "inputs"
			if len(e.InstanceLocation) > 0 {
				where = "input " + strings.Join(e.InstanceLocation, "/")
			}
			lines = append(lines, where+": "+e.ErrorKind.LocalizedString(english))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(lines)
	return strings.Join(lines, ", ")
}

func (ts Templates) names() []string {
	var out []string
	for k := range ts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

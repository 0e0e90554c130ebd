package fastgpt

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaInfo is what the import reads of a node type's template: the
// inputs it declares, which it requires, whether it takes others, and
// the compiled schema, to find exactly which part of a value it refuses.
type schemaInfo struct {
	props      map[string]bool
	required   map[string]bool
	additional bool
	defaults   map[string]json.RawMessage
	compiled   *jsonschema.Schema
}

func (c *converter) schema(typ string) *schemaInfo {
	if s, ok := c.schemas[typ]; ok {
		return s
	}
	s := &schemaInfo{props: map[string]bool{}, required: map[string]bool{}}
	c.schemas[typ] = s
	t := c.ts[typ]
	if t == nil {
		return s
	}
	s.defaults = t.Defaults
	var doc struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	if json.Unmarshal(t.Schema, &doc) != nil {
		return s
	}
	for k := range doc.Properties {
		s.props[k] = true
	}
	for _, k := range doc.Required {
		s.required[k] = true
	}
	s.additional = string(bytes.TrimSpace(doc.AdditionalProperties)) != "false"
	if parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.Schema)); err == nil {
		comp := jsonschema.NewCompiler()
		if comp.AddResource("fastgpt-import/"+typ, parsed) == nil {
			s.compiled, _ = comp.Compile("fastgpt-import/" + typ)
		}
	}
	return s
}

// issue is one thing a template refuses in a node's inputs: where (the
// input, then the path inside its value), and why.
type issue struct {
	path    []string
	message string
	// missing is set for a required value that is absent at path.
	missing string
}

var english = message.NewPrinter(language.English)

// check validates a node's inputs as Templates.Validate does (with the
// defaults; inputs given by one reference are checked when the graph
// runs), and says precisely where each problem is.
func (s *schemaInfo) check(inputs map[string]json.RawMessage) []issue {
	if s.compiled == nil {
		return nil
	}
	values := map[string]any{}
	byRef := map[string]bool{}
	for k, raw := range s.defaults {
		if v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw)); err == nil {
			values[k] = v
		}
	}
	for k, raw := range inputs {
		if isPureRef(raw) {
			byRef[k] = true
			delete(values, k)
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return []issue{{path: []string{k}, message: "not JSON"}}
		}
		values[k] = v
	}
	err := s.compiled.Validate(values)
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return nil
	}
	var out []issue
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if req, ok := e.ErrorKind.(*kind.Required); ok && len(e.Causes) == 0 {
			for _, m := range req.Missing {
				if len(e.InstanceLocation) == 0 && byRef[m] {
					continue
				}
				out = append(out, issue{path: e.InstanceLocation, missing: m, message: "missing"})
			}
			return
		}
		if add, ok := e.ErrorKind.(*kind.AdditionalProperties); ok && len(e.Causes) == 0 && len(e.InstanceLocation) == 0 {
			for _, p := range add.Properties {
				out = append(out, issue{path: []string{p}, message: "not an input of this node type"})
			}
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, issue{path: e.InstanceLocation, message: e.ErrorKind.LocalizedString(english)})
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Join(out[i].path, "/") < strings.Join(out[j].path, "/")
	})
	return out
}

// isPureRef: the value is exactly one Flowbox reference.
func isPureRef(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	m := flowboxRef.FindStringSubmatch(s)
	return m != nil && m[0] == strings.TrimSpace(s)
}

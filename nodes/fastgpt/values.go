package fastgpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/flowbox/flowbox/nodes"
)

// How FastGPT writes references, and how Flowbox does. A FastGPT input
// given by reference holds [nodeId, outputId] (newer versions: a list of
// those); texts hold {{$nodeId.outputId$}} and, for global variables,
// {{key}}. Output ids are often random (a code node's results), so each
// becomes the output's key: Flowbox's reference is {{$nodeId.key$}}.

// fastgptRef matches FastGPT's in-text references as its runtime does.
var fastgptRef = regexp.MustCompile(`\{\{\$([^.{}$]+)\.([^${}]+)\$\}\}`)

// legacyVar matches FastGPT's older {{key}} references to variables.
var legacyVar = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)

// flowboxRef matches Flowbox's references, as the engine reads them.
var flowboxRef = regexp.MustCompile(`\{\{\$([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\$\}\}`)

// refKey is what Flowbox's references accept as an output key.
var refKey = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// value converts one FastGPT input's value. set is false when FastGPT
// gave none (or an empty reference); note says what was changed or lost.
func (c *converter) value(n *fnode, in finput) (val json.RawMessage, set bool, note string) {
	raw := bytes.TrimSpace(in.Value)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Sprintf("its value is not JSON: %v", err)
	}
	if c.isReference(in, v) {
		pairs, _ := refPairs(v)
		if len(pairs) == 0 {
			return nil, false, ""
		}
		s, why := c.refString(pairs[0])
		if why != "" {
			return nil, false, why + "; the input is left out"
		}
		if len(pairs) > 1 {
			note = fmt.Sprintf("FastGPT joins the values of %d references here; Flowbox takes one reference, the first (%s)", len(pairs), s)
		}
		out, _ := json.Marshal(s)
		return out, true, note
	}
	var lost []string
	v = c.deep(v, &lost)
	if len(lost) > 0 {
		note = fmt.Sprintf("%s; left out of the value", joinReasons(lost))
	}
	if isEmpty(v) {
		return nil, false, note
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false, fmt.Sprintf("its value cannot be written as JSON: %v", err)
	}
	return out, true, note
}

func joinReasons(rs []string) string {
	out := rs[0]
	for _, r := range rs[1:] {
		out += "; " + r
	}
	return out
}

// isEmpty: no value worth keeping.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// isReference says whether an input's value is a reference: the render
// type FastGPT's editor shows for it is a reference picker, or the value
// has a reference's shape naming a node of the workflow.
func (c *converter) isReference(in finput, v any) bool {
	sel := 0
	if in.SelectedTypeIndex != nil {
		sel = *in.SelectedTypeIndex
	}
	if sel >= 0 && sel < len(in.RenderTypeList) {
		switch in.RenderTypeList[sel] {
		case "reference", "settingDatasetQuotePrompt":
			_, ok := refPairs(v)
			return ok
		}
	}
	hasRef := false
	for _, r := range in.RenderTypeList {
		hasRef = hasRef || r == "reference"
	}
	pairs, ok := refPairs(v)
	if !hasRef || !ok || len(pairs) == 0 {
		return false
	}
	for _, p := range pairs {
		if p[0] != nodes.VariablesNode && c.byID[p[0]] == nil {
			return false
		}
	}
	return true
}

// refPairs reads a reference value: [nodeId, outputId] or a list of them.
// Unset references ([], ["", ""]) give no pairs.
func refPairs(v any) ([][2]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	if p, ok := pairOf(arr); ok {
		if p[0] == "" {
			return nil, true
		}
		return [][2]string{p}, true
	}
	var out [][2]string
	for _, el := range arr {
		inner, ok := el.([]any)
		if !ok {
			return nil, false
		}
		p, ok := pairOf(inner)
		if !ok {
			return nil, false
		}
		if p[0] != "" {
			out = append(out, p)
		}
	}
	return out, true
}

func pairOf(arr []any) ([2]string, bool) {
	if len(arr) == 0 || len(arr) > 2 {
		return [2]string{}, false
	}
	var p [2]string
	for i, el := range arr {
		s, ok := el.(string)
		if !ok {
			return [2]string{}, false
		}
		p[i] = s
	}
	return p, true
}

// refString writes a FastGPT reference as Flowbox's; why says why it
// cannot be.
func (c *converter) refString(p [2]string) (s, why string) {
	id, out := p[0], p[1]
	if out == "" {
		return "", fmt.Sprintf("the reference to node %q names no output", id)
	}
	if id == nodes.VariablesNode {
		if !refKey.MatchString(out) {
			return "", fmt.Sprintf("the variable %q has a key Flowbox cannot reference (letters, digits and _ only)", out)
		}
		return "{{$" + nodes.VariablesNode + "." + out + "$}}", ""
	}
	src := c.byID[id]
	if src == nil {
		return "", fmt.Sprintf("it references node %q, which is not in the workflow", id)
	}
	key := outputKey(src, out)
	if !refKey.MatchString(key) {
		return "", fmt.Sprintf("it references the output %q of %q, a name Flowbox references cannot hold (letters, digits and _ only)", key, src.Name)
	}
	return "{{$" + c.ids[id] + "." + key + "$}}", ""
}

// outputKey is the key of a node's output given its id (FastGPT
// references name outputs by id). FastGPT's error text of a node with an
// error branch is Flowbox's output "error".
func outputKey(n *fnode, id string) string {
	if id == "system_error_text" {
		return "error"
	}
	for _, o := range n.Outputs {
		if o.ID == id && o.Key != "" {
			return o.Key
		}
	}
	return id
}

// deep converts the references inside a value: texts, and [nodeId,
// outputId] pairs naming a node of the workflow (an if/else condition's
// variable, a variable update's target) become Flowbox's reference text.
func (c *converter) deep(v any, lost *[]string) any {
	switch v := v.(type) {
	case string:
		return c.text(v, lost)
	case []any:
		if p, ok := pairOf(v); ok && len(v) == 2 && p[1] != "" && (p[0] == nodes.VariablesNode || c.byID[p[0]] != nil) {
			s, why := c.refString(p)
			if why != "" {
				*lost = append(*lost, why)
				return ""
			}
			return s
		}
		out := make([]any, len(v))
		for i, el := range v {
			out[i] = c.deep(el, lost)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, el := range v {
			out[k] = c.deep(el, lost)
		}
		return out
	}
	return v
}

// text converts the references in a FastGPT text: {{$nodeId.outputId$}}
// to {{$nodeId.key$}}, and the older {{key}} of a global or system
// variable to {{$VARIABLE_NODE_ID.key$}}.
func (c *converter) text(s string, lost *[]string) string {
	s = legacyVar.ReplaceAllStringFunc(s, func(m string) string {
		key := legacyVar.FindStringSubmatch(m)[1]
		if c.hasVariable(key) {
			return "{{$" + nodes.VariablesNode + "." + key + "$}}"
		}
		return m
	})
	return fastgptRef.ReplaceAllStringFunc(s, func(m string) string {
		sm := fastgptRef.FindStringSubmatch(m)
		id, out := sm[1], sm[2]
		if id == nodes.VariablesNode {
			if !refKey.MatchString(out) {
				*lost = append(*lost, fmt.Sprintf("the reference %s names a variable Flowbox references cannot hold", m))
				return ""
			}
			return m
		}
		src := c.byID[id]
		if src == nil {
			return m // not a node of the workflow: checked with the others later
		}
		key := outputKey(src, out)
		if !refKey.MatchString(key) {
			*lost = append(*lost, fmt.Sprintf("the reference %s names the output %q of %q, a name Flowbox references cannot hold", m, key, src.Name))
			return ""
		}
		return "{{$" + c.ids[id] + "." + key + "$}}"
	})
}

func (c *converter) hasVariable(key string) bool {
	if nodes.SystemVariables[key] != "" {
		return true
	}
	for _, v := range c.g.Variables {
		if v.Key == key {
			return true
		}
	}
	return false
}

// mapStrings applies f to every string of a JSON value.
func mapStrings(raw json.RawMessage, f func(string) string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return f(v)
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = walk(v[k])
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return raw
	}
	return out
}

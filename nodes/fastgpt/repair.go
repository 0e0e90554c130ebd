package fastgpt

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/flowbox/flowbox/nodes"
)

// repair makes the graph one the templates accept, leaving out (and
// reporting) what cannot be made valid: edges Flowbox does not have,
// references to what is not there, cycles, values the templates refuse,
// and last the nodes that stay invalid without them.
func (c *converter) repair() error {
	if err := c.oneStart(); err != nil {
		return err
	}
	for range 200 {
		c.pruneEdges()
		c.dropDanglingRefs()
		c.breakCycles()
		c.startDefaults()
		c.fixInputs()
		err := c.ts.Validate(&c.g)
		if err == nil {
			return nil
		}
		var invalid *nodes.ValidationError
		if !errors.As(err, &invalid) {
			return formatError("%v", err)
		}
		if !c.applyProblems(invalid.Problems) {
			return formatError("the workflow could not be made valid: %v", err)
		}
	}
	return formatError("the workflow could not be made valid")
}

// oneStart keeps the first start node; a workflow without one is not an
// app.
func (c *converter) oneStart() error {
	var starts []string
	for _, n := range c.g.Nodes {
		if n.Type == "workflowStart" && n.ParentNodeID == "" {
			starts = append(starts, n.NodeID)
		}
	}
	if len(starts) == 0 {
		for _, n := range c.wf.Nodes {
			if n.FlowNodeType == "pluginInput" {
				return formatError("this is a FastGPT plugin (it starts at pluginInput); Flowbox imports apps, which start at a workflowStart node")
			}
		}
		return formatError("the workflow has no start node (workflowStart)")
	}
	for _, id := range starts[1:] {
		c.removeNode(id, "a second start node; a Flowbox workflow has one")
	}
	return nil
}

func (c *converter) index() map[string]*nodes.Node {
	out := make(map[string]*nodes.Node, len(c.g.Nodes))
	for i := range c.g.Nodes {
		out[c.g.Nodes[i].NodeID] = &c.g.Nodes[i]
	}
	return out
}

// removeNode leaves a node out, with the nodes inside it and its edges.
func (c *converter) removeNode(id, reason string) {
	gone := map[string]bool{id: true}
	for changed := true; changed; {
		changed = false
		for _, n := range c.g.Nodes {
			if !gone[n.NodeID] && n.ParentNodeID != "" && gone[n.ParentNodeID] {
				gone[n.NodeID], changed = true, true
			}
		}
	}
	root := c.from[id]
	kept := c.g.Nodes[:0]
	for _, n := range c.g.Nodes {
		if !gone[n.NodeID] {
			kept = append(kept, n)
			continue
		}
		why := reason
		if n.NodeID != id && root != nil {
			why = fmt.Sprintf("it is inside %s %q, which was left out", root.FlowNodeType, root.Name)
		}
		s := Skipped{NodeID: n.NodeID, Type: n.Type, Name: n.Name, Reason: why}
		if fn := c.from[n.NodeID]; fn != nil {
			s.NodeID, s.Type = fn.NodeID, fn.FlowNodeType
		}
		c.report.Skipped = append(c.report.Skipped, s)
	}
	c.g.Nodes = kept
	c.g.Edges = slices.DeleteFunc(c.g.Edges, func(e nodes.Edge) bool { return gone[e.Source] || gone[e.Target] })
}

// pruneEdges leaves out the edges Flowbox refuses.
func (c *converter) pruneEdges() {
	byID := c.index()
	c.g.Edges = slices.DeleteFunc(c.g.Edges, func(e nodes.Edge) bool {
		src, dst := byID[e.Source], byID[e.Target]
		if src == nil || dst == nil {
			return true
		}
		t := c.ts[src.Type]
		field := "edge to " + e.Target
		switch {
		case src.ParentNodeID != dst.ParentNodeID:
			c.field(e.Source, field, "the edge crosses a loop's border; Flowbox connects the nodes inside a loop only to each other, so it is left out")
		case dst.Type == "workflowStart" || dst.Type == "loopStart":
			c.field(e.Source, field, "the edge leads into a start node, which nothing may lead into; it is left out")
		case t == nil:
			return true
		case e.SourceHandle == nodes.CatchBranch && !t.Catch:
			c.field(e.Source, field, "the edge leaves from FastGPT's error branch, which Flowbox's %s nodes do not have; it is left out", src.Type)
		case e.SourceHandle != "" && e.SourceHandle != nodes.CatchBranch && !t.Branches:
			c.field(e.Source, field, "the edge leaves from FastGPT's handle %q, a branch Flowbox's %s nodes do not have; it is left out", e.SourceHandle, src.Type)
		default:
			return false
		}
		return true
	})
}

// refProblem says why a reference of node n cannot be kept ("" when it
// can).
func (c *converter) refProblem(n *nodes.Node, byID map[string]*nodes.Node, id, key string) string {
	if id == nodes.VariablesNode {
		if c.hasVariable(key) {
			return ""
		}
		return fmt.Sprintf("the app has no variable %q", key)
	}
	src := byID[id]
	if src == nil {
		if fn := c.from[id]; fn != nil {
			return fmt.Sprintf("its node %q (%s) was left out", fn.Name, fn.FlowNodeType)
		}
		return fmt.Sprintf("there is no node %q", id)
	}
	if !c.hasOutput(src, key) {
		return fmt.Sprintf("Flowbox's %s nodes have no output %q", src.Type, key)
	}
	if src.ParentNodeID != "" {
		for p := n.ParentNodeID; ; p = byID[p].ParentNodeID {
			if p == src.ParentNodeID {
				return ""
			}
			if p == "" || byID[p] == nil {
				return "it is inside a loop, and only the loop's own nodes see it"
			}
		}
	}
	return ""
}

func (c *converter) hasOutput(n *nodes.Node, key string) bool {
	t := c.ts[n.Type]
	if t == nil {
		return false
	}
	if _, ok := t.Outputs[key]; ok {
		return true
	}
	if key == "error" && t.Catch {
		return true
	}
	return t.DynamicOutputs && slices.ContainsFunc(n.Outputs, func(o nodes.NodeOutput) bool { return o.Key == key })
}

// dropDanglingRefs leaves out references to what the graph does not
// have: an input that is one such reference, or the reference inside a
// longer text.
func (c *converter) dropDanglingRefs() {
	byID := c.index()
	for i := range c.g.Nodes {
		n := &c.g.Nodes[i]
		for _, key := range slices.Sorted(maps.Keys(n.Inputs)) {
			raw := n.Inputs[key]
			if isPureRef(raw) {
				var s string
				_ = json.Unmarshal(raw, &s)
				m := flowboxRef.FindStringSubmatch(s)
				if why := c.refProblem(n, byID, m[1], m[2]); why != "" {
					c.dropInput(n, key, fmt.Sprintf("it was given by %s, but %s", m[0], why))
				}
				continue
			}
			var lost []string
			out := mapStrings(raw, func(s string) string {
				return flowboxRef.ReplaceAllStringFunc(s, func(ref string) string {
					m := flowboxRef.FindStringSubmatch(ref)
					if why := c.refProblem(n, byID, m[1], m[2]); why != "" {
						lost = append(lost, fmt.Sprintf("%s (%s)", ref, why))
						return ""
					}
					return ref
				})
			})
			if len(lost) > 0 {
				n.Inputs[key] = out
				c.field(n.NodeID, key, "references removed from the value: %s", strings.Join(lost, "; "))
			}
		}
	}
}

// dropInput leaves out an input given by a reference that cannot stay:
// the template's default applies; a required input without one is left
// empty (of its type) for the builder to fill in, so the node stays.
func (c *converter) dropInput(n *nodes.Node, key, why string) {
	delete(n.Inputs, key)
	info := c.schema(n.Type)
	switch {
	case info.defaults[key] != nil:
		c.field(n.NodeID, key, "%s; the input is left out and the node type's default applies", why)
	case info.required[key] && emptyOf(c.ts[n.Type].Inputs[key]) != nil:
		n.Inputs[key] = emptyOf(c.ts[n.Type].Inputs[key])
		c.field(n.NodeID, key, "%s; the input is empty now: give it a value", why)
	default:
		c.field(n.NodeID, key, "%s; the input is left out", why)
	}
}

// emptyOf is the empty value of a declared input type (nil: none).
func emptyOf(typ string) json.RawMessage {
	switch typ {
	case "", "string", "any":
		return json.RawMessage(`""`)
	case "array":
		return json.RawMessage(`[]`)
	case "object":
		return json.RawMessage(`{}`)
	}
	return nil
}

// dep is one thing a node waits for: an edge, or a reference in one of
// its inputs.
type dep struct {
	from, to string
	edge     int    // index in g.Edges, or -1
	key      string // the input holding the reference
}

// breakCycles leaves out the edges (or references) that close a cycle:
// FastGPT repeats nodes by leading an edge back, Flowbox only through a
// loop node.
func (c *converter) breakCycles() {
	for range len(c.g.Edges) + len(c.g.Nodes) + 1 {
		d, ok := c.backDep()
		if !ok {
			return
		}
		if d.edge >= 0 {
			e := c.g.Edges[d.edge]
			c.g.Edges = slices.Delete(c.g.Edges, d.edge, d.edge+1)
			c.field(e.Source, "edge to "+e.Target, "the edge leads back to a node that ran before it, a cycle (FastGPT repeats nodes this way); Flowbox repeats work only through a loop node, so the edge is left out")
			continue
		}
		n := c.index()[d.to]
		raw := n.Inputs[d.key]
		why := fmt.Sprintf("its reference to %q, a node that runs after it, makes a cycle, which Flowbox refuses", d.from)
		if isPureRef(raw) {
			c.dropInput(n, d.key, why)
		} else {
			n.Inputs[d.key] = mapStrings(raw, func(s string) string {
				return flowboxRef.ReplaceAllStringFunc(s, func(ref string) string {
					if flowboxRef.FindStringSubmatch(ref)[1] == d.from {
						return ""
					}
					return ref
				})
			})
			c.field(d.to, d.key, "%s; the reference is left out of the text", why)
		}
	}
}

// backDep finds a dependency that closes a cycle, as the engine orders
// nodes (edges, and references in inputs' texts).
func (c *converter) backDep() (dep, bool) {
	byID := c.index()
	next := map[string][]dep{}
	for i, e := range c.g.Edges {
		next[e.Source] = append(next[e.Source], dep{from: e.Source, to: e.Target, edge: i})
	}
	for _, n := range c.g.Nodes {
		for _, key := range slices.Sorted(maps.Keys(n.Inputs)) {
			var s string
			if json.Unmarshal(n.Inputs[key], &s) != nil {
				continue
			}
			for _, m := range flowboxRef.FindAllStringSubmatch(s, -1) {
				if m[1] != n.NodeID && byID[m[1]] != nil {
					next[m[1]] = append(next[m[1]], dep{from: m[1], to: n.NodeID, edge: -1, key: key})
				}
			}
		}
	}
	state := map[string]int{} // 1 on the path, 2 done
	var found *dep
	var visit func(id string)
	visit = func(id string) {
		state[id] = 1
		for _, d := range next[id] {
			if found != nil {
				return
			}
			switch state[d.to] {
			case 1:
				found = &d
				return
			case 0:
				visit(d.to)
			}
		}
		state[id] = 2
	}
	for _, n := range c.g.Nodes {
		if state[n.NodeID] == 0 && found == nil {
			visit(n.NodeID)
		}
	}
	if found == nil {
		return dep{}, false
	}
	return *found, true
}

// fixInputs leaves out the parts of inputs the templates refuse: an item
// of a list, or the input; a node whose required input cannot be kept is
// left out.
func (c *converter) fixInputs() {
	for restart := true; restart; {
		restart = false
		for i := range c.g.Nodes {
			n := &c.g.Nodes[i]
			info := c.schema(n.Type)
			for range 100 {
				issues := info.check(n.Inputs)
				if len(issues) == 0 {
					break
				}
				if why := c.fixIssue(n, info, issues[0]); why != "" {
					c.removeNode(n.NodeID, why)
					restart = true
					break
				}
			}
			if restart {
				break
			}
		}
	}
}

// fixIssue repairs one issue; it says why the node must go when it
// cannot.
func (c *converter) fixIssue(n *nodes.Node, info *schemaInfo, is issue) string {
	where := strings.Join(is.path, "/")
	msg := is.message
	if is.missing != "" {
		msg = is.missing + " is missing"
		if where == "" {
			return fmt.Sprintf("its required input %s has no value Flowbox can use", is.missing)
		}
	}
	if len(is.path) == 0 {
		return "its inputs cannot be made valid: " + msg
	}
	top := is.path[0]
	raw, has := n.Inputs[top]
	if !has {
		return fmt.Sprintf("its input %s cannot be made valid: %s", where, msg)
	}
	if len(is.path) >= 2 {
		if idx, err := strconv.Atoi(is.path[1]); err == nil {
			var items []json.RawMessage
			if json.Unmarshal(raw, &items) == nil && idx < len(items) {
				items = slices.Delete(items, idx, idx+1)
				n.Inputs[top], _ = json.Marshal(items)
				c.field(n.NodeID, fmt.Sprintf("%s[%d]", top, idx), "item %d of %s is left out: %s", idx, top, msg)
				return ""
			}
		}
	}
	if info.required[top] && info.defaults[top] == nil {
		return fmt.Sprintf("its required input %s cannot be made valid: %s", where, msg)
	}
	delete(n.Inputs, top)
	c.field(n.NodeID, top, "%s: %s; the input is left out", where, msg)
	return ""
}

// applyProblems repairs what Validate still refuses after the passes
// above; false when nothing could be repaired.
func (c *converter) applyProblems(problems []nodes.Problem) bool {
	changed := false
	var dropVars []int
	for _, p := range problems {
		if p.NodeID == "" {
			var idx int
			if _, err := fmt.Sscanf(p.Field, "variables[%d]", &idx); err == nil && idx < len(c.g.Variables) {
				c.field("", "variables."+c.g.Variables[idx].Key, "%s; the variable is left out", p.Message)
				dropVars = append(dropVars, idx)
			}
			continue
		}
		byID := c.index()
		n := byID[p.NodeID]
		if n == nil {
			before := len(c.g.Edges)
			c.g.Edges = slices.DeleteFunc(c.g.Edges, func(e nodes.Edge) bool { return e.Source == p.NodeID || e.Target == p.NodeID })
			changed = changed || len(c.g.Edges) != before
			continue
		}
		top, _, _ := strings.Cut(p.Field, "/")
		if _, ok := n.Inputs[top]; ok && top != "" {
			delete(n.Inputs, top)
			c.field(n.NodeID, top, "%s; the input is left out", p.Message)
		} else {
			c.removeNode(n.NodeID, p.Message)
		}
		changed = true
	}
	slices.Sort(dropVars)
	dropVars = slices.Compact(dropVars)
	for i := len(dropVars) - 1; i >= 0; i-- {
		c.g.Variables = slices.Delete(c.g.Variables, dropVars[i], dropVars[i]+1)
		changed = true
	}
	return changed
}

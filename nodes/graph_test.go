package nodes_test

import (
	"encoding/json"
	"testing"

	"github.com/flowbox/flowbox/nodes"
)

// A loop's size on the canvas is part of the graph: what is read is
// written back the same (stores and exports write the graph as JSON), a
// node without one gets none, and a clone's size is its own.
func TestGraphKeepsANodesSize(t *testing.T) {
	const in = `{"nodes":[` +
		`{"nodeId":"loop","type":"loop","position":{"x":40,"y":80},"size":{"width":720,"height":360}},` +
		`{"nodeId":"ls","type":"loopStart","parentNodeId":"loop","position":{"x":60,"y":150}}],` +
		`"edges":[]}`
	var g nodes.Graph
	if err := json.Unmarshal([]byte(in), &g); err != nil {
		t.Fatal(err)
	}
	if got := g.Nodes[0].Size; got == nil || *got != (nodes.Size{Width: 720, Height: 360}) {
		t.Fatalf("the loop's size reads %+v, want 720×360", got)
	}
	if g.Nodes[1].Size != nil {
		t.Errorf("a node without a size reads %+v, want none", *g.Nodes[1].Size)
	}
	for name, graph := range map[string]nodes.Graph{"the graph": g, "its clone": g.Clone()} {
		out, err := json.Marshal(graph)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != in {
			t.Errorf("%s written back:\n%s\nwant\n%s", name, out, in)
		}
	}
	c := g.Clone()
	c.Nodes[0].Size.Width = 1
	if g.Nodes[0].Size.Width != 720 {
		t.Errorf("changing the clone's size changed the graph's: %+v", *g.Nodes[0].Size)
	}
}

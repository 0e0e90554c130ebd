package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
)

// logicGraph is a workflow of logic nodes between the start and an answer:
// blocks of five, each a text (the last block's text and the question), a
// condition on it and a variable (IF in the first half of the blocks, ELSE
// after the other conditions failed in the second), a text on either
// branch, and a variable update that both branches lead to and that the
// next block follows. Every node references others; one branch of each
// condition is skipped, so 4 of each 5 run.
func logicGraph(blocks int) string {
	var nodes, edges []string
	node := func(id, typ, inputs string) {
		nodes = append(nodes, fmt.Sprintf(`{"nodeId":%q,"type":%q,"inputs":%s}`, id, typ, inputs))
	}
	edge := func(from, to, handle string) {
		edges = append(edges, fmt.Sprintf(`{"source":%q,"target":%q,"sourceHandle":%q}`, from, to, handle))
	}
	nodes = append(nodes, `{"nodeId":"start","type":"workflowStart"}`)
	prev, prevText := "start", "{{$start.userChatInput$}}"
	for i := 0; i < blocks; i++ {
		t, c, a, b, u := fmt.Sprint("t", i), fmt.Sprint("c", i), fmt.Sprint("a", i), fmt.Sprint("b", i), fmt.Sprint("u", i)
		node(t, "textEditor", fmt.Sprintf(`{"system_textareaInput":"%s / {{$start.userChatInput$}} #%d"}`, prevText, i))
		node(c, "ifElseNode", fmt.Sprintf(`{"ifElseList":[
			{"condition":"AND","list":[{"variable":"{{$%s.system_text$}}","condition":"include","value":"#%d"},
				{"variable":"{{$VARIABLE_NODE_ID.count$}}","condition":"lessThan","value":%d}]},
			{"condition":"OR","list":[{"variable":"{{$%s.system_text$}}","condition":"reg","value":"/^x/"},
				{"variable":"{{$%s.system_text$}}","condition":"lengthGreaterThan","value":100000}]}]}`, t, i, blocks/2, t, t))
		node(a, "textEditor", fmt.Sprintf(`{"system_textareaInput":"yes: {{$%s.system_text$}} ({{$%s.ifElseResult$}}, {{$VARIABLE_NODE_ID.count$}})"}`, t, c))
		node(b, "textEditor", fmt.Sprintf(`{"system_textareaInput":"no: {{$VARIABLE_NODE_ID.last$}}"}`))
		node(u, "variableUpdate", fmt.Sprintf(`{"updateList":[
			{"variable":"{{$VARIABLE_NODE_ID.last$}}","value":"{{$%s.system_text$}}","renderType":"reference"},
			{"variable":"{{$VARIABLE_NODE_ID.count$}}","value":%d,"renderType":"input"}]}`, t, i+1))
		edge(prev, t, "")
		edge(t, c, "")
		edge(c, a, "IF")
		edge(c, b, "ELSE IF 1")
		edge(c, b, "ELSE")
		edge(a, u, "")
		edge(b, u, "")
		prev, prevText = u, fmt.Sprintf("{{$%s.system_text$}}", t)
	}
	nodes = append(nodes, fmt.Sprintf(`{"nodeId":"answer","type":"answerNode","inputs":{"text":"%s"}}`, prevText))
	edge(prev, "answer", "")
	return `{"variables":[{"key":"last","type":"string","defaultValue":""},{"key":"count","type":"number","defaultValue":0}],
		"nodes":[` + strings.Join(nodes, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
}

const emptyGraph = `{"nodes":[{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"answer","type":"answerNode","inputs":{"text":"{{$start.userChatInput$}}"}}],
	"edges":[{"source":"start","target":"answer"}]}`

func benchGraph(b *testing.B, e *nodes.Engine, js string) *nodes.Graph {
	b.Helper()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		b.Fatal(err)
	}
	if err := e.Check(&g); err != nil {
		b.Fatal(err)
	}
	return &g
}

func runOnce(b *testing.B, e *nodes.Engine, g *nodes.Graph) (time.Duration, int) {
	start := time.Now()
	res, err := e.Run(context.Background(), g, nodes.Chat{Question: "q"}, nil)
	took := time.Since(start)
	if err != nil || res.Failed != "" {
		b.Fatalf("run: %v %+v", err, res)
	}
	return took, len(res.Responses)
}

// BenchmarkEngine measures the engine's own time per node: no model, no
// sandbox, one run at a time. empty is the start and one answer; 50nodes
// adds 50 logic nodes (logicGraph) and reports, beside its ns/op, the
// engine's time per node that ran: the median run less the median run of
// the empty graph, measured alternately in the same benchmark, divided
// by the nodes that ran beyond the empty graph's.
//
//	go test -run '^$' -bench BenchmarkEngine -benchtime 2000x ./nodes/
func BenchmarkEngine(b *testing.B) {
	ts, err := nodes.LoadTemplates()
	if err != nil {
		b.Fatal(err)
	}
	e := &nodes.Engine{Templates: ts, Types: nodes.Builtins(models{"flowbox-demo": llm.Demo{}})}
	empty := benchGraph(b, e, emptyGraph)
	big := benchGraph(b, e, logicGraph(10))
	if n := len(big.Nodes) - len(empty.Nodes); n != 50 {
		b.Fatalf("the big graph has %d nodes more than the empty one, want 50", n)
	}
	b.Run("empty", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runOnce(b, e, empty)
		}
	})
	b.Run("50nodes", func(b *testing.B) {
		var bigRuns, emptyRuns []time.Duration
		ran := 0
		for i := 0; i < b.N; i++ {
			took, n := runOnce(b, e, big)
			bigRuns, ran = append(bigRuns, took), n
			b.StopTimer()
			took, n0 := runOnce(b, e, empty)
			emptyRuns, ran = append(emptyRuns, took), ran-n0
			b.StartTimer()
		}
		perNode := float64(median(bigRuns)-median(emptyRuns)) / float64(ran)
		b.ReportMetric(float64(median(emptyRuns).Nanoseconds()), "ns-empty-p50")
		b.ReportMetric(perNode, "ns-p50/node")
		b.ReportMetric(float64(ran), "nodes-ran")
	})
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

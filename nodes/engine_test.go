package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
)

// modelFunc is a model written as a function.
type modelFunc func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error)

func (f modelFunc) Complete(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
	return f(ctx, req, onText)
}

func engineWith(t *testing.T, m models) *nodes.Engine {
	t.Helper()
	e := engine(t)
	e.Types = nodes.Builtins(m)
	return e
}

func run(t *testing.T, e *nodes.Engine, g *nodes.Graph, chat nodes.Chat) (*nodes.Result, string) {
	t.Helper()
	var streamed strings.Builder
	res, err := e.Run(context.Background(), g, chat, func(ev nodes.Event) {
		if d, ok := ev.Data.(nodes.AnswerDelta); ok {
			streamed.WriteString(d.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if streamed.String() != res.Answer {
		t.Fatalf("streamed %q, but the run's answer is %q", streamed.String(), res.Answer)
	}
	return res, streamed.String()
}

func ran(res *nodes.Result) map[string]nodes.NodeResponse {
	out := map[string]nodes.NodeResponse{}
	for _, r := range res.Responses {
		out[r.NodeID] = r
	}
	return out
}

func TestFailedNodeEndsTheRunNamingIt(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"chat","type":"chatNode","name":"Writer","inputs":{"model":"missing-model"}},
		{"nodeId":"after","type":"answerNode","inputs":{"text":"never"}}],
		"edges":[{"source":"start","target":"chat"},{"source":"chat","target":"after"}]}`)
	var errorEvents []string
	res, err := e.Run(context.Background(), g, nodes.Chat{Question: "q"}, func(ev nodes.Event) {
		if d, ok := ev.Data.(nodes.NodeError); ok {
			errorEvents = append(errorEvents, d.Message)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Failed, "node Writer failed") || !strings.Contains(res.Failed, "no model missing-model") {
		t.Fatalf("Failed = %q, want it to name the node and say why", res.Failed)
	}
	if _, ok := ran(res)["after"]; ok {
		t.Fatal("the node after the failed one ran")
	}
	if len(errorEvents) != 1 || !strings.Contains(errorEvents[0], "Writer") {
		t.Fatalf("error events %q, want one naming the node", errorEvents)
	}
}

func TestCatchBranchTakesOverAFailure(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"chat","type":"chatNode","inputs":{"model":"missing-model"}},
		{"nodeId":"ok","type":"answerNode","inputs":{"text":"fine"}},
		{"nodeId":"sorry","type":"answerNode","inputs":{"text":"sorry: {{$chat.error$}}"}}],
		"edges":[{"source":"start","target":"chat"},{"source":"chat","target":"ok"},
			{"source":"chat","target":"sorry","sourceHandle":"catch"}]}`)
	res, answer := run(t, e, g, nodes.Chat{Question: "q"})
	if res.Failed != "" {
		t.Fatalf("the run failed (%s), though the node has an error branch", res.Failed)
	}
	if !strings.HasPrefix(answer, "sorry: ") || !strings.Contains(answer, "no model missing-model") {
		t.Fatalf("answer %q, want the error branch's, with the error", answer)
	}
	got := ran(res)
	if _, ok := got["ok"]; ok {
		t.Fatal("the ordinary branch ran after a failure")
	}
	if b := got["chat"].Branches; len(b) != 1 || b[0] != nodes.CatchBranch {
		t.Fatalf("the failed node's branches = %v, want [catch]", b)
	}
}

// gate lets n callers in only together: each waits until all have come,
// so that a sequential engine never gets past the first.
type gate struct {
	mu   sync.Mutex
	n    int
	open chan struct{}
}

func (g *gate) model() llm.Model {
	return modelFunc(func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
		g.mu.Lock()
		g.n--
		if g.n == 0 {
			close(g.open)
		}
		g.mu.Unlock()
		select {
		case <-g.open:
		case <-time.After(10 * time.Second):
			return llm.Response{}, errors.New("the other branch never started: branches ran one after the other")
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{Message: llm.Message{Content: "x"}}, nil
	})
}

func TestIndependentBranchesRunConcurrently(t *testing.T) {
	g := &gate{n: 3, open: make(chan struct{})}
	e := engineWith(t, models{"gate": g.model()})
	res, _ := run(t, e, graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"a","type":"chatNode","inputs":{"model":"gate"}},
		{"nodeId":"b","type":"chatNode","inputs":{"model":"gate"}},
		{"nodeId":"c","type":"chatNode","inputs":{"model":"gate"}},
		{"nodeId":"join","type":"answerNode","inputs":{"text":"done"}}],
		"edges":[{"source":"start","target":"a"},{"source":"start","target":"b"},{"source":"start","target":"c"},
			{"source":"a","target":"join"},{"source":"b","target":"join"},{"source":"c","target":"join"}]}`), nodes.Chat{Question: "q"})
	if res.Failed != "" {
		t.Fatal(res.Failed)
	}
	if got := ran(res)["join"].Outputs["answerText"]; got != "done" {
		t.Fatalf("the node after the branches answered %v", got)
	}
}

func TestAnswersOfConcurrentNodesAreSeparated(t *testing.T) {
	// a streams "A1", then b streams "B1" while a is still going, then a
	// "A2" and b "B2": the answer keeps each node's text together.
	aSaid, bSaid, aDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	m := models{
		"a": modelFunc(func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
			onText("A1")
			close(aSaid)
			<-bSaid
			onText("A2")
			close(aDone)
			return llm.Response{Message: llm.Message{Content: "A1A2"}}, nil
		}),
		"b": modelFunc(func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
			<-aSaid
			onText("B1")
			close(bSaid)
			<-aDone
			onText("B2")
			return llm.Response{Message: llm.Message{Content: "B1B2"}}, nil
		}),
	}
	e := engineWith(t, m)
	_, answer := run(t, e, graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"a","type":"chatNode","inputs":{"model":"a"}},
		{"nodeId":"b","type":"chatNode","inputs":{"model":"b"}}],
		"edges":[{"source":"start","target":"a"},{"source":"start","target":"b"}]}`), nodes.Chat{Question: "q"})
	if answer != "A1A2\n\nB1B2" {
		t.Fatalf("answer %q, want each node's text whole, separated", answer)
	}
}

func TestLoopRunsItsBodyPerItem(t *testing.T) {
	e := engine(t)
	res, answer := run(t, e, graph(t, `{"variables":[{"key":"items","type":"json","defaultValue":["x","y","z"]}],
		"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":"{{$VARIABLE_NODE_ID.items$}}"}},
		{"nodeId":"ls","type":"loopStart","parentNodeId":"loop"},
		{"nodeId":"say","type":"answerNode","parentNodeId":"loop","inputs":{"text":"{{$ls.loopStartIndex$}}={{$ls.loopStartInput$}}"}},
		{"nodeId":"le","type":"loopEnd","parentNodeId":"loop","inputs":{"loopEndInput":"{{$say.answerText$}}"}},
		{"nodeId":"sum","type":"answerNode","inputs":{"text":"{{$loop.loopArray$}}"}}],
		"edges":[{"source":"start","target":"loop"},{"source":"loop","target":"sum"},
			{"source":"ls","target":"say"},{"source":"say","target":"le"}]}`), nodes.Chat{Question: "q"})
	if res.Failed != "" {
		t.Fatal(res.Failed)
	}
	got := fmt.Sprint(ran(res)["loop"].Outputs["loopArray"])
	if got != "[0=x 1=y 2=z]" {
		t.Fatalf("loopArray = %s", got)
	}
	if answer != "0=x\n\n1=y\n\n2=z\n\n[\"0=x\",\"1=y\",\"2=z\"]" {
		t.Fatalf("answer %q", answer)
	}
}

func TestNodeRunsAreBounded(t *testing.T) {
	e := engine(t)
	e.MaxNodeRuns = 20
	items := strings.Repeat(`"i",`, 30)
	res, _ := run(t, e, graph(t, `{"variables":[{"key":"items","type":"json","defaultValue":[`+items[:len(items)-1]+`]}],
		"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":"{{$VARIABLE_NODE_ID.items$}}"}},
		{"nodeId":"ls","type":"loopStart","parentNodeId":"loop"},
		{"nodeId":"le","type":"loopEnd","parentNodeId":"loop","inputs":{"loopEndInput":"{{$ls.loopStartInput$}}"}}],
		"edges":[{"source":"start","target":"loop"},{"source":"ls","target":"le"}]}`), nodes.Chat{Question: "q"})
	if !strings.Contains(res.Failed, "ran 20 nodes in this turn") {
		t.Fatalf("Failed = %q, want the bound named", res.Failed)
	}
}

func TestLeavingCancelsTheRun(t *testing.T) {
	started := make(chan struct{})
	e := engineWith(t, models{"slow": modelFunc(func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
		close(started)
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	})})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	done := make(chan error, 1)
	var res *nodes.Result
	go func() {
		var err error
		res, err = e.Run(ctx, graph(t, `{"nodes":[{"nodeId":"start","type":"workflowStart"},
			{"nodeId":"slow","type":"chatNode","inputs":{"model":"slow"}},
			{"nodeId":"after","type":"answerNode","inputs":{"text":"never"}}],
			"edges":[{"source":"start","target":"slow"},{"source":"slow","target":"after"}]}`), nodes.Chat{Question: "q"}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run went on after its context ended")
	}
	if _, ok := ran(res)["after"]; ok {
		t.Fatal("a node ran after the run was cancelled")
	}
}

func TestVariables(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"variables":[{"key":"lang","type":"select","options":["en","zh"],"defaultValue":"en"},
		{"key":"n","type":"number","defaultValue":3}],
		"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$VARIABLE_NODE_ID.lang$}} {{$VARIABLE_NODE_ID.n$}} {{$VARIABLE_NODE_ID.chatId$}}"}}],
		"edges":[{"source":"start","target":"a"}]}`)
	_, answer := run(t, e, g, nodes.Chat{Question: "q", ChatID: "c1", Variables: map[string]any{"lang": "zh"}})
	if answer != "zh 3 c1" {
		t.Fatalf("answer %q, want the chat's value, the default, and the system variable", answer)
	}
}

func TestCheckRefuses(t *testing.T) {
	e := engine(t)
	start := `{"nodeId":"start","type":"workflowStart"}`
	tests := []struct {
		name, graph string
		node, field string // the problem's place
		want        string
	}{
		{"unreachable", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}]}`,
			"a", "", "nothing leads to this node"},
		{"type mismatch", `{"nodes":[` + start + `,{"nodeId":"c","type":"chatNode","inputs":{"temperature":"{{$start.userChatInput$}}"}}],"edges":[{"source":"start","target":"c"}]}`,
			"c", "temperature", "takes a number, but start.userChatInput is text"},
		{"cycle", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}},{"nodeId":"b","type":"answerNode","inputs":{"text":"y"}}],
			"edges":[{"source":"start","target":"a"},{"source":"a","target":"b"},{"source":"b","target":"a"}]}`, "", "", "cycle"},
		{"missing variable", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$VARIABLE_NODE_ID.nope$}}"}}],"edges":[{"source":"start","target":"a"}]}`,
			"a", "text", `the variable "nope"`},
		{"catch where there is none", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}},{"nodeId":"b","type":"answerNode","inputs":{"text":"y"}}],
			"edges":[{"source":"start","target":"a"},{"source":"a","target":"b","sourceHandle":"catch"}]}`, "a", "sourceHandle", "no error branch"},
		{"branch of a type without branches", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}],
			"edges":[{"source":"start","target":"a","sourceHandle":"IF"}]}`, "start", "sourceHandle", `no branch "IF"`},
		{"edge across a loop", `{"nodes":[` + start + `,{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":[]}},
			{"nodeId":"ls","type":"loopStart","parentNodeId":"loop"}],
			"edges":[{"source":"start","target":"loop"},{"source":"start","target":"ls"}]}`, "ls", "edge", "crosses a loop's border"},
		{"loop start outside a loop", `{"nodes":[` + start + `,{"nodeId":"ls","type":"loopStart"}],"edges":[{"source":"start","target":"ls"}]}`,
			"ls", "", "belongs inside a loop"},
		{"loop without start", `{"nodes":[` + start + `,{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":[]}}],"edges":[{"source":"start","target":"loop"}]}`,
			"loop", "", "exactly one loop start"},
		{"reading inside a loop from outside", `{"nodes":[` + start + `,{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":[]}},
			{"nodeId":"ls","type":"loopStart","parentNodeId":"loop"},
			{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$ls.loopStartInput$}}"}}],
			"edges":[{"source":"start","target":"loop"},{"source":"loop","target":"a"}]}`, "a", "text", "inside a loop"},
		{"bad variable", `{"variables":[{"key":"1x","type":"colour"}],"nodes":[` + start + `]}`, "", "variables[0]", "must start with a letter"},
		{"select default", `{"variables":[{"key":"x","type":"select","options":["a"],"defaultValue":"b"}],"nodes":[` + start + `]}`, "", "variables[0]", "must be one of a"},
		{"missing input", `{"nodes":[` + start + `,{"nodeId":"a","type":"answerNode"}],"edges":[{"source":"start","target":"a"}]}`, "a", "text", "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Templates.Check(graph(t, tt.graph))
			var invalid *nodes.ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Check = %v, want a refusal", err)
			}
			for _, p := range invalid.Problems {
				if p.NodeID == tt.node && p.Field == tt.field && strings.Contains(p.Message, tt.want) {
					return
				}
			}
			t.Fatalf("problems %+v, want one at node %q field %q saying %q", invalid.Problems, tt.node, tt.field, tt.want)
		})
	}
}

func TestRunNodeByItself(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"variables":[{"key":"who","type":"string","defaultValue":"world"}],"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"chat","type":"chatNode","inputs":{"model":"missing-model"}},
		{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$chat.answerText$}} to {{$VARIABLE_NODE_ID.who$}}"}}],
		"edges":[{"source":"start","target":"chat"},{"source":"chat","target":"a"}]}`)
	var said strings.Builder
	resp, err := e.RunNode(context.Background(), g, "a", map[string]any{"text": "typed by the builder"}, nodes.Chat{}, func(ev nodes.Event) {
		if d, ok := ev.Data.(nodes.AnswerDelta); ok {
			said.WriteString(d.Text)
		}
	})
	if err != nil || resp.Error != "" || resp.Outputs["answerText"] != "typed by the builder" || said.String() != "typed by the builder" {
		t.Fatalf("RunNode = %+v, %v; said %q", resp, err, said.String())
	}
	// Without a value for it, the input is the node's own: the reference
	// to a node that did not run stands for nothing, the variable for its
	// default.
	resp, _ = e.RunNode(context.Background(), g, "a", nil, nodes.Chat{}, nil)
	if resp.Outputs["answerText"] != " to world" {
		t.Fatalf("answerText = %q", resp.Outputs["answerText"])
	}
	// A failing node says why; an unknown node is an error.
	if resp, _ := e.RunNode(context.Background(), g, "chat", nil, nodes.Chat{Question: "q"}, nil); !strings.Contains(resp.Error, "no model missing-model") {
		t.Fatalf("the failing node's response: %+v", resp)
	}
	if _, err := e.RunNode(context.Background(), g, "ghost", nil, nodes.Chat{}, nil); err == nil || !strings.Contains(err.Error(), `no node "ghost"`) {
		t.Fatalf("an unknown node: %v", err)
	}
}

func TestVariablesAreChecked(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"variables":[{"key":"lang","label":"Language","type":"select","options":["en","zh"],"required":true},
		{"key":"n","type":"number"}],
		"nodes":[{"nodeId":"start","type":"workflowStart"}]}`)
	for _, tc := range []struct {
		vars map[string]any
		want string
	}{
		{nil, `"Language" (select) is required`},
		{map[string]any{"lang": "fr"}, "variables.lang must be one of en, zh"},
		{map[string]any{"lang": "en", "n": "three"}, "variables.n must be a number"},
	} {
		_, err := e.Run(context.Background(), g, nodes.Chat{Variables: tc.vars}, nil)
		if !errors.Is(err, nodes.ErrVariables) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("variables %v: %v, want %q", tc.vars, err, tc.want)
		}
	}
	if _, err := e.Run(context.Background(), g, nodes.Chat{Variables: map[string]any{"lang": "zh", "n": 3.0}}, nil); err != nil {
		t.Errorf("good variables: %v", err)
	}
}

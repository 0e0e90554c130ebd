package nodes_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
)

const classifyGraph = `{"nodes":[
	{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"cq","type":"classifyQuestion","inputs":{"model":"%s","agents":[
		{"value":"Greetings and small talk: hello, hi","key":"greeting"},
		{"value":"Refunds: money back for an order","key":"refund"}]}},
	{"nodeId":"hi","type":"answerNode","inputs":{"text":"Hello there"}},
	{"nodeId":"money","type":"answerNode","inputs":{"text":"Refund: {{$cq.cqResult$}}"}},
	{"nodeId":"oops","type":"answerNode","inputs":{"text":"failed: {{$cq.error$}}"}}],
	"edges":[{"source":"start","target":"cq"},
		{"source":"cq","target":"hi","sourceHandle":"greeting"},
		{"source":"cq","target":"money","sourceHandle":"refund"},
		{"source":"cq","target":"oops","sourceHandle":"catch"}]}`

func classifyWith(t *testing.T, model string) *nodes.Graph {
	return graph(t, strings.ReplaceAll(classifyGraph, "%s", model))
}

func TestClassifyQuestion(t *testing.T) {
	calls := func(args string) llm.Model {
		return modelFunc(func(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
			if len(req.Tools) != 1 || req.Tools[0].Function.Name != llm.ClassifyTool {
				return llm.Response{}, errors.New("the classifier offered no classify tool")
			}
			if args == "" {
				return llm.Response{Message: llm.Message{Content: "I think it is a refund."}}, nil
			}
			return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{ID: "1", Type: "function",
				Function: llm.FunctionCall{Name: llm.ClassifyTool, Arguments: args}}}}}, nil
		})
	}
	e := engineWith(t, models{"flowbox-demo": llm.Demo{}, "says-refund": calls(`{"type":"refund"}`),
		"says-nonsense": calls(`{"type":"weather"}`), "no-tools": calls("")})
	tests := []struct {
		name, model, question string
		answer, warning       string
	}{
		{"the demo model by shared words", "flowbox-demo", "I want my money back for this order", "Refund: Refunds: money back for an order", ""},
		{"the demo model, another class", "flowbox-demo", "hello, hi!", "Hello there", ""},
		{"the demo model, nothing shared: the last class", "flowbox-demo", "zzz", "Refund: Refunds: money back for an order", ""},
		{"a model's tool call", "says-refund", "anything", "Refund: Refunds: money back for an order", ""},
		{"an unknown class: the last, with a warning", "says-nonsense", "anything", "Refund: Refunds: money back for an order", `the last class was taken`},
		{"no tool call: the error branch", "no-tools", "anything", "failed: model no-tools answered without calling classify_question", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, answer := run(t, e, classifyWith(t, tt.model), nodes.Chat{Question: tt.question})
			if !strings.HasPrefix(answer, tt.answer) {
				t.Errorf("answer %q, want %q", answer, tt.answer)
			}
			if got := ran(res)["cq"].Error; !strings.Contains(got, tt.warning) || (tt.warning == "" && got != "" && !strings.Contains(tt.answer, "failed")) {
				t.Errorf("the classifier's error/warning %q, want %q", got, tt.warning)
			}
			if len(ran(res)) != 3 {
				t.Errorf("%d nodes ran, want the start, the classifier and one branch", len(ran(res)))
			}
		})
	}
	// Save refuses an edge from a class the node does not have.
	g := classifyWith(t, "flowbox-demo")
	g.Edges[1].SourceHandle = "weather"
	var invalid *nodes.ValidationError
	if err := e.Check(g); !errors.As(err, &invalid) || !strings.Contains(err.Error(), `no branch "weather"`) {
		t.Errorf("Check = %v, want the unknown branch refused", err)
	}
}

func TestContentExtract(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"ex","type":"contentExtract","inputs":{"extractKeys":[
			{"key":"name","desc":"the customer's name","required":true},
			{"key":"age","valueType":"number"},
			{"key":"vip","valueType":"boolean","defaultValue":"false"},
			{"key":"city","desc":"city","required":true}]}},
		{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$ex.name$}} is {{$ex.age$}}, vip {{$ex.vip$}}, complete {{$ex.success$}}"}}],
		"edges":[{"source":"start","target":"ex"},{"source":"ex","target":"a"}]}`)
	if err := e.Templates.Check(g); err != nil {
		t.Fatalf("the extracted fields are not outputs: %v", err)
	}
	res, answer := run(t, e, g, nodes.Chat{Question: "Name: Alice, age is 30 years"})
	if answer != "Alice is 30, vip false, complete false" {
		t.Errorf("answer %q", answer)
	}
	if got := ran(res)["ex"].Outputs["fields"]; got != `{"age":30,"name":"Alice","vip":false}` {
		t.Errorf("fields = %v", got)
	}
	// A reference to a field the node does not extract is refused at save.
	g.Nodes[2].Inputs["text"] = []byte(`"{{$ex.zip$}}"`)
	if err := e.Templates.Check(g); err == nil || !strings.Contains(err.Error(), `no output "zip"`) {
		t.Errorf("Check = %v, want the missing field refused", err)
	}
}

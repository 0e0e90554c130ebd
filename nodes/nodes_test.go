package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
)

type models map[string]llm.Model

func (m models) Model(name string) (llm.Model, error) {
	if mod, ok := m[name]; ok {
		return mod, nil
	}
	return nil, errors.New("no model " + name)
}

func engine(t *testing.T) *nodes.Engine {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	return &nodes.Engine{Templates: ts, Types: nodes.Builtins(models{"flowbox-demo": llm.Demo{}})}
}

func graph(t *testing.T, js string) *nodes.Graph {
	t.Helper()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func TestTemplatesDeclareTheSandboxSwitch(t *testing.T) {
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	tools := ts["tools"]
	if tools == nil {
		t.Fatal("no template for the tool-call node")
	}
	var tmpl struct {
		Properties map[string]struct {
			Type        string            `json:"type"`
			Default     any               `json:"default"`
			Render      string            `json:"x-render"`
			Label       map[string]string `json:"x-label"`
			Description string            `json:"description"`
		} `json:"properties"`
	}
	json.Unmarshal(tools.Schema, &tmpl)
	sw := tmpl.Properties["useAgentSandbox"]
	if sw.Type != "boolean" || sw.Default != false || sw.Render != "switch" ||
		sw.Label["en"] != "Enable sandbox (Computer Use)" || sw.Label["zh"] != "启用沙盒(Computer Use)" ||
		sw.Description != "When on, the agent gets its own Linux environment where it can run commands and work with files" {
		t.Fatalf("useAgentSandbox = %+v, want N1's switch", sw)
	}
}

func TestValidate(t *testing.T) {
	e := engine(t)
	tests := []struct {
		name, graph string
		want        []string // substrings of the error; none = valid
	}{
		{"valid", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode","inputs":{"text":"you said {{$start.userChatInput$}}"}}],"edges":[{"source":"start","target":"a"}]}`, nil},
		{"unknown type", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"x","type":"teleport"}]}`, []string{`unknown type "teleport"`}},
		{"duplicate id", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"start","type":"answerNode","inputs":{"text":"x"}}]}`, []string{"appears twice"}},
		{"no start", `{"nodes":[{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}]}`, []string{"exactly one workflowStart"}},
		{"missing node in reference", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$ghost.answerText$}}"}}]}`, []string{`references node "ghost"`}},
		{"undeclared output", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$start.secret$}}"}}]}`, []string{`have no output "secret"`}},
		{"wrong input type", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"t","type":"tools","inputs":{"useAgentSandbox":"yes","maxToolRounds":0}}]}`, []string{`"t" maxToolRounds`, `"t" useAgentSandbox`}},
		{"unknown input", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode","inputs":{"text":"x","colour":"red"}}]}`, []string{"colour"}},
		{"missing required input", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode"}]}`, []string{"text"}},
		{"cycle", `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$b.answerText$}}"}},{"nodeId":"b","type":"answerNode","inputs":{"text":"{{$a.answerText$}}"}}]}`, []string{"cycle"}},
		{"edge to nowhere", `{"nodes":[{"nodeId":"start","type":"workflowStart"}],"edges":[{"source":"start","target":"x"}]}`, []string{"does not exist"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Templates.Validate(graph(t, tc.graph))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid graph refused: %v", err)
				}
				return
			}
			if !errors.Is(err, nodes.ErrInvalid) {
				t.Fatalf("err = %v, want a validation error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestRunResolvesReferencesAndStreams(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"nodes":[
		{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"chat","type":"chatNode","inputs":{"model":"flowbox-demo"}},
		{"nodeId":"a","type":"answerNode","inputs":{"text":"\n(you asked: {{$start.userChatInput$}})"}}],
		"edges":[{"source":"start","target":"chat"},{"source":"chat","target":"a"}]}`)
	var events []nodes.Event
	res, err := e.Run(context.Background(), g, nodes.Chat{Question: "hello"}, func(ev nodes.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Answer, "I am Flowbox's offline demo model") || !strings.HasSuffix(res.Answer, "\n(you asked: hello)") {
		t.Fatalf("answer = %q", res.Answer)
	}
	var order []string
	var streamed strings.Builder
	for _, ev := range events {
		switch d := ev.Data.(type) {
		case nodes.NodeStatus:
			if d.Status == nodes.StatusRunning {
				order = append(order, ev.NodeID)
			}
		case nodes.AnswerDelta:
			streamed.WriteString(d.Text)
		}
	}
	if strings.Join(order, ",") != "start,chat,a" {
		t.Fatalf("nodes ran in order %v, want start,chat,a", order)
	}
	if streamed.String() != res.Answer {
		t.Fatalf("streamed answer %q, want the run's answer %q", streamed.String(), res.Answer)
	}
	if len(res.Responses) != 3 || res.Responses[2].Outputs["answerText"] != "\n(you asked: hello)" {
		t.Fatalf("responses = %+v", res.Responses)
	}
}

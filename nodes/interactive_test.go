package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes"
)

// selectGraph asks which plan; "basic" and "pro" lead to answers of
// their own, and a node beside the question runs before the pause.
const selectGraph = `{"nodes":[
	{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"side","type":"answerNode","inputs":{"text":"side"}},
	{"nodeId":"ask","type":"userSelect","name":"Plan","inputs":{"description":"Which plan?","userSelectOptions":[
		{"value":"Basic plan","key":"basic"},{"value":"Pro plan","key":"pro"}]}},
	{"nodeId":"b","type":"answerNode","inputs":{"text":"B: {{$ask.selectResult$}}"}},
	{"nodeId":"p","type":"answerNode","inputs":{"text":"P: {{$ask.selectResult$}}"}},
	{"nodeId":"after","type":"answerNode","inputs":{"text":"after {{$side.answerText$}}"}}],
	"edges":[{"source":"start","target":"side"},{"source":"start","target":"ask"},
		{"source":"ask","target":"b","sourceHandle":"basic"},{"source":"ask","target":"p","sourceHandle":"pro"},
		{"source":"side","target":"after"},{"source":"b","target":"after"},{"source":"p","target":"after"}]}`

// stored is a paused run as a store keeps it: through JSON.
func stored(t *testing.T, p *nodes.Paused) nodes.Paused {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var out nodes.Paused
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// pause runs g and returns the question it paused for.
func pause(t *testing.T, e *nodes.Engine, g *nodes.Graph) (*nodes.Result, nodes.Paused) {
	t.Helper()
	var asked []nodes.Request
	res, err := e.Run(context.Background(), g, nodes.Chat{Question: "hi"}, func(ev nodes.Event) {
		if r, ok := ev.Data.(nodes.Request); ok {
			asked = append(asked, r)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Paused == nil {
		t.Fatalf("the run did not pause; failed %q, answer %q", res.Failed, res.Answer)
	}
	if len(asked) != 1 || asked[0].ID != res.Paused.Request.ID {
		t.Fatalf("question events %+v, want the paused one", asked)
	}
	return res, stored(t, res.Paused)
}

func resume(t *testing.T, e *nodes.Engine, g *nodes.Graph, p nodes.Paused, a nodes.Answer) *nodes.Result {
	t.Helper()
	res, _ := run(t, e, g, nodes.Chat{Question: "answer", Resume: &nodes.Resume{Paused: p, Answer: a}})
	return res
}

func TestUserSelectPausesAndTakesTheChosenBranch(t *testing.T) {
	e := engine(t)
	g := graph(t, selectGraph)
	if err := e.Check(g); err != nil {
		t.Fatalf("Check = %v, want the options' keys accepted as branches", err)
	}
	first, p := pause(t, e, g)
	q := p.Request
	if q.Kind != nodes.KindUserSelect || q.Description != "Which plan?" || !strings.HasPrefix(q.ID, "itr_") ||
		fmt.Sprint(q.Options) != "[{Basic plan basic} {Pro plan pro}]" || p.NodeID != "ask" {
		t.Fatalf("paused at %s for %+v", p.NodeID, q)
	}
	if first.Answer != "side" {
		t.Errorf("answer before the pause %q, want only the node beside the question", first.Answer)
	}
	got := ran(first)
	for _, id := range []string{"b", "p", "after"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s ran before the answer", id)
		}
	}
	if d, ok := got["ask"].Detail.(*nodes.InteractiveDetail); !ok || d.Request.ID != q.ID || d.Answer != nil {
		t.Errorf("the question's detail %#v", got["ask"].Detail)
	}

	for _, tc := range []struct {
		sent         any // what the person sent: a key or a text
		branch, text string
	}{
		{"basic", "basic", "B: Basic plan\n\nafter side"},
		{"pro", "pro", "P: Pro plan\n\nafter side"},
		{"Pro plan", "pro", "P: Pro plan\n\nafter side"},
		{" Basic plan ", "basic", "B: Basic plan\n\nafter side"},
	} {
		t.Run(fmt.Sprint(tc.sent), func(t *testing.T) {
			a, err := q.Check(tc.sent)
			if err != nil {
				t.Fatal(err)
			}
			res := resume(t, e, g, p, a)
			if res.Failed != "" || res.Paused != nil {
				t.Fatalf("failed %q, paused %v", res.Failed, res.Paused)
			}
			if res.Answer != tc.text {
				t.Errorf("answer %q, want %q", res.Answer, tc.text)
			}
			got := ran(res)
			if b := got["ask"].Branches; len(b) != 1 || b[0] != tc.branch {
				t.Errorf("branches %v, want [%s]", b, tc.branch)
			}
			if _, ok := got["side"]; ok {
				t.Error("the node that ran before the pause ran again")
			}
			if d, ok := got["ask"].Detail.(*nodes.InteractiveDetail); !ok || d.Answer == nil || d.Answer.Choice != tc.branch {
				t.Errorf("the answered detail %#v", got["ask"].Detail)
			}
		})
	}
}

// formGraph asks for a form and answers with its fields.
const formGraph = `{"nodes":[
	{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"form","type":"formInput","inputs":{"description":"About you","userInputForms":[
		{"type":"input","key":"name","label":"Name","required":true,"maxLength":10},
		{"type":"numberInput","key":"age","label":"Age","min":0,"max":150},
		{"type":"select","key":"plan","label":"Plan","required":true,"list":[{"label":"Basic","value":"basic"},{"label":"Pro","value":"pro"}]},
		{"type":"switch","key":"news","label":"Newsletter","defaultValue":false},
		{"type":"multipleSelect","key":"tags","label":"Tags","list":[{"label":"A","value":"a"},{"label":"B","value":"b"}]},
		{"type":"textarea","key":"note","label":"Note"}]},
	 "outputs":[{"key":"name","type":"string"},{"key":"age","type":"number"},{"key":"plan","type":"string"},
		{"key":"news","type":"boolean"},{"key":"tags","type":"array"},{"key":"note","type":"string"}]},
	{"nodeId":"say","type":"answerNode","inputs":{"text":"{{$form.name$}} {{$form.age$}} {{$form.plan$}} {{$form.news$}} {{$form.tags$}} [{{$form.note$}}]"}},
	{"nodeId":"all","type":"answerNode","inputs":{"text":"{{$form.formInputResult$}}"}}],
	"edges":[{"source":"start","target":"form"},{"source":"form","target":"say"},{"source":"say","target":"all"}]}`

func TestFormInputOutputsTheFields(t *testing.T) {
	e := engine(t)
	g := graph(t, formGraph)
	if err := e.Check(g); err != nil {
		t.Fatalf("Check = %v, want references to the declared fields accepted", err)
	}
	first, p := pause(t, e, g)
	q := p.Request
	if q.Kind != nodes.KindFormInput || q.Description != "About you" || len(q.Fields) != 6 || q.Fields[2].List[1].Label != "Pro" {
		t.Fatalf("paused for %+v", q)
	}
	if first.Answer != "" {
		t.Errorf("answer before the pause %q", first.Answer)
	}
	a, err := q.Check(map[string]any{"name": "Ada", "age": float64(36), "plan": "pro", "tags": []any{"a", "b"}, "note": ""})
	if err != nil {
		t.Fatal(err)
	}
	if said := q.Said(a); said != "Name: Ada\nAge: 36\nPlan: Pro\nNewsletter: false\nTags: A, B" {
		t.Errorf("the answer as said %q", said)
	}
	res := resume(t, e, g, p, a)
	if res.Failed != "" || res.Paused != nil {
		t.Fatalf("failed %q, paused %v", res.Failed, res.Paused)
	}
	if want := `Ada 36 pro false ["a","b"] []` + "\n\n" + `{"age":36,"name":"Ada","news":false,"plan":"pro","tags":["a","b"]}`; res.Answer != want {
		t.Errorf("answer %q, want %q", res.Answer, want)
	}
	out := ran(res)["form"].Outputs
	if out["age"] != float64(36) || out["news"] != false || out["name"] != "Ada" {
		t.Errorf("the form's outputs %v, want each field with its type", out)
	}
	if _, ok := out["note"]; ok {
		t.Errorf("an empty field without default is an output: %v", out)
	}
}

func TestInteractiveAnswersRefused(t *testing.T) {
	e := engine(t)
	_, sel := pause(t, e, graph(t, selectGraph))
	_, form := pause(t, e, graph(t, formGraph))
	ok := map[string]any{"name": "Ada", "plan": "basic"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for k, v := range ok {
			m[k] = v
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		q    nodes.Request
		sent any
		want string
	}{
		{"unknown option", sel.Request, "Enterprise", `"Enterprise" is not one of the options; choose one of "Basic plan" (key basic), "Pro plan" (key pro)`},
		{"option not text", sel.Request, float64(1), "not a number"},
		{"form not an object", form.Request, "Ada", `answer with the form's fields as a JSON object like {"name": ...}`},
		{"missing required", form.Request, with("name", nil), `field "name" (Name) is required`},
		{"empty required", form.Request, with("name", "  "), `field "name" (Name) is required`},
		{"wrong type", form.Request, with("age", "old"), `field "age" (Age) must be a number, not text`},
		{"above max", form.Request, with("age", float64(200)), "must be at most 150"},
		{"too long", form.Request, with("name", "Ada Lovelace-Byron"), "is longer than 10 characters"},
		{"unknown choice", form.Request, with("plan", "gold"), `has no choice "gold"; choose one of "basic", "pro"`},
		{"switch not boolean", form.Request, with("news", "yes"), "must be true or false"},
		{"bad tag", form.Request, with("tags", []any{"a", "z"}), "has no choice z"},
		{"unknown field", form.Request, with("colour", "red"), `the form has no field "colour"`},
		{"an approval", nodes.Request{ID: "apr_1", Command: "rm x"}, "approve", "is answered with a decision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.q.Check(tc.sent)
			if !errors.Is(err, nodes.ErrBadAnswer) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check(%v) = %v, want ErrBadAnswer saying %q", tc.sent, err, tc.want)
			}
		})
	}
	// Several problems are named together.
	_, err := form.Request.Check(map[string]any{"age": "x"})
	if err == nil || !strings.Contains(err.Error(), `"name"`) || !strings.Contains(err.Error(), `"plan"`) || !strings.Contains(err.Error(), `"age"`) {
		t.Errorf("Check = %v, want every problem named", err)
	}
}

func TestInteractiveResumeRefusesWhatDoesNotFit(t *testing.T) {
	e := engine(t)
	g := graph(t, selectGraph)
	_, p := pause(t, e, g)
	for _, tc := range []struct {
		name   string
		paused func(p nodes.Paused) nodes.Paused
		answer nodes.Answer
		want   string
	}{
		{"an answer no option has", func(p nodes.Paused) nodes.Paused { return p }, nodes.Answer{Choice: "gold"}, `the answer "gold" is none of the options`},
		{"a question of another kind", func(p nodes.Paused) nodes.Paused {
			p.Request = nodes.Request{ID: p.Request.ID, Kind: nodes.KindFormInput}
			return p
		}, nodes.Answer{Form: map[string]any{}}, "paused here for a formInput, but this node is a userSelect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := resume(t, e, g, tc.paused(p), tc.answer)
			if !strings.Contains(res.Failed, "node Plan failed") || !strings.Contains(res.Failed, tc.want) {
				t.Fatalf("Failed = %q, want it to say %q", res.Failed, tc.want)
			}
			if _, ok := ran(res)["b"]; ok {
				t.Error("a branch ran after a refused answer")
			}
		})
	}
}

func TestInteractiveChecksAtSave(t *testing.T) {
	e := engine(t)
	start := `{"nodeId":"start","type":"workflowStart"}`
	sel := `{"nodeId":"ask","type":"userSelect","inputs":{"userSelectOptions":[{"value":"Yes","key":"yes"}]}}`
	for _, tc := range []struct {
		name, graph, node, field, want string
	}{
		{"a branch no option has", `{"nodes":[` + start + `,` + sel + `,{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}],
			"edges":[{"source":"start","target":"ask"},{"source":"ask","target":"a","sourceHandle":"maybe"}]}`, "ask", "sourceHandle", `no branch "maybe" (its branches: yes)`},
		{"no options", `{"nodes":[` + start + `,{"nodeId":"ask","type":"userSelect","inputs":{"userSelectOptions":[]}}],
			"edges":[{"source":"start","target":"ask"}]}`, "ask", "userSelectOptions", "minItems"},
		{"a field of an unknown type", `{"nodes":[` + start + `,{"nodeId":"f","type":"formInput","inputs":{"userInputForms":[{"type":"colour","key":"c","label":"C"}]}}],
			"edges":[{"source":"start","target":"f"}]}`, "f", "userInputForms/0/type", "must be one of"},
		{"a field named like the result", `{"nodes":[` + start + `,{"nodeId":"f","type":"formInput","inputs":{"userInputForms":[{"type":"input","key":"formInputResult","label":"C"}]}}],
			"edges":[{"source":"start","target":"f"}]}`, "f", "userInputForms/0/key", "not"},
		{"a field not declared as output", `{"nodes":[` + start + `,{"nodeId":"f","type":"formInput","inputs":{"userInputForms":[{"type":"input","key":"name","label":"Name"}]}},
			{"nodeId":"a","type":"answerNode","inputs":{"text":"{{$f.name$}}"}}],
			"edges":[{"source":"start","target":"f"},{"source":"f","target":"a"}]}`, "a", "text", `no output "name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Check(graph(t, tc.graph))
			var invalid *nodes.ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Check = %v, want a refusal", err)
			}
			for _, p := range invalid.Problems {
				if p.NodeID == tc.node && p.Field == tc.field && strings.Contains(p.Message, tc.want) {
					return
				}
			}
			t.Fatalf("problems %+v, want one at node %q field %q saying %q", invalid.Problems, tc.node, tc.field, tc.want)
		})
	}
}

// TestPausedBeforeInteractiveNodesStillReads: a command approval stored
// before requests had kinds reads as one.
func TestPausedBeforeInteractiveNodesStillReads(t *testing.T) {
	var p nodes.Paused
	old := `{"nodeId":"tools","request":{"id":"apr_1","toolCallId":"call_1","tool":"sandbox_shell","command":"rm x","rule":"ask-rm","justification":"j","hint":""},
		"state":{"asked":0},"outputs":{"start":{"userChatInput":"q"}}}`
	if err := json.Unmarshal([]byte(old), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Request.IsApproval() || p.Request.Command != "rm x" || p.Request.ToolCallID != "call_1" || p.NodeID != "tools" {
		t.Fatalf("read %+v", p)
	}
}

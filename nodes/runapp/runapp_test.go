package runapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/runapp"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// world is an engine with the app-call node over a real app store.
type world struct {
	engine *nodes.Engine
	apps   *apps.Store
}

// ownerRules is the chat API's rule for the calling app's owner: their
// own apps and public ones; edit their own.
func ownerRules(_ context.Context, caller, called apps.App) (bool, bool, error) {
	own := caller.OwnerID == called.OwnerID
	return own || called.Public, own, nil
}

func newWorld(t *testing.T, maxNodeRuns int) *world {
	t.Helper()
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	store := apps.New(mongotest.DB(t), ts)
	e := &nodes.Engine{Templates: ts, Types: nodes.Builtins(nil), MaxNodeRuns: maxNodeRuns}
	e.Types["runApp"] = runapp.New(runapp.Config{Apps: store, Engine: e, Access: ownerRules})
	return &world{engine: e, apps: store}
}

func graph(t *testing.T, js string) nodes.Graph {
	t.Helper()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// answering is a graph that answers text (which may reference the
// question as {{$start.userChatInput$}}).
func answering(t *testing.T, text string) nodes.Graph {
	b, _ := json.Marshal(text)
	return graph(t, `{"nodes":[{"nodeId":"start","type":"workflowStart"},{"nodeId":"say","type":"answerNode","inputs":{"text":`+string(b)+`}}],
		"edges":[{"source":"start","target":"say"}]}`)
}

// calling is a graph that calls app with the question and extra inputs,
// then answers with what the app answered.
func calling(t *testing.T, app string, extra string) nodes.Graph {
	return graph(t, `{"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"call","type":"runApp","inputs":{"app":"`+app+`"`+extra+`}},
		{"nodeId":"say","type":"answerNode","inputs":{"text":"the app said: {{$call.answerText$}}"}}],
		"edges":[{"source":"start","target":"call"},{"source":"call","target":"say"}]}`)
}

func (w *world) put(t *testing.T, id, owner string, public bool, g nodes.Graph) {
	t.Helper()
	if err := w.apps.Put(context.Background(), apps.App{ID: id, Name: id, OwnerID: owner, Public: public, Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func (w *world) publish(t *testing.T, id string) apps.Version {
	t.Helper()
	v, err := w.apps.Publish(context.Background(), id, apps.Publication{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// run runs app's draft as a chat of alice's would, with history.
func (w *world) run(t *testing.T, app, question string, history ...llm.Message) (*nodes.Result, []nodes.Event) {
	t.Helper()
	a, err := w.apps.Get(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	var events []nodes.Event
	res, err := w.engine.Run(runapp.Turn(context.Background(), w.engine), &a.Graph, nodes.Chat{AppID: app, UserID: "u:alice", ChatID: "c", Question: question, History: history},
		func(ev nodes.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	return res, events
}

func output(res *nodes.Result, node string) map[string]any {
	for _, r := range res.Responses {
		if r.NodeID == node {
			return r.Outputs
		}
	}
	return nil
}

// TestCallRunsThePublishedVersion: the calling app answers with the
// called app's answer, from its published version, not its draft; a
// pinned version runs that version; the called app's answer streams into
// the caller's unless the node keeps it out.
func TestCallRunsThePublishedVersion(t *testing.T) {
	w := newWorld(t, 0)
	w.put(t, "inner", "u:alice", false, answering(t, "published inner heard {{$start.userChatInput$}}"))
	v1 := w.publish(t, "inner")
	w.put(t, "inner", "u:alice", false, answering(t, "second inner heard {{$start.userChatInput$}}"))
	v2 := w.publish(t, "inner")
	w.put(t, "inner", "u:alice", false, answering(t, "draft inner heard {{$start.userChatInput$}}"))

	w.put(t, "outer", "u:alice", false, calling(t, "inner", `,"history":2`))
	history := []llm.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "before"}, {Role: "user", Content: "last"}, {Role: "assistant", Content: "reply"}}
	res, events := w.run(t, "outer", "hello", history...)
	if res.Failed != "" {
		t.Fatalf("the run failed: %s", res.Failed)
	}
	want := "second inner heard hello\n\nthe app said: second inner heard hello"
	if res.Answer != want {
		t.Fatalf("answer %q, want %q", res.Answer, want)
	}
	var streamed []string
	for _, ev := range events {
		if d, ok := ev.Data.(nodes.AnswerDelta); ok && ev.NodeID == "call" {
			streamed = append(streamed, d.Text)
		}
	}
	if strings.Join(streamed, "") != "second inner heard hello" {
		t.Fatalf("the call node streamed %q, want the called app's answer", streamed)
	}
	out := output(res, "call")
	turns, _ := json.Marshal(out["history"])
	if wantTurns := `[{"content":"last","role":"user"},{"content":"reply","role":"assistant"},{"content":"hello","role":"user"},{"content":"second inner heard hello","role":"assistant"}]`; string(turns) != wantTurns {
		t.Fatalf("history output %s, want the last 2 messages and the new turn %s", turns, wantTurns)
	}
	for _, r := range res.Responses {
		if d, ok := r.Detail.(runapp.Detail); ok && (d.VersionID != v2.ID || len(d.Responses) != 2) {
			t.Fatalf("detail %+v, want version %s with the called app's 2 node responses (same owner)", d, v2.ID)
		}
	}

	// A pinned version; the answer kept out of the caller's.
	w.put(t, "outer", "u:alice", false, calling(t, "inner", `,"version":"`+v1.ID+`","system_forbid_stream":true`))
	res, _ = w.run(t, "outer", "again")
	if want := "the app said: published inner heard again"; res.Answer != want {
		t.Fatalf("pinned and quiet: answer %q, want %q", res.Answer, want)
	}
	w.put(t, "outer", "u:alice", false, calling(t, "inner", `,"version":"outer-v1"`))
	if res, _ = w.run(t, "outer", "x"); !strings.Contains(res.Failed, `app inner has no version "outer-v1"`) {
		t.Fatalf("another app's version pinned: failed %q, want no such version", res.Failed)
	}

	// An app never published runs its draft, as its chats do.
	w.put(t, "fresh", "u:alice", false, answering(t, "fresh draft"))
	w.put(t, "outer", "u:alice", false, calling(t, "fresh", ""))
	if res, _ = w.run(t, "outer", "x"); res.Answer != "fresh draft\n\nthe app said: fresh draft" {
		t.Fatalf("calling an unpublished app: answer %q", res.Answer)
	}
}

// TestCallDepth: apps that call each other in a circle stop at MaxDepth,
// saying so.
func TestCallDepth(t *testing.T) {
	w := newWorld(t, 0)
	w.put(t, "ping", "u:alice", false, calling(t, "pong", ""))
	w.put(t, "pong", "u:alice", false, calling(t, "ping", ""))
	res, _ := w.run(t, "ping", "hi")
	if !strings.Contains(res.Failed, fmt.Sprintf("apps may call one another at most %d deep", runapp.MaxDepth)) {
		t.Fatalf("failed %q, want the depth refusal", res.Failed)
	}
	// Each level's call failed with the level below it: depth 0 to 3.
	if n := strings.Count(res.Failed, "node call failed"); n != runapp.MaxDepth+1 {
		t.Fatalf("%d nested failures in %q, want %d", n, res.Failed, runapp.MaxDepth+1)
	}

	// Three deep is allowed: a chain that ends at depth 3 answers.
	w.put(t, "d1", "u:alice", false, calling(t, "d2", ""))
	w.put(t, "d2", "u:alice", false, calling(t, "d3", ""))
	w.put(t, "d3", "u:alice", false, answering(t, "bottom"))
	w.put(t, "top", "u:alice", false, calling(t, "d1", ",\"system_forbid_stream\":true"))
	// Each level answers with the answer below it, which it also streams.
	d2 := "bottom\n\nthe app said: bottom"
	d1 := d2 + "\n\nthe app said: " + d2
	if res, _ := w.run(t, "top", "hi"); res.Failed != "" || res.Answer != "the app said: "+d1 {
		t.Fatalf("a chain 3 deep: answer %q, failed %q; want %q", res.Answer, res.Failed, "the app said: "+d1)
	}
}

// TestCallAccess: an app calls only apps its owner may use: theirs and
// public ones, never another user's private app, whoever chats.
func TestCallAccess(t *testing.T) {
	w := newWorld(t, 0)
	w.put(t, "bobs-private", "u:bob", false, answering(t, "secret"))
	w.put(t, "bobs-public", "u:bob", true, answering(t, "open"))
	w.put(t, "outer", "u:alice", false, calling(t, "bobs-private", ""))
	res, _ := w.run(t, "outer", "hi")
	if !strings.Contains(res.Failed, `no app "bobs-private" that this app's owner may use`) || strings.Contains(res.Answer, "secret") {
		t.Fatalf("calling bob's private app: answer %q, failed %q; want a refusal", res.Answer, res.Failed)
	}
	w.put(t, "outer", "u:alice", false, calling(t, "no-such-app", ""))
	if res, _ := w.run(t, "outer", "hi"); !strings.Contains(res.Failed, `no app "no-such-app" that this app's owner may use`) {
		t.Fatalf("calling a missing app: failed %q", res.Failed)
	}
	w.put(t, "outer", "u:alice", false, calling(t, "bobs-public", ""))
	res, _ = w.run(t, "outer", "hi")
	if res.Failed != "" || res.Answer != "open\n\nthe app said: open" {
		t.Fatalf("calling bob's public app: answer %q, failed %q", res.Answer, res.Failed)
	}
	for _, r := range res.Responses {
		if d, ok := r.Detail.(runapp.Detail); ok && d.Responses != nil {
			t.Fatalf("alice's app shows the nodes of bob's app: %+v", d.Responses)
		}
	}
	// The rule is the calling app's owner's at every depth: bob's public
	// app calling bob's private one is bob's call.
	w.put(t, "bobs-public", "u:bob", true, calling(t, "bobs-private", ",\"system_forbid_stream\":true"))
	if res, _ := w.run(t, "outer", "hi"); res.Failed != "" || !strings.HasSuffix(res.Answer, "the app said: the app said: secret") {
		t.Fatalf("bob's app calling his own: answer %q, failed %q", res.Answer, res.Failed)
	}
}

// TestCallBudget: the called apps of one turn together, however deep,
// run no more nodes than the engine's bound.
func TestCallBudget(t *testing.T) {
	w := newWorld(t, 10)
	w.put(t, "inner", "u:alice", false, answering(t, "x")) // 2 nodes a call
	// Six calls in a row: 12 nested nodes, over the bound of 10.
	js := `{"nodes":[{"nodeId":"start","type":"workflowStart"}`
	edges := ""
	prev := "start"
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		js += `,{"nodeId":"` + id + `","type":"runApp","inputs":{"app":"inner","system_forbid_stream":true}}`
		edges += fmt.Sprintf(`%s{"source":%q,"target":%q}`, map[bool]string{true: "", false: ","}[i == 0], prev, id)
		prev = id
	}
	w.put(t, "outer", "u:alice", false, graph(t, js+`],"edges":[`+edges+`]}`))
	res, _ := w.run(t, "outer", "hi")
	if !strings.Contains(res.Failed, "node c5 failed: the apps this app calls ran 10 nodes in this turn") {
		t.Fatalf("failed %q, want the sixth call refused by the bound", res.Failed)
	}
	// Five calls fit.
	g := graph(t, js+`],"edges":[`+edges+`]}`)
	g.Nodes = g.Nodes[:6]
	g.Edges = g.Edges[:5]
	w.put(t, "outer", "u:alice", false, g)
	if res, _ := w.run(t, "outer", "hi"); res.Failed != "" {
		t.Fatalf("five calls of 2 nodes under a bound of 10: failed %q", res.Failed)
	}
	// The six calls moved one level down: the same bound, now for the
	// called app's own nodes (7) and those of the apps it calls (12).
	w.put(t, "middle", "u:alice", false, graph(t, js+`],"edges":[`+edges+`]}`))
	w.put(t, "outer", "u:alice", false, calling(t, "middle", ""))
	if res, _ := w.run(t, "outer", "hi"); !strings.Contains(res.Failed, "node call failed: the apps this app calls ran 10 nodes in this turn") {
		t.Fatalf("failed %q, want the nested calls refused by the bound", res.Failed)
	}
}

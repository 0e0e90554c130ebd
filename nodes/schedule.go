package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// How a graph runs (W7). A node waits for the nodes it depends on (the
// sources of its edges and the nodes its inputs reference) to end. It then
// runs when one of its incoming edges is active (its source took the
// edge's branch), or when it has no incoming edge; otherwise it is skipped
// and so are the edges leaving it. Nodes that are ready together run
// concurrently, each in its own goroutine; a scope's coordinator (the top
// graph, or one round of a loop's body) is the only goroutine that changes
// its nodes' states. A node that fails takes its catch branch when it has
// one; otherwise the run ends there, naming the node, and the nodes still
// running are cancelled. Events of every goroutine reach the caller's emit
// from the goroutine that called Run, in the order each node sent them.

// Run validates the graph and runs it. Events go to emit as they happen,
// from the calling goroutine only. The error is for a graph that cannot
// run at all (invalid) or a cancelled context; a failed node ends the run
// with Result.Failed instead.
func (e *Engine) Run(ctx context.Context, g *Graph, chat Chat, emit func(Event)) (*Result, error) {
	if err := e.Templates.Validate(g); err != nil {
		return nil, err
	}
	if chat.Resume == nil {
		if err := CheckVariables(g.Variables, chat.Variables); err != nil {
			return nil, err
		}
	}
	if emit == nil {
		emit = func(Event) {}
	}
	r := newRun(e, g, chat)
	top := r.scope("", nil)
	if chat.Resume != nil {
		top.restore(&chat.Resume.Paused)
	}
	done := make(chan scopeEnd, 1)
	go func() { done <- top.run(ctx) }()
	var end scopeEnd
	for waiting := true; waiting; {
		select {
		case it := <-r.events:
			r.deliver(it, emit)
		case end = <-done:
			waiting = false
		}
	}
	// Every sender has ended: what is left in the channel is all there is.
	for drained := false; !drained; {
		select {
		case it := <-r.events:
			r.deliver(it, emit)
		default:
			drained = true
		}
	}
	res := &Result{Answer: r.answer.String(), Responses: top.responses, Failed: end.failed}
	if p := end.paused; p != nil {
		res.Paused = top.paused(p)
	}
	return res, end.err
}

// run is one run of a graph, shared by its scopes.
type run struct {
	e        *Engine
	chat     Chat
	now      func() time.Time
	max      int
	children map[string][]*Node // loop node → its body, in declaration order
	declared []Variable
	top      []*Node
	edges    []Edge
	events   chan item

	mu      sync.Mutex
	outputs map[string]map[string]any
	vars    map[string]any
	runs    int
	keys    int
	resumed bool

	// The answer's order, kept by the goroutine that delivers events.
	answer   strings.Builder
	said     bool
	holder   int    // the node run whose answer is being streamed
	waiting  []item // node runs whose answer waits for the holder, in order
	buffered map[int]*strings.Builder
	ended    map[int]bool
}

// item is an event of one node run, or the end of that run.
type item struct {
	key   int
	node  *Node
	name  string
	data  EventData
	ended bool
}

func newRun(e *Engine, g *Graph, chat Chat) *run {
	r := &run{e: e, chat: chat, edges: g.Edges, declared: g.Variables, now: e.Now, max: e.MaxNodeRuns, children: map[string][]*Node{},
		events: make(chan item, 64), outputs: map[string]map[string]any{},
		buffered: map[int]*strings.Builder{}, ended: map[int]bool{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.max <= 0 {
		r.max = DefaultMaxNodeRuns
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.ParentNodeID == "" {
			r.top = append(r.top, n)
		} else {
			r.children[n.ParentNodeID] = append(r.children[n.ParentNodeID], n)
		}
	}
	r.vars = startVariables(g, chat, r.now())
	return r
}

// startVariables are the system variables, then the app's variables'
// defaults, then the values the chat gives.
func startVariables(g *Graph, chat Chat, now time.Time) map[string]any {
	history := make([]any, 0, len(chat.History))
	for _, m := range chat.History {
		history = append(history, map[string]any{"role": m.Role, "content": m.Content})
	}
	vars := map[string]any{"appId": chat.AppID, "chatId": chat.ChatID, "userId": chat.UserID,
		"cTime": now.Format("2006-01-02 15:04:05 Monday"), "histories": history}
	for _, v := range g.Variables {
		var def any
		if len(v.Default) > 0 && json.Unmarshal(v.Default, &def) == nil {
			vars[v.Key] = def
		}
	}
	for k, v := range chat.Variables {
		if _, system := SystemVariables[k]; !system {
			vars[k] = v
		}
	}
	if chat.Resume != nil {
		for k, v := range chat.Resume.Paused.Variables {
			vars[k] = v
		}
	}
	return vars
}

// value is what a reference stands for now.
func (r *run) value(ref Ref) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref.NodeID == VariablesNode {
		return r.vars[ref.Key]
	}
	return r.outputs[ref.NodeID][ref.Key]
}

func (r *run) variables() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]any, len(r.vars))
	for k, v := range r.vars {
		out[k] = v
	}
	return out
}

// count counts a node run against the bound; the text says why the run
// must end.
func (r *run) count() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	if r.runs > r.max {
		return fmt.Sprintf("the workflow ran %d nodes in this turn, the most one turn may run: a loop may run too many rounds, or the graph is too big", r.max)
	}
	return ""
}

// deliver hands an event to the caller. Answers are never interleaved:
// while one node run streams its answer, the answers of others wait and
// follow when it ends, each separated from the one before.
func (r *run) deliver(it item, emit func(Event)) {
	if it.ended {
		if r.buffered[it.key] != nil {
			r.ended[it.key] = true
		}
		if r.holder != it.key {
			return
		}
		r.holder = 0
		for len(r.waiting) > 0 {
			next := r.waiting[0]
			r.waiting = r.waiting[1:]
			r.take(next, emit)
			r.say(next, r.buffered[next.key].String(), emit)
			delete(r.buffered, next.key)
			if !r.ended[next.key] {
				return
			}
			delete(r.ended, next.key)
			r.holder = 0
		}
		return
	}
	a, ok := it.data.(AnswerDelta)
	if !ok {
		emit(Event{NodeID: it.node.NodeID, NodeName: it.name, Data: it.data})
		return
	}
	if r.holder == 0 {
		r.take(it, emit)
	}
	if r.holder == it.key {
		r.say(it, a.Text, emit)
		return
	}
	if r.buffered[it.key] == nil {
		r.buffered[it.key] = &strings.Builder{}
		r.waiting = append(r.waiting, it)
	}
	r.buffered[it.key].WriteString(a.Text)
}

// answerSeparator stands between the answers of two nodes.
const answerSeparator = "\n\n"

func (r *run) take(it item, emit func(Event)) {
	r.holder = it.key
	if r.said {
		r.say(it, answerSeparator, emit)
	}
}

func (r *run) say(it item, text string, emit func(Event)) {
	if text == "" {
		return
	}
	r.said = true
	r.answer.WriteString(text)
	emit(Event{NodeID: it.node.NodeID, NodeName: it.name, Data: AnswerDelta{Text: text}})
}

// The states of a node in a scope.
const (
	pending = iota
	running
	done
	skipped
)

// scope is the top graph, or one round of a loop's body.
type scope struct {
	r         *run
	nodes     []*Node
	in        map[string][]Edge
	out       map[string][]Edge
	deps      map[string][]string
	entry     map[string]any
	state     map[string]int
	taken     map[string][]string
	responses []NodeResponse
}

// scopeEnd is how a scope's run ended: all nodes done or skipped (zero),
// a failure, a pause, or the context's end.
type scopeEnd struct {
	failed string
	paused *pauseAt
	err    error
}

type pauseAt struct {
	node      *Node
	interrupt *Interrupt
}

// finished is a node run's end, sent to its scope's coordinator.
type finished struct {
	node *Node
	out  map[string]any
	err  error
	run  *NodeRun
	resp NodeResponse
	key  int
}

func (r *run) scope(parent string, entry map[string]any) *scope {
	nodes := r.top
	if parent != "" {
		nodes = r.children[parent]
	}
	s := &scope{r: r, nodes: nodes, in: map[string][]Edge{}, out: map[string][]Edge{}, deps: map[string][]string{},
		entry: entry, state: map[string]int{}, taken: map[string][]string{}}
	inScope := map[string]bool{}
	for _, n := range nodes {
		inScope[n.NodeID] = true
	}
	seen := map[[2]string]bool{}
	dep := func(from, to string) {
		if from != to && inScope[from] && !seen[[2]string{from, to}] {
			seen[[2]string{from, to}] = true
			s.deps[to] = append(s.deps[to], from)
		}
	}
	for _, e := range r.edges {
		if inScope[e.Source] && inScope[e.Target] {
			s.in[e.Target] = append(s.in[e.Target], e)
			s.out[e.Source] = append(s.out[e.Source], e)
			dep(e.Source, e.Target)
		}
	}
	for _, n := range nodes {
		for _, ref := range r.refsWithin(n) {
			dep(ref.NodeID, n.NodeID)
		}
	}
	return s
}

// refsWithin lists the references of a node's inputs and of its body's.
func (r *run) refsWithin(n *Node) []Ref {
	var out []Ref
	for _, raw := range n.Inputs {
		out = append(out, refsIn(raw)...)
	}
	for _, c := range r.children[n.NodeID] {
		out = append(out, r.refsWithin(c)...)
	}
	return out
}

// restore marks what a paused run had done before it paused.
func (s *scope) restore(p *Paused) {
	s.r.resumed = false
	for id, out := range p.Outputs {
		s.r.outputs[id] = out
		s.state[id] = done
		s.taken[id] = p.Taken[id]
	}
	for id := range p.Failed { // kept by runs paused before catch branches
		s.state[id] = skipped
	}
	for _, id := range p.Skipped {
		s.state[id] = skipped
	}
}

// paused is what a later run needs to go on from the pause.
func (s *scope) paused(p *pauseAt) *Paused {
	r := s.r
	out := &Paused{NodeID: p.node.NodeID, Request: p.interrupt.Request, State: p.interrupt.State,
		Outputs: map[string]map[string]any{}, Taken: map[string][]string{}, Variables: map[string]any{}}
	for _, n := range s.nodes {
		switch s.state[n.NodeID] {
		case done:
			out.Outputs[n.NodeID] = r.outputs[n.NodeID]
			if t := s.taken[n.NodeID]; t != nil {
				out.Taken[n.NodeID] = t
			}
		case skipped:
			out.Skipped = append(out.Skipped, n.NodeID)
		}
	}
	for k, v := range r.vars {
		if _, system := SystemVariables[k]; !system {
			out.Variables[k] = v
		}
	}
	return out
}

// settled reports whether every node n waits for has ended.
func (s *scope) settled(n *Node) bool {
	for _, d := range s.deps[n.NodeID] {
		if st := s.state[d]; st != done && st != skipped {
			return false
		}
	}
	return true
}

// reached reports whether n runs: it has no incoming edge, or one whose
// source ran and took its branch.
func (s *scope) reached(n *Node) bool {
	in := s.in[n.NodeID]
	if len(in) == 0 {
		return true
	}
	for _, e := range in {
		if s.state[e.Source] == done && took(s.taken[e.Source], e.SourceHandle) {
			return true
		}
	}
	return false
}

func took(branches []string, handle string) bool {
	if branches == nil {
		return handle == ""
	}
	for _, b := range branches {
		if b == handle {
			return true
		}
	}
	return false
}

func (s *scope) hasCatch(n *Node) bool {
	for _, e := range s.out[n.NodeID] {
		if e.SourceHandle == CatchBranch {
			return true
		}
	}
	return false
}

// run runs the scope's nodes until every one has ended or been skipped,
// or the run must stop.
func (s *scope) run(parent context.Context) scopeEnd {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	ends := make(chan finished)
	active := 0
	var end scopeEnd
	stopping := false
	for {
		for progress := true; progress && !stopping; {
			progress = false
			for _, n := range s.nodes {
				if s.state[n.NodeID] != pending || !s.settled(n) {
					continue
				}
				progress = true
				if !s.reached(n) {
					s.state[n.NodeID] = skipped
					continue
				}
				if why := s.r.count(); why != "" {
					end.failed, stopping = why, true
					cancel()
					break
				}
				s.state[n.NodeID] = running
				active++
				go s.exec(ctx, n, ends)
			}
		}
		if active == 0 {
			break
		}
		f := <-ends
		active--
		s.end(f, &end, &stopping, parent, cancel)
	}
	if end.failed == "" && end.paused == nil && end.err == nil && parent.Err() != nil {
		end.err = parent.Err()
	}
	return end
}

// end records a node run's end.
func (s *scope) end(f finished, end *scopeEnd, stopping *bool, parent context.Context, cancel func()) {
	r, n := s.r, f.node
	var pause *Interrupt
	switch {
	case errors.As(f.err, &pause):
		f.resp.Outputs = nil
		s.state[n.NodeID] = pending // it runs again, with the answer, when the run resumes
		if end.paused == nil && end.failed == "" && end.err == nil {
			end.paused = &pauseAt{node: n, interrupt: pause}
		}
		*stopping = true
	case f.err != nil && parent.Err() != nil:
		f.resp.Error = f.err.Error()
		s.state[n.NodeID] = skipped
		if end.err == nil {
			end.err = parent.Err()
		}
		*stopping = true
	case f.err != nil && *stopping && errors.Is(f.err, context.Canceled):
		// Cancelled because the run ends for another reason.
		f.resp.Error = f.err.Error()
		s.state[n.NodeID] = skipped
	case f.err != nil:
		msg := f.err.Error()
		f.resp.Error = msg
		r.events <- item{key: f.key, node: n, name: f.resp.Name, data: NodeError{Message: fmt.Sprintf("node %s: %s", f.resp.Name, msg)}}
		if s.hasCatch(n) {
			r.mu.Lock()
			r.outputs[n.NodeID] = map[string]any{"error": msg}
			r.mu.Unlock()
			s.state[n.NodeID] = done
			s.taken[n.NodeID] = []string{CatchBranch}
			f.resp.Branches = s.taken[n.NodeID]
			break
		}
		s.state[n.NodeID] = skipped
		if end.failed == "" {
			end.failed = fmt.Sprintf("node %s failed: %s", f.resp.Name, msg)
		}
		*stopping = true
		cancel()
	default:
		r.mu.Lock()
		r.outputs[n.NodeID] = f.out
		for k, v := range f.run.SetVariables {
			r.vars[k] = v
		}
		r.mu.Unlock()
		s.state[n.NodeID] = done
		s.taken[n.NodeID] = f.run.Branches
	}
	s.responses = append(s.responses, f.resp)
	r.events <- item{key: f.key, node: n, name: f.resp.Name, data: NodeDone{Response: f.resp}}
}

// exec runs one node, in its own goroutine.
func (s *scope) exec(ctx context.Context, n *Node, ends chan<- finished) {
	r := s.r
	r.mu.Lock()
	r.keys++
	key := r.keys
	resume := r.chat.Resume != nil && !r.resumed && r.chat.Resume.Paused.NodeID == n.NodeID && n.ParentNodeID == ""
	if resume {
		r.resumed = true
	}
	r.mu.Unlock()
	name := n.Name
	if name == "" {
		name = n.NodeID
	}
	send := func(d EventData) { r.events <- item{key: key, node: n, name: name, data: d} }
	resp := NodeResponse{NodeID: n.NodeID, Name: name, Type: n.Type}
	t := r.e.Templates[n.Type]
	inputs, err := resolve(t.withDefaults(n.Inputs), r.value)
	if err == nil {
		err = t.validateValues(inputs)
	}
	resp.Inputs = inputs
	nr := &NodeRun{Node: n, Inputs: inputs, Chat: r.chat, Emit: send, Variables: r.variables(), Declared: r.declared}
	if n.Type == "loopStart" {
		nr.Entry = s.entry
	}
	if resume {
		p := r.chat.Resume
		nr.Resume = &NodeResume{Request: p.Paused.Request, State: p.Paused.State, Answer: p.Answer}
	}
	if len(r.children[n.NodeID]) > 0 {
		nr.Body = func(ctx context.Context, entry map[string]any) (map[string]any, []NodeResponse, error) {
			return r.body(ctx, n, entry)
		}
	}
	start := r.now()
	var out map[string]any
	if err == nil {
		send(NodeStatus{Status: StatusRunning})
		if typ := r.e.Types[n.Type]; typ == nil {
			err = fmt.Errorf("node type %q is declared but not installed in this engine", n.Type)
		} else {
			out, err = typ.Run(ctx, nr)
			resp.Outputs, resp.Detail, resp.Error, resp.Tokens = out, nr.Detail, nr.Warning, nr.Tokens
			resp.PromptTokens, resp.CompletionTokens = nr.PromptTokens, nr.CompletionTokens
		}
	}
	resp.RunningTime = r.now().Sub(start).Seconds()
	resp.Branches = nr.Branches
	r.events <- item{key: key, ended: true}
	ends <- finished{node: n, out: out, err: err, run: nr, resp: resp, key: key}
}

// body runs a loop node's children once.
func (r *run) body(ctx context.Context, parent *Node, entry map[string]any) (map[string]any, []NodeResponse, error) {
	s := r.scope(parent.NodeID, entry)
	end := s.run(ctx)
	switch {
	case end.err != nil:
		return nil, s.responses, end.err
	case end.paused != nil:
		return nil, s.responses, fmt.Errorf("node %s waits for a person, which a node inside a loop cannot do", end.paused.node.NodeID)
	case end.failed != "":
		return nil, s.responses, errors.New(end.failed)
	}
	for _, n := range s.nodes {
		if n.Type == "loopEnd" && s.state[n.NodeID] == done {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.outputs[n.NodeID], s.responses, nil
		}
	}
	return nil, s.responses, nil
}

// resolve turns raw inputs into values, replacing the references in their
// strings, at any depth, with what they stand for: a string that is
// exactly one reference takes the referenced value with its type;
// references inside a longer string are replaced by the value's text.
func resolve(raw map[string]json.RawMessage, value func(Ref) any) (map[string]any, error) {
	values := make(map[string]any, len(raw))
	for key, r := range raw {
		var v any
		if err := json.Unmarshal(r, &v); err != nil {
			return nil, fmt.Errorf("input %q: %w", key, err)
		}
		values[key] = resolveValue(v, value)
	}
	return values, nil
}

// RunNode runs one node of g by itself, as a builder tries a node out
// (W4): values give inputs by key, in place of the node's own (typically
// what its references would have given); the other inputs are the node's,
// with references to other nodes standing for nothing and variables
// taken from the chat. Events go to emit from the calling goroutine. A
// node that needs a person, or one that holds other nodes, cannot run by
// itself.
func (e *Engine) RunNode(ctx context.Context, g *Graph, nodeID string, values map[string]any, chat Chat, emit func(Event)) (NodeResponse, error) {
	if err := e.Templates.Validate(g); err != nil {
		return NodeResponse{}, err
	}
	var n *Node
	for i := range g.Nodes {
		if g.Nodes[i].NodeID == nodeID {
			n = &g.Nodes[i]
		}
	}
	if n == nil {
		return NodeResponse{}, fmt.Errorf("the workflow has no node %q; save the canvas first", nodeID)
	}
	if emit == nil {
		emit = func(Event) {}
	}
	r := newRun(e, g, chat)
	if len(r.children[n.NodeID]) > 0 {
		return NodeResponse{}, fmt.Errorf("node %s holds other nodes and runs only in a whole run", nodeID)
	}
	// The start gives the chat's question, as in a whole run.
	for _, s := range r.top {
		if s.Type == "workflowStart" {
			r.outputs[s.NodeID] = map[string]any{"userChatInput": chat.Question}
		}
	}
	name := n.Name
	if name == "" {
		name = n.NodeID
	}
	resp := NodeResponse{NodeID: n.NodeID, Name: name, Type: n.Type}
	t := e.Templates[n.Type]
	inputs, err := resolve(t.withDefaults(n.Inputs), r.value)
	for k, v := range values {
		if inputs != nil {
			inputs[k] = v
		}
	}
	if err == nil {
		err = t.validateValues(inputs)
	}
	resp.Inputs = inputs
	if err != nil {
		resp.Error = err.Error()
		return resp, nil
	}
	typ := e.Types[n.Type]
	if typ == nil {
		return resp, fmt.Errorf("node type %q is declared but not installed in this engine", n.Type)
	}
	nr := &NodeRun{Node: n, Inputs: inputs, Chat: chat, Variables: r.variables(),
		Emit: func(d EventData) { emit(Event{NodeID: n.NodeID, NodeName: name, Data: d}) }}
	if n.Type == "loopStart" {
		nr.Entry = map[string]any{}
	}
	start := r.now()
	out, err := typ.Run(ctx, nr)
	resp.RunningTime = r.now().Sub(start).Seconds()
	resp.Outputs, resp.Detail, resp.Tokens, resp.Branches = out, nr.Detail, nr.Tokens, nr.Branches
	resp.PromptTokens, resp.CompletionTokens = nr.PromptTokens, nr.CompletionTokens
	var pause *Interrupt
	switch {
	case errors.As(err, &pause):
		resp.Outputs = nil
		resp.Error = "the node waits for a person, which it cannot do when it runs by itself; try it in a debug run"
	case err != nil && ctx.Err() != nil:
		return resp, ctx.Err()
	case err != nil:
		resp.Error = err.Error()
	case nr.Warning != "":
		resp.Error = nr.Warning
	}
	return resp, nil
}

// resolveValue resolves the strings of v, a value of its own that it
// changes in place; the values references stand for are not walked.
func resolveValue(v any, value func(Ref) any) any {
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, refMark) {
			return v
		}
		if ref, ok := pureRefIn(v); ok {
			return value(ref)
		}
		return refRe.ReplaceAllStringFunc(v, func(m string) string {
			sub := refRe.FindStringSubmatch(m)
			return Text(value(Ref{NodeID: sub[1], Key: sub[2]}))
		})
	case []any:
		for i, x := range v {
			v[i] = resolveValue(x, value)
		}
	case map[string]any:
		for k, x := range v {
			v[k] = resolveValue(x, value)
		}
	}
	return v
}

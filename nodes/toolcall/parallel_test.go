package toolcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// probe is an extra tool that records how many of its calls run at once.
// A concurrency-safe probe waits, up to a bound, until want calls are in
// flight together, so that calls run one after another show as one in
// flight instead of passing by luck of timing.
type probe struct {
	name string
	safe bool
	want int
	fail bool

	mu       sync.Mutex
	inFlight int
	most     int
	started  chan struct{}
}

func (p *probe) tool() registry.Tool {
	return registry.Tool{Name: "probe:" + p.name, ModelName: p.name, Description: "a probe", ConcurrencySafe: p.safe,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"}}}`), Run: p.run}
}

func (p *probe) run(ctx context.Context, call registry.Call) (registry.Result, error) {
	p.mu.Lock()
	p.inFlight++
	p.most = max(p.most, p.inFlight)
	p.mu.Unlock()
	p.started <- struct{}{}
	defer func() { p.mu.Lock(); p.inFlight--; p.mu.Unlock() }()
	if p.safe {
		deadline := time.After(5 * time.Second)
		for {
			p.mu.Lock()
			n := p.most
			p.mu.Unlock()
			if n >= p.want {
				break
			}
			select {
			case <-deadline:
				return registry.Result{Text: "alone"}, nil
			case <-time.After(5 * time.Millisecond):
			}
		}
	} else {
		time.Sleep(30 * time.Millisecond) // room for an overlap to show
	}
	if p.fail && strings.Contains(string(call.Params), `"n":2`) {
		return registry.Result{Text: "call 2 failed", IsError: true}, nil
	}
	return registry.Result{Text: "done " + string(call.Params)}, nil
}

// probes is a registry backend of probes, found by their bare names.
type probes []*probe

func (probes) Prefix() string { return "probe" }

func (ps probes) Tools(context.Context, sandbox.Scope) ([]registry.Tool, error) {
	var out []registry.Tool
	for _, p := range ps {
		out = append(out, p.tool())
	}
	return out, nil
}

// TestParallelToolCalls: concurrency-safe calls of one round run
// together (bounded), others one at a time; the results go back in the
// model's order, and a failing call leaves the others' results.
func TestParallelToolCalls(t *testing.T) {
	safe := &probe{name: "lookup", safe: true, want: 3, fail: true, started: make(chan struct{}, 16)}
	unsafe := &probe{name: "write_db", started: make(chan struct{}, 16)}
	calls := func(name string, n int) []llm.ToolCall {
		var out []llm.ToolCall
		for i := 1; i <= n; i++ {
			out = append(out, llmtest.Call(fmt.Sprintf("call_%s_%d", name, i), name, fmt.Sprintf(`{"n":%d}`, i)))
		}
		return out
	}
	f := newFixtureWith(t, nil, func(c *toolcall.Config) { ps := probes{safe, unsafe}; c.Tools = registry.New(ps, ps) },
		llmtest.Reply{ToolCalls: append(calls("lookup", 3), calls("write_db", 2)...)},
		llmtest.Reply{Text: "ok"})
	res, events := f.run(t, app(t, `{"model":"m","useAgentSandbox":false,"tools":["lookup","write_db"]}`), nodes.Chat{ChatID: "c"})
	if res.Answer == "" {
		t.Fatalf("no answer: %+v", res)
	}
	if safe.most != 3 {
		t.Errorf("the 3 concurrency-safe calls ran %d at most at once, want 3", safe.most)
	}
	if unsafe.most != 1 {
		t.Errorf("calls that are not concurrency-safe overlapped: %d at once", unsafe.most)
	}
	reqs := f.model.Requests()
	got := toolMessages(reqs[len(reqs)-1])
	want := []string{"call_lookup_1", "call_lookup_2", "call_lookup_3", "call_write_db_1", "call_write_db_2"}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m.ToolCallID != want[i] {
			t.Errorf("result %d is for %s, want %s (the model's order)", i, m.ToolCallID, want[i])
		}
	}
	if !strings.Contains(got[1].Content, "call 2 failed") || !strings.Contains(got[0].Content, `done {\"n\":1}`) || !strings.Contains(got[2].Content, "done") {
		t.Errorf("results %v", got)
	}
	// Every call has its card: started and ended.
	ended := map[string]registry.Status{}
	for _, ev := range events {
		if r, ok := ev.Data.(nodes.ToolResult); ok {
			ended[r.ID] = r.Status
		}
	}
	for _, id := range want {
		if ended[id] == "" {
			t.Errorf("no result event for %s", id)
		}
	}
	if ended["call_lookup_2"] != "failed" || ended["call_lookup_1"] != "success" {
		t.Errorf("statuses %v", ended)
	}
}

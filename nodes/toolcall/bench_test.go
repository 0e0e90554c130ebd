package toolcall_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// timedModel and timedSandbox measure the time spent in the model and in
// the sandbox, so that what remains of a run is the engine's own.
type timedModel struct {
	llm.Model
	spent *atomic.Int64
}

func (m timedModel) Complete(ctx context.Context, req llm.Request, onText func(string)) (llm.Response, error) {
	start := time.Now()
	defer func() { m.spent.Add(int64(time.Since(start))) }()
	return m.Model.Complete(ctx, req, onText)
}

type timedModels struct {
	m     llm.Model
	spent *atomic.Int64
}

func (t timedModels) Model(string) (llm.Model, error) { return timedModel{t.m, t.spent}, nil }

type timedSandbox struct {
	*sandbox.Manager
	spent *atomic.Int64
}

func (t timedSandbox) Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	start := time.Now()
	defer func() { t.spent.Add(int64(time.Since(start))) }()
	return t.Manager.Exec(ctx, scope, req)
}

// BenchmarkToolRoundOverhead runs chats of one tool round each (the model
// calls sandbox_shell `true`, then answers), 50 at once, on bwrap with a
// scripted model over HTTP, and reports the engine's own time per round:
// the run's wall time less the time in the model and in the sandbox.
//
//	go test -run '^$' -bench ToolRoundOverhead -benchtime 500x ./nodes/toolcall/
func BenchmarkToolRoundOverhead(b *testing.B) {
	const chats = 50
	m := newManager(b, "")
	replies := make([]llmtest.Reply, 0, 2*b.N)
	for i := 0; i < b.N; i++ {
		replies = append(replies,
			llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(fmt.Sprint("c", i), "sandbox_shell", `{"command":"true"}`)}},
			llmtest.Reply{Text: "ok"})
	}
	// One scripted endpoint per chat keeps each chat's replies in order.
	type runner struct {
		engine       *nodes.Engine
		model, shell *atomic.Int64
	}
	ts, err := nodes.LoadTemplates()
	if err != nil {
		b.Fatal(err)
	}
	runners := make([]runner, chats)
	for i := range runners {
		srv := llmtest.New(b, replies...)
		client, _ := llm.NewClient(llm.Config{BaseURL: srv.BaseURL})
		r := runner{model: new(atomic.Int64), shell: new(atomic.Int64)}
		models := timedModels{client, r.model}
		types := nodes.Builtins(models)
		types["tools"] = toolcall.New(toolcall.Config{Models: models, Tools: registry.New(nil, registry.Shell{Sandboxes: timedSandbox{m, r.shell}})})
		r.engine = &nodes.Engine{Templates: ts, Types: types}
		runners[i] = r
	}
	g := app(b, `{"useAgentSandbox":true}`)
	var mu sync.Mutex
	var overheads []time.Duration
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := 0; c < chats; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := runners[c]
			chat := nodes.Chat{AppID: "bench", UserID: "u", ChatID: fmt.Sprint("chat-", c)}
			for next.Add(1) <= int64(b.N) {
				m0, s0 := r.model.Load(), r.shell.Load()
				start := time.Now()
				res, err := r.engine.Run(context.Background(), g, chat, nil)
				total := time.Since(start)
				if err != nil || res.Responses[1].Error != "" {
					b.Errorf("run: %v %+v", err, res)
					return
				}
				own := total - time.Duration(r.model.Load()-m0) - time.Duration(r.shell.Load()-s0)
				mu.Lock()
				overheads = append(overheads, own)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	b.StopTimer()
	for c := 0; c < chats; c++ {
		m.Delete(context.Background(), sandbox.IDFor("bench", "u", fmt.Sprint("chat-", c)))
	}
	sort.Slice(overheads, func(i, j int) bool { return overheads[i] < overheads[j] })
	if len(overheads) > 0 {
		b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds()), "µs-engine-p50/round")
		b.ReportMetric(float64(overheads[len(overheads)*99/100].Microseconds()), "µs-engine-p99/round")
	}
}

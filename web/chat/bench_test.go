package chat

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// BenchmarkSSERelay measures the latency the chat API adds between an event
// leaving the engine and a client reading it off the SSE stream, with 50
// chats streaming at once (scripted model, detail events on). The baseline
// "history=off" runs the same 50 chats with a history that stores nothing,
// to show what the database's share of the machine costs the relay.
//
//	go test -run '^$' -bench SSERelay -benchtime 300x ./web/
func BenchmarkSSERelay(b *testing.B) {
	for _, tc := range []struct {
		chats   int
		history bool
	}{{1, true}, {50, true}, {50, false}} {
		name := fmt.Sprintf("chats=%d", tc.chats)
		if !tc.history {
			name += ",history=off"
		}
		b.Run(name, func(b *testing.B) { benchRelay(b, tc.chats, tc.history) })
	}
}

// forgetful is a chat history that keeps nothing.
type forgetful struct{}

func (forgetful) Open(ctx context.Context, chat sandbox.Scope) (history.Chat, error) {
	return history.Of(chat), nil
}

func (forgetful) AppendTurn(ctx context.Context, chat history.Chat, question, answer history.Item, now time.Time) (history.Chat, error) {
	return chat, nil
}

func benchRelay(b *testing.B, chats int, keepHistory bool) {
	replies := make([]llmtest.Reply, b.N+1)
	for i := range replies {
		replies[i] = llmtest.Reply{Text: "a streamed answer of a few words"}
	}
	e := newChatEnv(b, replies...)
	// One turn creates the collections; the embedded database indexes
	// them within seconds, here at once, as a running engine has them.
	resp := e.post(b, context.Background(), benchKey, `{"appId":"scripted","chatId":"warm-up","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	readSSE(b, resp.Body, func(sseEvent) bool { return true })
	resp.Body.Close()
	mongotest.IndexIDs(b)
	h := e.handler
	if !keepHistory {
		h.History = forgetful{}
	}
	var mu sync.Mutex
	emitted := map[string][]time.Time{}
	h.trace = func(chatID string, at time.Time) {
		mu.Lock()
		emitted[chatID] = append(emitted[chatID], at)
		mu.Unlock()
	}
	var relays []time.Duration
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := 0; c < chats; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				chatID := fmt.Sprintf("relay-%d-%d", c, n)
				resp := e.post(b, context.Background(), benchKey, fmt.Sprintf(`{"appId":"scripted","chatId":%q,"stream":true,"detail":true,"messages":[{"role":"user","content":"hi"}]}`, chatID))
				var received []time.Time
				readSSE(b, resp.Body, func(sseEvent) bool { received = append(received, time.Now()); return true })
				resp.Body.Close()
				mu.Lock()
				for i, at := range emitted[chatID] {
					if i < len(received) {
						relays = append(relays, received[i].Sub(at))
					}
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(relays, func(i, j int) bool { return relays[i] < relays[j] })
	if len(relays) == 0 {
		b.Fatal("no events relayed")
	}
	b.ReportMetric(float64(relays[len(relays)/2].Microseconds()), "µs-relay-p50")
	b.ReportMetric(float64(relays[len(relays)*99/100].Microseconds()), "µs-relay-p99")
	b.ReportMetric(float64(len(relays))/float64(b.N), "events/chat")
}

// This benchmark measures the chat Handler alone, by design: it
// serves the handler on a router of its own, to swap in a history that
// keeps nothing (the baseline) and to hook the handler's unexported trace.
// Every test goes through the product's router instead (chat_api_test.go).

// benchKey is the service key of the benchmark's handler.
const benchKey = "test-key"

type chatEnv struct {
	srv     *httptest.Server
	handler *Handler
}

// newChatEnv serves the chat API alone, with the demo app and a
// "scripted" app whose tool-call node talks to a scripted endpoint, on
// bwrap sandboxes with their records in a database of the benchmark's own.
func newChatEnv(tb testing.TB, replies ...llmtest.Reply) *chatEnv {
	tb.Helper()
	ctx := context.Background()
	p, err := bwrap.New(bwrap.Config{Root: tb.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		tb.Fatal(err)
	}
	testenv.Need(tb, "bwrap", p.Fingerprint(ctx))
	db := mongotest.DB(tb)
	store, err := mongostore.New(ctx, db, nil)
	if err != nil {
		tb.Fatal(err)
	}
	manager, err := sandbox.New(sandbox.Config{Provider: p, Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	model := llmtest.New(tb, replies...)
	resolver := &llm.Resolver{Endpoint: llm.Config{BaseURL: model.BaseURL, RetryBase: time.Millisecond}}
	ts, err := nodes.LoadTemplates()
	if err != nil {
		tb.Fatal(err)
	}
	types := nodes.Builtins(resolver)
	types["tools"] = toolcall.New(toolcall.Config{Models: resolver, Tools: registry.New(nil, registry.Shell{Sandboxes: manager})})
	appStore := apps.New(db, ts)
	if err := appStore.EnsureDemo(ctx, "admin", time.Now()); err != nil {
		tb.Fatal(err)
	}
	scripted := apps.DemoGraph()
	scripted.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	if err := appStore.Put(ctx, apps.App{ID: "scripted", Name: "scripted", Graph: scripted}, time.Now()); err != nil {
		tb.Fatal(err)
	}
	h := &Handler{Engine: &nodes.Engine{Templates: ts, Types: types}, Apps: appStore, History: history.New(db),
		APIKey: benchKey, DefaultApp: apps.DemoAppID, Now: time.Now, Log: slog.Default()}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/api/v1/chat/completions", h.Completions)
	srv := httptest.NewServer(r)
	tb.Cleanup(srv.Close)
	return &chatEnv{srv: srv, handler: h}
}

func (e *chatEnv) post(tb testing.TB, ctx context.Context, key, body string) *http.Response {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/api/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

type sseEvent struct {
	Event string
	Data  string
}

// readSSE reads events until the stream ends or each returns false.
func readSSE(tb testing.TB, r io.Reader, each func(sseEvent) bool) {
	tb.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		case line == "":
			if !each(ev) {
				return
			}
			ev = sseEvent{}
		}
	}
}

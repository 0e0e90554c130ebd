package web

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes/history"
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

func (forgetful) Owned(ctx context.Context, chatID, appID, userID string) (history.Chat, error) {
	return history.Chat{ID: chatID, AppID: appID, UserID: userID}, nil
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
	resp := e.post(b, context.Background(), "test-key", `{"appId":"scripted","chatId":"warm-up","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
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
				resp := e.post(b, context.Background(), "test-key", fmt.Sprintf(`{"appId":"scripted","chatId":%q,"stream":true,"detail":true,"messages":[{"role":"user","content":"hi"}]}`, chatID))
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

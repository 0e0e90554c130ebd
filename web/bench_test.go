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
)

// BenchmarkSSERelay measures the latency the chat API adds between an event
// leaving the engine and a client reading it off the SSE stream, with 50
// chats streaming at once (scripted model, detail events on).
//
//	go test -run '^$' -bench SSERelay -benchtime 500x ./web/
func BenchmarkSSERelay(b *testing.B) {
	for _, chats := range []int{1, 50} {
		b.Run(fmt.Sprintf("chats=%d", chats), func(b *testing.B) { benchRelay(b, chats) })
	}
}

func benchRelay(b *testing.B, chats int) {
	replies := make([]llmtest.Reply, b.N)
	for i := range replies {
		replies[i] = llmtest.Reply{Text: "a streamed answer of a few words"}
	}
	e := newChatEnv(b, replies...)
	h := e.handler
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

package history_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// BenchmarkItems reads whole chats of 100 and 200 turns beside a chat of 2
// turns, in the same run (on the embedded database, or the server
// FLOWBOX_TEST_MONGODB_URI names). A chat's page reads at most its
// last 100 turns at first (web/ui, pageWindow).
//
//	go test -run '^$' -bench BenchmarkItems ./chats/history
func BenchmarkItems(b *testing.B) {
	s := history.New(mongotest.DB(b))
	ctx := context.Background()
	output := strings.Repeat("-rw-r--r-- 1 flowbox flowbox 4096 Nov 28 12:00 results.csv\n", 36)
	for _, turns := range []int{2, 100, 200} {
		chat, err := s.Open(ctx, scope("app", "alice", fmt.Sprint("chat-", turns)))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < turns; i++ {
			if chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprint("question ", i)},
				history.Item{Role: "assistant", Text: "## answer\n\n" + output}, t0); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprint("turns=", turns), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				items, err := s.Items(ctx, chat, 0, 500)
				if err != nil || len(items) != 2*turns {
					b.Fatalf("%d items, %v", len(items), err)
				}
			}
		})
	}
}

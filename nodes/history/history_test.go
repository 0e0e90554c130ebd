package history_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/nodes/history"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func TestTurnsAreRecordedAndReloaded(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, err := s.Owned(ctx, "chat-1", "app", "alice")
	if err != nil || chat.Items != 0 {
		t.Fatalf("a new chat: %+v, %v", chat, err)
	}
	calls := json.RawMessage(`[{"id":"c1","toolName":"sandbox_shell","params":"{\"command\":\"ls\"}","response":"{\"exitCode\":0}","durationMs":12}]`)
	chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "list the files\nplease"},
		history.Item{Role: "assistant", Text: "there are none", ToolCalls: calls, DurationMs: 40}, t0)
	if err != nil {
		t.Fatal(err)
	}
	chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "thanks"}, history.Item{Role: "assistant", Text: "you're welcome"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Owned(ctx, "chat-1", "app", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "list the files" || got.Items != 4 || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("chat = %+v", got)
	}
	want := []llm.Message{{Role: "assistant", Content: "there are none"}, {Role: "user", Content: "thanks"}, {Role: "assistant", Content: "you're welcome"}}
	if fmt.Sprint(got.History(3)) != fmt.Sprint(want) {
		t.Fatalf("History(3) = %+v, want %+v", got.History(3), want)
	}
	items, err := s.Items(ctx, got, 0, 10)
	if err != nil || len(items) != 4 {
		t.Fatalf("items = %+v, %v", items, err)
	}
	if items[1].Text != "there are none" || items[1].Seq != 1 || items[1].DurationMs != 40 || string(items[1].ToolCalls) != string(calls) {
		t.Fatalf("answer item = %+v, want its tool calls and duration", items[1])
	}
	if page, _ := s.Items(ctx, got, 2, 1); len(page) != 1 || page[0].Text != "thanks" {
		t.Fatalf("page from 2 = %+v", page)
	}
}

func TestOwnership(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Owned(ctx, "c", "app", "alice")
	if _, err := s.AppendTurn(ctx, chat, history.Item{Text: "q"}, history.Item{Text: "a"}, t0); err != nil {
		t.Fatal(err)
	}
	for _, who := range [][2]string{{"app", "mallory"}, {"other-app", "alice"}} {
		if _, err := s.Owned(ctx, "c", who[0], who[1]); !errors.Is(err, history.ErrNotOwner) {
			t.Errorf("Owned by %v: err = %v, want ErrNotOwner", who, err)
		}
	}
}

func TestConcurrentTurnsKeepEveryItem(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Owned(ctx, "busy", "app", "u")
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprint("q", i)}, history.Item{Role: "assistant", Text: fmt.Sprint("a", i)}, t0); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	got, _ := s.Get(ctx, "busy")
	items, _ := s.Items(ctx, got, 0, 100)
	if len(items) != 20 {
		t.Fatalf("%d items stored, want 20", len(items))
	}
	seen := map[string]bool{}
	for i, it := range items {
		if it.Seq != i || seen[it.Text] {
			t.Fatalf("item %d = %+v: seqs must be dense and every message kept once", i, it)
		}
		seen[it.Text] = true
	}
}

func TestRecentIsBounded(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Owned(ctx, "long", "app", "u")
	for i := 0; i < 110; i++ {
		chat, _ = s.AppendTurn(ctx, chat, history.Item{Text: fmt.Sprint("q", i)}, history.Item{Text: fmt.Sprint("a", i)}, t0)
	}
	got, _ := s.Get(ctx, "long")
	if len(got.Recent) > 200 || got.Recent[len(got.Recent)-1].Content != "a109" || got.Items != 220 {
		t.Fatalf("recent has %d messages ending %q, items %d", len(got.Recent), got.Recent[len(got.Recent)-1].Content, got.Items)
	}
}

func TestDelete(t *testing.T) {
	db := mongotest.DB(t)
	s := history.New(db)
	ctx := context.Background()
	chat, _ := s.Owned(ctx, "gone", "app", "u")
	s.AppendTurn(ctx, chat, history.Item{Text: "q"}, history.Item{Text: "a"}, t0)
	keep, _ := s.Owned(ctx, "kept", "app", "u")
	s.AppendTurn(ctx, keep, history.Item{Text: "q"}, history.Item{Text: "a"}, t0)
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "gone"); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if n, _ := db.Collection(history.ItemsCollection).CountDocuments(ctx, map[string]any{"chatId": "gone"}); n != 0 {
		t.Fatalf("%d items of the deleted chat remain", n)
	}
	if n, _ := db.Collection(history.ItemsCollection).CountDocuments(ctx, map[string]any{"chatId": "kept"}); n != 2 {
		t.Fatalf("the other chat has %d items, want 2", n)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

package history_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

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
		history.Item{Role: "assistant", ResponseChatItemID: "reply-1", Text: "there are none", ToolCalls: calls, DurationMs: 40}, t0)
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
	if ids := [4]string{items[0].ResponseChatItemID, items[1].ResponseChatItemID, items[2].ResponseChatItemID, items[3].ResponseChatItemID}; ids != [4]string{"", "reply-1", "", ""} {
		t.Fatalf("responseChatItemIds = %q, want only the first answer's (reply-1)", ids)
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
	if len(got.Recent) < 4 {
		t.Errorf("recent has %d messages; the turns that found the chat created keep theirs and the first turn's", len(got.Recent))
	}
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
	if kept, _ := s.Get(ctx, "kept"); len(must(s.Items(ctx, kept, 0, 10))) != 2 {
		t.Fatalf("the other chat has lost items")
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestItemsPageFromAnAnswer(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Owned(ctx, "paged", "app", "u")
	for i := 0; i < 3; i++ {
		chat, _ = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprint("q", i)}, history.Item{Role: "assistant", Text: fmt.Sprint("a", i)}, t0)
	}
	for _, tc := range []struct {
		from, limit int
		want        string
	}{{0, 10, "[q0 a0 q1 a1 q2 a2]"}, {1, 2, "[a0 q1]"}, {3, 10, "[a1 q2 a2]"}, {5, 1, "[a2]"}, {6, 10, "[]"}} {
		items, err := s.Items(ctx, chat, tc.from, tc.limit)
		var texts []string
		for i, it := range items {
			if it.Seq != tc.from+i {
				t.Errorf("Items(%d, %d)[%d].Seq = %d, want %d", tc.from, tc.limit, i, it.Seq, tc.from+i)
			}
			texts = append(texts, it.Text)
		}
		if err != nil || fmt.Sprint(texts) != tc.want {
			t.Errorf("Items(%d, %d) = %v, %v; want %s", tc.from, tc.limit, texts, err, tc.want)
		}
	}
}

// Chats written when every item was a document of its own still load,
// and continue after their last item.
func TestChatsOfTheItemPerDocumentLayoutLoadAndContinue(t *testing.T) {
	db := mongotest.DB(t)
	s := history.New(db)
	ctx := context.Background()
	_, err := db.Collection(history.ChatsCollection).InsertOne(ctx, bson.D{
		{Key: "_id", Value: "old"}, {Key: "appId", Value: "app"}, {Key: "userId", Value: "u"}, {Key: "title", Value: "ls"},
		{Key: "items", Value: 2}, {Key: "createdAt", Value: t0}, {Key: "updatedAt", Value: t0},
		{Key: "recent", Value: bson.A{bson.D{{Key: "role", Value: "user"}, {Key: "content", Value: "ls"}}, bson.D{{Key: "role", Value: "assistant"}, {Key: "content", Value: "empty"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range []bson.D{
		{{Key: "_id", Value: "old/00000000"}, {Key: "chatId", Value: "old"}, {Key: "seq", Value: 0}, {Key: "role", Value: "user"}, {Key: "text", Value: "ls"}, {Key: "createdAt", Value: t0}},
		{{Key: "_id", Value: "old/00000001"}, {Key: "chatId", Value: "old"}, {Key: "seq", Value: 1}, {Key: "role", Value: "assistant"}, {Key: "text", Value: "empty"},
			{Key: "toolCalls", Value: `[{"id":"c1"}]`}, {Key: "durationMs", Value: int64(7)}, {Key: "createdAt", Value: t0}},
	} {
		if _, err := db.Collection(history.ItemsCollection).InsertOne(ctx, it); err != nil {
			t.Fatal(i, err)
		}
	}
	chat, err := s.Owned(ctx, "old", "app", "u")
	if err != nil || len(chat.History(10)) != 2 {
		t.Fatalf("old chat = %+v, %v", chat, err)
	}
	if _, err := s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "again"}, history.Item{Role: "assistant", Text: "still empty"}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	chat, _ = s.Get(ctx, "old")
	items, err := s.Items(ctx, chat, 0, 10)
	var got []string
	for _, it := range items {
		got = append(got, fmt.Sprintf("%d:%s:%s:%s:%d", it.Seq, it.Role, it.Text, it.ToolCalls, it.DurationMs))
	}
	want := "[0:user:ls::0 1:assistant:empty:[{\"id\":\"c1\"}]:7 2:user:again::0 3:assistant:still empty::0]"
	if err != nil || fmt.Sprint(got) != want || chat.Items != 4 || chat.Title != "ls" || len(chat.History(10)) != 4 {
		t.Fatalf("items = %v, %v; want %s; chat %+v", got, err, want, chat)
	}
	if err := s.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Collection(history.ItemsCollection).CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d items left after Delete", n)
	}
}

// Two users starting a chat under the same new id: the first keeps it,
// the second's turn is refused and not recorded in it.
func TestAFirstTurnCannotTakeAnotherUsersNewChat(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	alice, _ := s.Owned(ctx, "same", "app", "alice")
	mallory, _ := s.Owned(ctx, "same", "app", "mallory")
	if _, err := s.AppendTurn(ctx, alice, history.Item{Text: "mine"}, history.Item{Text: "yes"}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendTurn(ctx, mallory, history.Item{Text: "give"}, history.Item{Text: "no"}, t0); !errors.Is(err, history.ErrNotOwner) {
		t.Fatalf("mallory's first turn: err = %v, want ErrNotOwner", err)
	}
	chat, _ := s.Get(ctx, "same")
	items, _ := s.Items(ctx, chat, 0, 10)
	if chat.UserID != "alice" || len(items) != 2 || items[0].Text != "mine" || len(chat.Recent) != 2 {
		t.Fatalf("chat = %+v, items %+v", chat, items)
	}
}

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

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func scope(app, user, chat string) sandbox.Scope {
	return sandbox.Scope{AppID: app, UserID: user, ChatID: chat}
}

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func TestTurnsAreRecordedAndReloaded(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, err := s.Open(ctx, scope("app", "alice", "chat-1"))
	if err != nil || chat.Items != 0 {
		t.Fatalf("a new chat: %+v, %v", chat, err)
	}
	calls := json.RawMessage(`[{"id":"c1","toolName":"sandbox_shell","params":"{\"command\":\"ls\"}","response":"{\"exitCode\":0}","durationMs":12}]`)
	chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "list the files\nplease"},
		history.Item{Role: "assistant", ResponseChatItemID: "reply-1", Text: "there are none", ToolCalls: calls, DurationMs: 40}, t0)
	if err != nil {
		t.Fatal(err)
	}
	chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "thanks"}, history.Item{Role: "assistant", VersionID: "app-v2", Text: "you're welcome"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Open(ctx, scope("app", "alice", "chat-1"))
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
	if v := [4]string{items[0].VersionID, items[1].VersionID, items[2].VersionID, items[3].VersionID}; v != [4]string{"", "", "", "app-v2"} {
		t.Fatalf("versionIds = %q, want only the second answer's (app-v2)", v)
	}
	if page, _ := s.Items(ctx, got, 2, 1); len(page) != 1 || page[0].Text != "thanks" {
		t.Fatalf("page from 2 = %+v", page)
	}

	// A long first question is cut to 40 characters; a CJK one by
	// characters, not bytes.
	for _, c := range []struct{ q, want string }{
		{"  summarise the quarterly sales report in three bullet points please\nthanks", "summarise the quarterly sales report in…"},
		{"请把这份季度销售报告总结成三个要点，并列出每个地区的增长率和下一季度的预测数字，谢谢你的帮助", "请把这份季度销售报告总结成三个要点，并列出每个地区的增长率和下一季度的预测数字，…"},
	} {
		long, err := s.Open(ctx, scope("app", "alice", "long-"+c.want[:6]))
		if err != nil {
			t.Fatal(err)
		}
		long, err = s.AppendTurn(ctx, long, history.Item{Role: "user", Text: c.q}, history.Item{Role: "assistant", Text: "ok"}, t0)
		if err != nil || long.Title != c.want {
			t.Fatalf("title of %q = %q, %v; want %q", c.q, long.Title, err, c.want)
		}
		if reopened, _ := s.Open(ctx, long.Scope()); reopened.Title != c.want {
			t.Fatalf("stored title = %q, want %q", reopened.Title, c.want)
		}
	}
}

// Chat ids are scoped per app and user (T5): another user's or another
// app's chat "c" is another chat, which neither sees nor changes the
// first.
func TestChatIDsAreScopedPerAppAndUser(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Open(ctx, scope("app", "alice", "c"))
	if _, err := s.AppendTurn(ctx, chat, history.Item{Text: "q"}, history.Item{Text: "a"}, t0); err != nil {
		t.Fatal(err)
	}
	for _, who := range [][2]string{{"app", "mallory"}, {"other-app", "alice"}} {
		other, err := s.Open(ctx, scope(who[0], who[1], "c"))
		if err != nil || !other.CreatedAt.IsZero() || other.Items != 0 || other.AppID != who[0] || other.UserID != who[1] {
			t.Errorf("Open by %v = %+v, %v; want a new chat of theirs", who, other, err)
		}
		if _, err := s.AppendTurn(ctx, other, history.Item{Text: "mine too"}, history.Item{Text: "yes"}, t0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx, scope("app", "alice", "c"))
	items, _ := s.Items(ctx, got, 0, 10)
	if err != nil || got.Items != 2 || len(items) != 2 || items[0].Text != "q" || items[0].ChatID != "c" || items[0].ID != "c/00000000" {
		t.Fatalf("alice's chat = %+v, %v, items %+v", got, err, items)
	}
	// Parts that hold the separators spell no other chat's key.
	a, _ := s.Open(ctx, scope("app", "a/b", "c"))
	b, _ := s.Open(ctx, scope("app", "a", "b/c"))
	if a.Key == b.Key {
		t.Fatalf("two chats share the key %q", a.Key)
	}
	if err := s.Delete(ctx, scope("app", "mallory", "c")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, scope("app", "alice", "c")); err != nil {
		t.Fatalf("deleting mallory's chat c deleted alice's: %v", err)
	}
}

func TestConcurrentTurnsKeepEveryItem(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Open(ctx, scope("app", "u", "busy"))
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
	got, _ := s.Get(ctx, scope("app", "u", "busy"))
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
	chat, _ := s.Open(ctx, scope("app", "u", "long"))
	for i := 0; i < 110; i++ {
		chat, _ = s.AppendTurn(ctx, chat, history.Item{Text: fmt.Sprint("q", i)}, history.Item{Text: fmt.Sprint("a", i)}, t0)
	}
	got, _ := s.Get(ctx, scope("app", "u", "long"))
	if len(got.Recent) > 200 || got.Recent[len(got.Recent)-1].Content != "a109" || got.Items != 220 {
		t.Fatalf("recent has %d messages ending %q, items %d", len(got.Recent), got.Recent[len(got.Recent)-1].Content, got.Items)
	}
}

func TestDelete(t *testing.T) {
	db := mongotest.DB(t)
	s := history.New(db)
	ctx := context.Background()
	chat, _ := s.Open(ctx, scope("app", "u", "gone"))
	s.AppendTurn(ctx, chat, history.Item{Text: "q"}, history.Item{Text: "a"}, t0)
	keep, _ := s.Open(ctx, scope("app", "u", "kept"))
	s.AppendTurn(ctx, keep, history.Item{Text: "q"}, history.Item{Text: "a"}, t0)
	if err := s.Delete(ctx, scope("app", "u", "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, scope("app", "u", "gone")); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if n, _ := db.Collection(history.ItemsCollection).CountDocuments(ctx, map[string]any{"chatId": "gone"}); n != 0 {
		t.Fatalf("%d items of the deleted chat remain", n)
	}
	if kept, _ := s.Get(ctx, scope("app", "u", "kept")); len(must(s.Items(ctx, kept, 0, 10))) != 2 {
		t.Fatalf("the other chat has lost items")
	}
	if err := s.Delete(ctx, scope("app", "u", "gone")); err != nil {
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
	chat, _ := s.Open(ctx, scope("app", "u", "paged"))
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

// Chats written when every item was a document of its own, and keyed by
// their chat id alone (before chat ids were scoped per app and user),
// move to their keys, load, and continue after their last item.
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
	if n, err := s.Migrate(ctx); n != 1 || err != nil {
		t.Fatalf("Migrate = %d, %v; want the old chat moved", n, err)
	}
	if n, err := s.Migrate(ctx); n != 0 || err != nil {
		t.Fatalf("Migrate again = %d, %v; want nothing left to move", n, err)
	}
	chat, err := s.Open(ctx, scope("app", "u", "old"))
	if err != nil || len(chat.History(10)) != 2 {
		t.Fatalf("old chat = %+v, %v", chat, err)
	}
	if _, err := s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "again"}, history.Item{Role: "assistant", Text: "still empty"}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	chat, _ = s.Get(ctx, scope("app", "u", "old"))
	items, err := s.Items(ctx, chat, 0, 10)
	var got []string
	for _, it := range items {
		got = append(got, fmt.Sprintf("%d:%s:%s:%s:%d", it.Seq, it.Role, it.Text, it.ToolCalls, it.DurationMs))
	}
	want := "[0:user:ls::0 1:assistant:empty:[{\"id\":\"c1\"}]:7 2:user:again::0 3:assistant:still empty::0]"
	if err != nil || fmt.Sprint(got) != want || chat.Items != 4 || chat.Title != "ls" || len(chat.History(10)) != 4 {
		t.Fatalf("items = %v, %v; want %s; chat %+v", got, err, want, chat)
	}
	if err := s.Delete(ctx, scope("app", "u", "old")); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Collection(history.ItemsCollection).CountDocuments(ctx, bson.D{}); n != 0 {
		t.Fatalf("%d items left after Delete", n)
	}
}

// Two users starting a chat under the same new id: each gets a chat of
// their own.
func TestAFirstTurnCannotTakeAnotherUsersNewChat(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	alice, _ := s.Open(ctx, scope("app", "alice", "same"))
	mallory, _ := s.Open(ctx, scope("app", "mallory", "same"))
	if _, err := s.AppendTurn(ctx, alice, history.Item{Text: "mine"}, history.Item{Text: "yes"}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendTurn(ctx, mallory, history.Item{Text: "give"}, history.Item{Text: "no"}, t0); err != nil {
		t.Fatal(err)
	}
	chat, _ := s.Get(ctx, scope("app", "alice", "same"))
	items, _ := s.Items(ctx, chat, 0, 10)
	if chat.UserID != "alice" || len(items) != 2 || items[0].Text != "mine" || len(chat.Recent) != 2 {
		t.Fatalf("chat = %+v, items %+v", chat, items)
	}
}

// A migration cut short (the chat's turn copied under its key, the old
// documents still there) is finished by the next one, with nothing lost
// or doubled; a chat whose parts hold separators moves too.
func TestMigrationCutShortIsFinished(t *testing.T) {
	db := mongotest.DB(t)
	s := history.New(db)
	ctx := context.Background()
	chats, items := db.Collection(history.ChatsCollection), db.Collection(history.ItemsCollection)
	turn := func(id, chatID string) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "chatId", Value: chatID}, {Key: "seq", Value: 0}, {Key: "role", Value: "user"}, {Key: "text", Value: "q"},
			{Key: "answer", Value: bson.D{{Key: "role", Value: "assistant"}, {Key: "text", Value: "a"}}}, {Key: "createdAt", Value: t0}}
	}
	for _, doc := range []any{
		bson.D{{Key: "_id", Value: "x"}, {Key: "appId", Value: "app"}, {Key: "userId", Value: "app:k:u/1"}, {Key: "title", Value: "q"},
			{Key: "items", Value: 2}, {Key: "createdAt", Value: t0}, {Key: "updatedAt", Value: t0}},
	} {
		if _, err := chats.InsertOne(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	key := scope("app", "app:k:u/1", "x").ChatKey()
	for _, doc := range []any{turn("x/00000000", "x"), turn(key+"/00000000", key)} {
		if _, err := items.InsertOne(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Migrate(ctx); n != 1 || err != nil {
		t.Fatalf("Migrate = %d, %v", n, err)
	}
	chat, err := s.Get(ctx, scope("app", "app:k:u/1", "x"))
	got, _ := s.Items(ctx, chat, 0, 10)
	if err != nil || chat.ID != "x" || chat.Title != "q" || len(got) != 2 || got[1].Text != "a" {
		t.Fatalf("migrated chat = %+v, %v; items %+v", chat, err, got)
	}
	if n, _ := items.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("%d item documents after the migration, want 1", n)
	}
	if n, _ := chats.CountDocuments(ctx, bson.D{}); n != 1 {
		t.Fatalf("%d chat documents after the migration, want 1", n)
	}
}

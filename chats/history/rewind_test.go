package history_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

// TestRewindRedoAndMoveOn: a rewind to a turn leaves the turns before
// it, in the items and the model's messages; redo puts the rest back;
// after another rewind, a new turn deletes what was set aside for good.
func TestRewindRedoAndMoveOn(t *testing.T) {
	s := history.New(mongotest.DB(t))
	ctx := context.Background()
	chat, _ := s.Open(ctx, scope("app", "alice", "c"))
	var err error
	for i := 1; i <= 3; i++ {
		chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprintf("q%d", i)}, history.Item{Role: "assistant", Text: fmt.Sprintf("a%d", i)}, t0.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
	}
	texts := func(c history.Chat) string {
		t.Helper()
		items, err := s.Items(ctx, c, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, it := range items {
			out += it.Text + " "
		}
		return out + msgs(c)
	}
	// Regenerating the third answer: from the answer's item (seq 5).
	turn, err := s.TurnOf(ctx, chat, 5)
	if err != nil || turn != 4 {
		t.Fatalf("TurnOf(5) = %d, %v; want 4", turn, err)
	}
	chat, err = s.Rewind(ctx, chat, turn, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	reread, _ := s.Open(ctx, chat.Scope())
	if got := texts(reread); got != "q1 a1 q2 a2 [{user q1} {assistant a1} {user q2} {assistant a2}]" || reread.Items != 4 || reread.Redo == nil || *reread.Redo != (history.Redo{From: 4, Items: 2}) {
		t.Errorf("after the rewind: %s, %+v", got, reread)
	}
	// Edit the second question, from its item: turns 2 and 3 set aside.
	chat, err = s.Rewind(ctx, reread, 2, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Only the last rewind's turns come back: the first's went.
	chat, err = s.Redo(ctx, chat, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	reread, _ = s.Open(ctx, chat.Scope())
	if got := texts(reread); got != "q1 a1 q2 a2 [{user q1} {assistant a1} {user q2} {assistant a2}]" || reread.Redo != nil {
		t.Errorf("after the redo: %s, %+v", got, reread)
	}
	if _, err := s.Redo(ctx, reread, t0); !errors.Is(err, history.ErrNoRedo) {
		t.Errorf("a second redo: %v, want ErrNoRedo", err)
	}
	// Rewind, then move on: the new turn takes the place, for good.
	chat, err = s.Rewind(ctx, reread, 2, t0.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "q2b"}, history.Item{Role: "assistant", Text: "a2b"}, t0.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	reread, _ = s.Open(ctx, chat.Scope())
	if got := texts(reread); got != "q1 a1 q2b a2b [{user q1} {assistant a1} {user q2b} {assistant a2b}]" || reread.Redo != nil {
		t.Errorf("after moving on: %s, %+v", got, reread)
	}
	if _, err := s.Redo(ctx, reread, t0); !errors.Is(err, history.ErrNoRedo) {
		t.Errorf("a redo after moving on: %v, want ErrNoRedo", err)
	}
	if _, err := s.TurnOf(ctx, reread, 9); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("TurnOf a missing item: %v", err)
	}
	// Deleting the chat deletes what a rewind set aside too.
	chat, _ = s.Rewind(ctx, reread, 0, t0.Add(6*time.Hour))
	if err := s.Delete(ctx, chat.Scope()); err != nil {
		t.Fatal(err)
	}
	if n, _ := mongotest.DB(t).Collection(history.ItemsCollection).CountDocuments(ctx, map[string]any{}); n != 0 {
		t.Errorf("%d items left after the delete", n)
	}
}

// msgs is the chat's messages for a model, as "[role text ...]".
func msgs(c history.Chat) string {
	out := "["
	for i, m := range c.History(100) {
		if i > 0 {
			out += " "
		}
		out += "{" + string(m.Role) + " " + fmt.Sprint(m.Content) + "}"
	}
	return out + "]"
}

// TestFork: a fork holds the items up to the turn it was made at, the
// original all of its own.
func TestFork(t *testing.T) {
	db := mongotest.DB(t)
	s := history.New(db)
	ctx := context.Background()
	chat, _ := s.Open(ctx, scope("app", "alice", "c"))
	var err error
	for i := 1; i <= 3; i++ {
		chat, err = s.AppendTurn(ctx, chat, history.Item{Role: "user", Text: fmt.Sprintf("q%d", i)}, history.Item{Role: "assistant", Text: fmt.Sprintf("a%d", i)}, t0)
		if err != nil {
			t.Fatal(err)
		}
	}
	fork, err := s.Fork(ctx, chat, 3, history.Of(scope("app", "alice", "f")), "branch", t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	items, _ := s.Items(ctx, fork, 0, 100)
	if len(items) != 4 || items[3].Text != "a2" || fork.Items != 4 || msgs(fork) != "[{user q1} {assistant a1} {user q2} {assistant a2}]" || fork.Title != "branch" {
		t.Errorf("the fork: %+v, items %+v", fork, items)
	}
	if orig, _ := s.Open(ctx, chat.Scope()); orig.Items != 6 {
		t.Errorf("the original: %+v", orig)
	}
	if _, err := s.Fork(ctx, chat, 1, history.Of(scope("app", "alice", "f")), "again", t0); err == nil {
		t.Error("a fork onto an existing chat succeeded")
	}
}

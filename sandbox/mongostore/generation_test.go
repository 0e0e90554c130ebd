package mongostore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestDeletedSeenAcrossEngines: an engine that found a chat not deleted
// finds it deleted once another engine requests the chat's or its app's
// deletion, and reads only the generation while none was requested.
func TestDeletedSeenAcrossEngines(t *testing.T) {
	// Engine a counts the finds it sends.
	counted, db, finds := countingFinds(t)
	ctx := context.Background()
	a, err := New(ctx, counted, quiet)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, db, quiet)
	if err != nil {
		t.Fatal(err)
	}
	chat1, chat2, other := instance("0123456789abcdef", "chat1"), instance("fedcba9876543210", "chat2"), instance("00112233445566ff", "chat3")
	other.AppID = "app2"
	deleted := func(inst sandbox.Instance) bool {
		t.Helper()
		err := a.Deleted(ctx, inst)
		if err != nil && !errors.Is(err, sandbox.ErrDeleted) {
			t.Fatal(err)
		}
		return err != nil
	}
	for _, inst := range []sandbox.Instance{chat1, chat2, other} {
		if deleted(inst) {
			t.Fatalf("chat %s deleted before any deletion", inst.ChatID)
		}
	}
	finds.Store(0)
	if deleted(chat1) {
		t.Fatal("chat1 deleted before any deletion")
	}
	if n := finds.Load(); n != 1 {
		t.Errorf("a chat found not deleted and asked again: %d finds, want 1 (the generation)", n)
	}

	if err := b.RequestDeletions(ctx, []Deletion{ChatDeletion(chat1.Scope(), "t1", t0)}); err != nil {
		t.Fatal(err)
	}
	if !deleted(chat1) {
		t.Error("chat1's deletion by another engine not seen")
	}
	if deleted(chat2) || deleted(other) {
		t.Error("chats other than chat1 deleted by chat1's deletion")
	}
	finds.Store(0)
	deleted(chat2)
	if n := finds.Load(); n != 1 {
		t.Errorf("chat2 asked again after it was found not deleted under the new generation: %d finds, want 1", n)
	}

	if err := b.RequestDeletions(ctx, []Deletion{AppDeletion(chat2.AppID, "t2", t0)}); err != nil {
		t.Fatal(err)
	}
	if !deleted(chat2) {
		t.Error("chat2's app deletion by another engine not seen")
	}
	if deleted(other) {
		t.Error("a chat of another app deleted by the app's deletion")
	}
	// Deleting again, once done, still changes the generation.
	if err := b.FinishDeletions(ctx, []string{AppDeletionKey(chat2.AppID)}, t0); err != nil {
		t.Fatal(err)
	}
	g1, err := b.readGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.RequestDeletions(ctx, []Deletion{AppDeletion(chat2.AppID, "t3", t0)}); err != nil {
		t.Fatal(err)
	}
	if g2, err := b.readGeneration(ctx); err != nil || g2 == g1 || g2 == "" {
		t.Errorf("generation after a second request = %q (%v), before %q; want a new one", g2, err, g1)
	}
}

// countingFinds returns a test database twice: through a client that
// counts the find commands it sends (finds), and as mongotest gives it.
func countingFinds(t *testing.T) (counted, db *mongo.Database, finds *atomic.Int64) {
	t.Helper()
	uri, db := mongotest.URI(t)
	finds = new(atomic.Int64)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(&event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" {
				finds.Add(1)
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database(db.Name()), db, finds
}

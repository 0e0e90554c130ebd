package mongostore

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
)

// BenchmarkTouch puts Touch, which looks for claims and deletion intents
// around its write, beside the bare upsert it wraps, and Refresh (a warm
// command's write) beside an update filtered by {_id, status}, in the same
// run, with the records of 2,000 other sandboxes in the collection
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench Touch -count 3 ./sandbox/mongostore/
//
// On FerretDB's SQLite backend only a filter of exactly {_id} is a
// lookup; the filtered update reads every record.
func BenchmarkTouch(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
	others := make([]any, 2000)
	for i := range others {
		inst := instance(fmt.Sprintf("%016x", i+1), fmt.Sprintf("other%d", i))
		others[i] = bson.D{{Key: "_id", Value: recordID(inst.Provider, inst.SandboxID)}, {Key: "provider", Value: inst.Provider},
			{Key: "sandboxId", Value: inst.SandboxID}, {Key: "appId", Value: inst.AppID}, {Key: "userId", Value: inst.UserID},
			{Key: "chatId", Value: inst.ChatID}, {Key: "status", Value: sandbox.StatusRunning}, {Key: "lastActiveAt", Value: t0}}
	}
	if _, err := s.coll.InsertMany(ctx, others); err != nil {
		b.Fatal(err)
	}
	mongotest.IndexIDs(b) // as the engine has it once its collections exist
	inst := instance("0123456789abcdef", "chat1")
	if err := s.Touch(ctx, inst, t0); err != nil {
		b.Fatal(err)
	}
	b.Run("upsert", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.coll.UpdateOne(ctx, key(inst.Provider, inst.SandboxID), touchUpdate(inst, t0), options.UpdateOne().SetUpsert(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("touch", func(b *testing.B) {
		for b.Loop() {
			if err := s.Touch(ctx, inst, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("update-id-status", func(b *testing.B) {
		filter := bson.D{{Key: "_id", Value: recordID(inst.Provider, inst.SandboxID)}, {Key: "status", Value: sandbox.StatusRunning}}
		update := bson.D{{Key: "$set", Value: bson.D{{Key: "lastActiveAt", Value: t0}}}}
		for b.Loop() {
			if _, err := s.coll.UpdateOne(ctx, filter, update); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("refresh", func(b *testing.B) {
		for b.Loop() {
			if err := s.Refresh(ctx, inst, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

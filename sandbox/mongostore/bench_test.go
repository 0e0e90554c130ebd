package mongostore

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// BenchmarkTouch puts Touch, which looks for claims and deletion intents
// around its write, beside the bare upsert it wraps, in the same run
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench Touch -count 3 ./sandbox/mongostore/
func BenchmarkTouch(b *testing.B) {
	s, _ := newStore(b)
	ctx := context.Background()
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
}

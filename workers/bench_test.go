package workers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/workers"
)

// The stop scan at scale (docs/BENCHMARKS.md, "Workers"), on the embedded
// database:
//
//	go test -run '^$' -bench StopScan -benchtime 1x -timeout 2h ./workers/
//
// FLOWBOX_BENCH_RECORDS lists the collection sizes (default 100000, or
// 10000 with -short) and
// FLOWBOX_BENCH_IDLE how many of them are idle (default 1000). Only here
// is the provider a stub: its Stop returns at once, so the figures are the
// scan's own cost, not the provider's.

// stubProvider runs nothing; every call succeeds at once.
type stubProvider struct{}

func (stubProvider) Name() string                                     { return "stub" }
func (stubProvider) Capabilities() sandbox.Capabilities               { return sandbox.Capabilities{} }
func (stubProvider) Fingerprint(context.Context) error                { return nil }
func (stubProvider) Ensure(context.Context, sandbox.Spec) error       { return nil }
func (stubProvider) Stop(context.Context, string) error               { return nil }
func (stubProvider) Delete(context.Context, string) error             { return nil }
func (stubProvider) List(context.Context) ([]sandbox.Resource, error) { return nil, nil }
func (stubProvider) Status(context.Context, string) (sandbox.Status, error) {
	return sandbox.StatusRunning, nil
}
func (stubProvider) Exec(context.Context, string, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, errors.New("stub provider runs nothing")
}
func (stubProvider) Files(context.Context, string) (sandbox.Files, error) {
	return nil, errors.New("stub provider has no files")
}

func benchSizes(b *testing.B) (records []int, idle int) {
	b.Helper()
	parse := func(s string) int {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("bad benchmark size %q", s)
		}
		return n
	}
	records = []int{100000}
	if testing.Short() {
		records = []int{10000}
	}
	if v := os.Getenv("FLOWBOX_BENCH_RECORDS"); v != "" {
		records = nil
		for _, f := range strings.Split(v, ",") {
			records = append(records, parse(f))
		}
	}
	idle = 1000
	if v := os.Getenv("FLOWBOX_BENCH_IDLE"); v != "" {
		idle = parse(v)
	}
	return records, idle
}

var benchSeq int

// insertRecords writes n records of the stub provider straight into the
// collection, lastActiveAt at the given time, in batches.
func insertRecords(b *testing.B, coll *mongo.Collection, n int, lastActive time.Time) []string {
	b.Helper()
	ids := make([]string, 0, n)
	for len(ids) < n {
		batch := make([]any, 0, min(10000, n-len(ids)))
		for range cap(batch) {
			benchSeq++
			id := fmt.Sprintf("%016x", benchSeq)
			ids = append(ids, id)
			batch = append(batch, bson.D{
				{Key: "_id", Value: "stub/" + id}, {Key: "provider", Value: "stub"}, {Key: "sandboxId", Value: id},
				{Key: "appId", Value: "bench-app"}, {Key: "userId", Value: "bench-user"}, {Key: "chatId", Value: "chat-" + id},
				{Key: "status", Value: sandbox.StatusRunning}, {Key: "lastActiveAt", Value: lastActive},
				{Key: "createdAt", Value: lastActive}, {Key: "limit", Value: sandbox.Limits{}},
			})
		}
		if _, err := coll.InsertMany(context.Background(), batch, options.InsertMany().SetOrdered(false)); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

func BenchmarkStopScan(b *testing.B) {
	sizes, idle := benchSizes(b)
	for _, size := range sizes {
		b.Run(fmt.Sprintf("records=%d/idle=%d", size, idle), func(b *testing.B) {
			ctx := context.Background()
			db := mongotest.DB(b)
			// The records' own query (what MongoDB serves from the index)
			// beside the activity index in each kind of Redis.
			records, err := mongostore.New(ctx, db, quiet)
			if err != nil {
				b.Fatal(err)
			}
			type indexed struct {
				name  string
				rdb   *redis.Client
				idx   *activity.Index
				store *mongostore.Store
			}
			var kinds []indexed
			for _, k := range []struct {
				name string
				addr string
			}{{"embedded", redistest.Embedded(b)}, {"redis-server", redistest.Server(b)}} {
				rdb := redis.NewClient(&redis.Options{Addr: k.addr})
				defer rdb.Close()
				idx := activity.New(rdb, db.Name())
				store, err := mongostore.New(ctx, db, quiet, mongostore.WithActivity(idx))
				if err != nil {
					b.Fatal(err)
				}
				kinds = append(kinds, indexed{k.name, rdb, idx, store})
			}
			coll := db.Collection(mongostore.Collection)
			now := time.Now().UTC().Truncate(time.Millisecond)
			insertRecords(b, coll, size-idle, now.Add(-time.Minute))
			idleIDs := insertRecords(b, coll, idle, now.Add(-10*time.Minute))
			// As the embedded database does by itself within seconds.
			mongotest.IndexIDs(b)
			// The indexes of a running engine are filled; the fill
			// sub-benchmarks measure doing it again.
			for _, k := range kinds {
				if _, err := k.store.FillActivity(ctx, "stub"); err != nil {
					b.Fatal(err)
				}
			}
			cutoff := now.Add(-sandbox.IdleAfter)
			want := min(idle, scanLimit)

			var plan bson.M
			cmd := bson.D{
				{Key: "explain", Value: bson.D{
					{Key: "find", Value: mongostore.Collection},
					{Key: "filter", Value: bson.D{{Key: "status", Value: "running"}, {Key: "lastActiveAt", Value: bson.D{{Key: "$lt", Value: cutoff}}}, {Key: "provider", Value: "stub"}}},
					{Key: "sort", Value: bson.D{{Key: "lastActiveAt", Value: 1}}},
					{Key: "hint", Value: mongostore.IndexIdle},
					{Key: "limit", Value: int64(scanLimit)},
				}},
				{Key: "verbosity", Value: "queryPlanner"},
			}
			if err := db.RunCommand(ctx, cmd).Decode(&plan); err != nil {
				b.Fatal(err)
			}
			b.Logf("explain of the records' query: queryPlanner %v, filterPushdown %v", plan["queryPlanner"], plan["filterPushdown"])

			idleQuery := func(b *testing.B, store *mongostore.Store) {
				for b.Loop() {
					got, err := store.Idle(ctx, "stub", cutoff, scanLimit)
					if err != nil || len(got) != want {
						b.Fatalf("Idle = %d records, %v; want %d", len(got), err, want)
					}
				}
			}
			// The query on the records, which FerretDB answers by decoding
			// every record (the baseline).
			b.Run("query/records", func(b *testing.B) { idleQuery(b, records) })
			for _, k := range kinds {
				// Filling the index from the records: once, after Redis
				// lost it.
				b.Run("fill/"+k.name, func(b *testing.B) {
					for b.Loop() {
						b.StopTimer()
						if err := k.rdb.FlushAll(ctx).Err(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						if n, err := k.store.FillActivity(ctx, "stub"); err != nil || n != size {
							b.Fatalf("FillActivity = %d, %v; want %d", n, err, size)
						}
					}
				})
				// The scan's query, from the index.
				b.Run("query/"+k.name, func(b *testing.B) { idleQuery(b, k.store) })
			}
			// One write of one record by _id: what every per-sandbox step
			// of a scan costs at this size.
			b.Run("write-by-id", func(b *testing.B) {
				for b.Loop() {
					if err := records.SetStatus(ctx, "stub", idleIDs[0], sandbox.StatusRunning); err != nil {
						b.Fatal(err)
					}
				}
			})
			// Claims for 1000 sandboxes: one batch insert and release,
			// against one insert and one delete per sandbox.
			b.Run("claims-batched", func(b *testing.B) {
				for b.Loop() {
					got, err := records.Claim(ctx, "stub", idleIDs[:want], "bench", "stop", now)
					if err != nil || len(got) != want {
						b.Fatalf("Claim = %d, %v", len(got), err)
					}
					if err := records.Release(ctx, "stub", got, "bench"); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("claims-one-by-one", func(b *testing.B) {
				for b.Loop() {
					for _, id := range idleIDs[:want] {
						if _, err := records.Claim(ctx, "stub", []string{id}, "bench", "stop", now); err != nil {
							b.Fatal(err)
						}
						if err := records.Release(ctx, "stub", []string{id}, "bench"); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
			// The whole scan as the engine on the embedded database runs
			// it: candidates from the index in the embedded Redis, claims,
			// re-reads, stub stops, records marked stoped. Each round gets
			// idle records of its own and a fresh period.
			emb := kinds[0]
			manager, err := sandbox.New(sandbox.Config{Provider: stubProvider{}, Store: emb.store, Now: func() time.Time { return now }, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			w, err := workers.New(workers.Config{Manager: manager, Store: emb.store, Redis: emb.rdb, Now: func() time.Time { return now }, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Run("scan", func(b *testing.B) {
				var stopped int
				var took time.Duration
				for b.Loop() {
					b.StopTimer()
					if stopped > 0 {
						idleIDs = insertRecords(b, coll, idle, now.Add(-10*time.Minute))
					}
					// A fresh period: the lease of the last one goes.
					leases, err := emb.rdb.Keys(ctx, "flowbox:workers:lease:*").Result()
					if err == nil && len(leases) > 0 {
						err = emb.rdb.Del(ctx, leases...).Err()
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := fillEntries(ctx, emb.idx, idleIDs, now.Add(-10*time.Minute)); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					start := time.Now()
					if err := w.HandleStopIdle(ctx, workers.NewStopIdleTask()); err != nil {
						b.Fatal(err)
					}
					took += time.Since(start)
					stopped += idle
				}
				if n, err := coll.CountDocuments(ctx, bson.D{{Key: "status", Value: sandbox.StatusRunning}, {Key: "lastActiveAt", Value: bson.D{{Key: "$lt", Value: cutoff}}}}); err != nil || n != 0 {
					b.Fatalf("%d idle records still running after the scan (%v)", n, err)
				}
				b.ReportMetric(float64(took.Microseconds())/1000/float64(stopped), "ms/stopped")
			})
		})
	}
}

// scanLimit is the page the scan asks for (workers.scanPage).
const scanLimit = 1000

// fillEntries puts records written straight into the collection into the
// activity index, as Touch would have.
func fillEntries(ctx context.Context, idx *activity.Index, ids []string, at time.Time) error {
	entries := make([]activity.Entry, len(ids))
	for i, id := range ids {
		entries[i] = activity.Entry{SandboxID: id, LastActiveAt: at}
	}
	_, err := idx.Fill(ctx, "stub", entries)
	return err
}

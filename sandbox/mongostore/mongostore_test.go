package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

func newStore(t testing.TB) (*Store, *mongo.Database) {
	t.Helper()
	db := mongotest.DB(t)
	s, err := New(context.Background(), db, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func isFerretDB(t *testing.T, db *mongo.Database) bool {
	t.Helper()
	ferret, err := mongodb.IsFerretDB(context.Background(), db.Client())
	if err != nil {
		t.Fatal(err)
	}
	return ferret
}

// ms is the precision of BSON dates: what the store keeps of a time.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// t0 has nanoseconds on purpose, to show what the store keeps of them.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func instance(sandboxID, chatID string) sandbox.Instance {
	return sandbox.Instance{
		Provider:  "docker",
		SandboxID: sandboxID,
		AppID:     "app1",
		UserID:    "user1",
		ChatID:    chatID,
		Limit:     sandbox.Limits{CPUCount: 1.5, MemoryMiB: 512, DiskGiB: 2},
	}
}

func TestNewCreatesIndexes(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	partial := !isFerretDB(t, db) // FerretDB 1.x has no partial indexes
	want := []struct {
		name    string
		keys    bson.D
		unique  bool
		partial bool
	}{
		{"_id_", bson.D{{Key: "_id", Value: int32(1)}}, false, false},
		{IndexSandbox, bson.D{{Key: "provider", Value: int32(1)}, {Key: "sandboxId", Value: int32(1)}}, true, false},
		{IndexChat, bson.D{{Key: "appId", Value: int32(1)}, {Key: "userId", Value: int32(1)}, {Key: "chatId", Value: int32(1)}}, true, partial},
		{IndexIdle, bson.D{{Key: "status", Value: int32(1)}, {Key: "lastActiveAt", Value: int32(1)}}, false, false},
	}

	// New runs at every engine start: a second time must change nothing.
	if _, err := New(ctx, db, quiet); err != nil {
		t.Fatalf("second New: %v", err)
	}
	got, err := s.indexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("got %d indexes %v, want %d", len(got), got, len(want))
	}
	for _, w := range want {
		t.Run(w.name, func(t *testing.T) {
			g, ok := got[w.name]
			if !ok {
				t.Fatalf("index %s missing; got %v", w.name, got)
			}
			if fmt.Sprint(normalise(g.Key)) != fmt.Sprint(w.keys) {
				t.Errorf("keys = %v, want %v", g.Key, w.keys)
			}
			if g.Unique != w.unique {
				t.Errorf("unique = %v, want %v", g.Unique, w.unique)
			}
			if hasPartial := g.PartialFilterExpression != nil; hasPartial != w.partial {
				t.Errorf("partialFilterExpression = %v, want one: %v", g.PartialFilterExpression, w.partial)
			}
			if w.partial {
				var f bson.D
				if err := bson.Unmarshal(g.PartialFilterExpression, &f); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(f) != fmt.Sprint(normaliseFilter(chatFilter)) {
					t.Errorf("partialFilterExpression = %v, want %v", f, chatFilter)
				}
			}
		})
	}
}

// normalise makes key directions int32, whatever number type the server
// lists them with (MongoDB int32, some servers double or int64).
func normalise(keys bson.D) bson.D {
	out := make(bson.D, len(keys))
	for i, e := range keys {
		switch v := e.Value.(type) {
		case float64:
			e.Value = int32(v)
		case int64:
			e.Value = int32(v)
		}
		out[i] = e
	}
	return out
}

// normaliseFilter turns chatFilter's Go values into what a round trip
// through BSON gives back.
func normaliseFilter(f bson.D) bson.D {
	raw, err := bson.Marshal(f)
	if err != nil {
		panic(err)
	}
	var out bson.D
	if err := bson.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

// TestPartialFallbackLoggedOnce opens two stores: the embedded database
// (FerretDB), which never has partial indexes and needs none, gets one
// line at debug and nothing above it; MongoDB gets none at all.
func TestPartialFallbackLoggedOnce(t *testing.T) {
	fallbackOnce = sync.Once{} // as in a new process
	var mu sync.Mutex
	lines := map[slog.Level][]string{}
	logger := slog.New(recorder(func(r slog.Record) {
		mu.Lock()
		defer mu.Unlock()
		lines[r.Level] = append(lines[r.Level], r.Message)
	}))
	var ferret bool
	for range 2 {
		db := mongotest.DB(t)
		ferret = isFerretDB(t, db)
		if _, err := New(context.Background(), db, logger); err != nil {
			t.Fatal(err)
		}
	}
	if len(lines[slog.LevelInfo])+len(lines[slog.LevelWarn])+len(lines[slog.LevelError]) != 0 {
		t.Errorf("lines above debug: %q", lines)
	}
	want := 0
	if ferret {
		want = 1
	}
	if got := lines[slog.LevelDebug]; len(got) != want || want == 1 && !strings.Contains(got[0], "FerretDB has no partial indexes") {
		t.Errorf("debug lines %q, want %d saying why", got, want)
	}
}

type recorder func(slog.Record)

func (r recorder) Enabled(context.Context, slog.Level) bool        { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error { r(rec); return nil }
func (r recorder) WithAttrs([]slog.Attr) slog.Handler              { return r }
func (r recorder) WithGroup(string) slog.Handler                   { return r }

func TestTouchInsertsThenUpdates(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	first := instance("0123456789abcdef", "chat1")
	if err := s.Touch(ctx, first, t0); err != nil {
		t.Fatal(err)
	}
	want := first
	want.Status = sandbox.StatusRunning
	want.CreatedAt = ms(t0)
	want.LastActiveAt = ms(t0)
	check := func(step string) {
		t.Helper()
		got, err := s.Get(ctx, first.Provider, first.SandboxID)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !got.CreatedAt.Equal(want.CreatedAt) || !got.LastActiveAt.Equal(want.LastActiveAt) {
			t.Errorf("%s: createdAt, lastActiveAt = %v, %v; want %v, %v", step, got.CreatedAt, got.LastActiveAt, want.CreatedAt, want.LastActiveAt)
		}
		got.CreatedAt, got.LastActiveAt = want.CreatedAt, want.LastActiveAt
		if got != want {
			t.Errorf("%s: got %+v, want %+v", step, got, want)
		}
	}
	check("after insert")

	if err := s.SetStatus(ctx, first.Provider, first.SandboxID, sandbox.StatusStopped); err != nil {
		t.Fatal(err)
	}
	want.Status = sandbox.StatusStopped
	check("after SetStatus")

	// The second Touch brings other owner fields and limits: only status
	// and lastActiveAt may change.
	second := first
	second.AppID, second.UserID, second.ChatID = "app2", "user2", "chat2"
	second.Limit = sandbox.Limits{CPUCount: 4, MemoryMiB: 4096, DiskGiB: 20}
	t1 := t0.Add(90 * time.Second)
	if err := s.Touch(ctx, second, t1); err != nil {
		t.Fatal(err)
	}
	want.Status = sandbox.StatusRunning
	want.LastActiveAt = ms(t1)
	check("after second Touch")
}

func TestTouchConcurrent(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	inst := instance("fedcba9876543210", "chat1")
	const n = 20
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs <- s.Touch(ctx, inst, t0.Add(time.Duration(i)*time.Millisecond))
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Touch: %v", err)
		}
	}
	count, err := db.Collection(Collection).CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if count != 1 {
		t.Errorf("%d concurrent Touch calls left %d records, want 1", n, count)
	}
}

func TestTouchRefusesIncompleteRecords(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		change func(*sandbox.Instance)
	}{
		{"no appId", func(i *sandbox.Instance) { i.AppID = "" }},
		{"no chatId", func(i *sandbox.Instance) { i.ChatID = "" }},
		{"no provider", func(i *sandbox.Instance) { i.Provider = "" }},
		{"no sandboxId", func(i *sandbox.Instance) { i.SandboxID = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst := instance("0123456789abcdef", "chat1")
			tt.change(&inst)
			if err := s.Touch(ctx, inst, t0); err == nil {
				t.Errorf("Touch(%+v): got nil error, want one", inst)
			}
		})
	}
	if count, err := db.Collection(Collection).CountDocuments(ctx, bson.D{}); err != nil || count != 0 {
		t.Errorf("records after refused Touch calls = %d, %v; want 0, nil", count, err)
	}
}

func TestMissingRecord(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Get(ctx, "docker", "0000000000000000"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Get: got error %v, want ErrNotFound", err)
	}
	if err := s.SetStatus(ctx, "docker", "0000000000000000", sandbox.StatusStopped); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("SetStatus: got error %v, want ErrNotFound", err)
	}
	if err := s.SetStatus(ctx, "docker", "0000000000000000", sandbox.StatusMissing); err == nil || errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("SetStatus(missing): got error %v, want a refusal of the status", err)
	}
}

func TestDeleteIdempotent(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	inst := instance("0123456789abcdef", "chat1")
	if err := s.Touch(ctx, inst, t0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := s.Delete(ctx, inst.Provider, inst.SandboxID); err != nil {
			t.Errorf("Delete #%d: %v", i+1, err)
		}
	}
	if _, err := s.Get(ctx, inst.Provider, inst.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Get after Delete: got error %v, want ErrNotFound", err)
	}
}

// TestOneSandboxPerChat: a second sandbox for a chat that has one, under
// this provider or another, is refused by the {appId, userId, chatId}
// index; another user's chat of the same id is another chat.
func TestOneSandboxPerChat(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	if err := s.Touch(ctx, instance("0123456789abcdef", "chat1"), t0); err != nil {
		t.Fatal(err)
	}
	other := instance("1111111111111111", "chat1")
	otherProvider := instance("0123456789abcdef", "chat1")
	otherProvider.Provider = "bwrap"
	for _, inst := range []sandbox.Instance{other, otherProvider} {
		err := s.Touch(ctx, inst, t0)
		if !mongo.IsDuplicateKeyError(err) {
			t.Errorf("Touch(%s/%s) for a chat that has a sandbox: got error %v, want a duplicate key error", inst.Provider, inst.SandboxID, err)
		}
	}
	// Another chat of the same app is fine, and so is another user's
	// chat of the same id.
	if err := s.Touch(ctx, instance("2222222222222222", "chat2"), t0); err != nil {
		t.Errorf("Touch for another chat: %v", err)
	}
	users := instance("3333333333333333", "chat1")
	users.UserID = "user2"
	if err := s.Touch(ctx, users, t0); err != nil {
		t.Errorf("Touch for another user's chat1: %v", err)
	}
	if count, err := db.Collection(Collection).CountDocuments(ctx, bson.D{}); err != nil || count != 3 {
		t.Errorf("records = %d, %v; want 3, nil", count, err)
	}
}

// TestUnscopedChatIndexIsDropped: a database whose records were kept
// under one sandbox per app and chat id (before chat ids were scoped per
// app and user) loses that index when the store opens it, so two users'
// chats of one id each get their sandbox; the records stay.
func TestUnscopedChatIndexIsDropped(t *testing.T) {
	old, db := newStore(t)
	ctx := context.Background()
	if err := old.Touch(ctx, instance("0123456789abcdef", "chat1"), t0); err != nil {
		t.Fatal(err)
	}
	// The database as it was: the unscoped index instead of today's.
	if err := db.Collection(Collection).Indexes().DropOne(ctx, IndexChat); err != nil {
		t.Fatal(err)
	}
	_, err := db.Collection(Collection).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "appId", Value: 1}, {Key: "chatId", Value: 1}}, Options: options.Index().SetName("appId_chatId").SetUnique(true)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, db, quiet)
	if err != nil {
		t.Fatal(err)
	}
	users := instance("3333333333333333", "chat1")
	users.UserID = "user2"
	if err := s.Touch(ctx, users, t0); err != nil {
		t.Fatalf("Touch for another user's chat1 after the upgrade: %v", err)
	}
	if _, err := s.Get(ctx, "docker", "0123456789abcdef"); err != nil {
		t.Errorf("the record kept from before: %v", err)
	}
	if _, err := New(ctx, db, quiet); err != nil {
		t.Errorf("opening the store again: %v", err)
	}
}

// idleSources are the ways a store finds idle sandboxes: its records'
// index, or an activity index in each kind of Redis, also after Redis
// lost it (the store must fill it again from the records).
var idleSources = []struct {
	name  string
	redis func(testing.TB) string // nil: no activity index
	lose  bool
}{
	{"records", nil, false},
	{"activity/redis-server", func(t testing.TB) string { return redistest.Server(t) }, false},
	{"activity/embedded", redistest.Embedded, false},
	{"activity-lost/redis-server", func(t testing.TB) string { return redistest.Server(t) }, true},
	{"activity-lost/embedded", redistest.Embedded, true},
}

// newStoreWithActivity is a store whose stop-scan candidates come from an
// activity index on the Redis at addr.
func newStoreWithActivity(t testing.TB, addr string) (*Store, *mongo.Database, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	db := mongotest.DB(t)
	s, err := New(context.Background(), db, quiet, WithActivity(activity.New(rdb, db.Name())))
	if err != nil {
		t.Fatal(err)
	}
	return s, db, rdb
}

func TestIdle(t *testing.T) {
	for _, src := range idleSources {
		t.Run(src.name, func(t *testing.T) { testIdle(t, src.redis, src.lose) })
	}
}

func testIdle(t *testing.T, redisAddr func(testing.TB) string, lose bool) {
	s, _ := newStore(t)
	var rdb *redis.Client
	if redisAddr != nil {
		s, _, rdb = newStoreWithActivity(t, redisAddr(t))
	}
	ctx := context.Background()
	before := t0
	records := []struct {
		provider, id string
		lastActive   time.Time
		status       sandbox.Status
	}{
		{"docker", "000000000000000a", before.Add(-10 * time.Minute), sandbox.StatusRunning}, // idle
		{"docker", "000000000000000b", before.Add(-20 * time.Minute), sandbox.StatusRunning}, // idle, oldest
		{"docker", "000000000000000c", before.Add(-time.Millisecond), sandbox.StatusRunning}, // idle, just
		{"docker", "000000000000000d", before, sandbox.StatusRunning},                        // not before
		{"docker", "000000000000000e", before.Add(time.Minute), sandbox.StatusRunning},       // recent
		{"docker", "000000000000000f", before.Add(-time.Hour), sandbox.StatusStopped},        // stopped
		{"bwrap", "0000000000000010", before.Add(-time.Hour), sandbox.StatusRunning},         // other provider
	}
	for i, r := range records {
		inst := instance(r.id, fmt.Sprintf("chat%d", i))
		inst.Provider = r.provider
		if err := s.Touch(ctx, inst, r.lastActive); err != nil {
			t.Fatal(err)
		}
		if err := s.SetStatus(ctx, r.provider, r.id, r.status); err != nil {
			t.Fatal(err)
		}
	}
	if lose {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		provider string
		limit    int
		want     []string
	}{
		{"docker", 0, []string{"000000000000000b", "000000000000000a", "000000000000000c"}},
		{"docker", 2, []string{"000000000000000b", "000000000000000a"}},
		{"bwrap", 0, []string{"0000000000000010"}},
		{"host", 0, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/limit=%d", tt.provider, tt.limit), func(t *testing.T) {
			got, err := s.Idle(ctx, tt.provider, before, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, inst := range got {
				ids = append(ids, inst.SandboxID)
				if inst.Status != sandbox.StatusRunning || !inst.LastActiveAt.Before(before) || inst.Provider != tt.provider {
					t.Errorf("Idle returned %+v", inst)
				}
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("Idle(%s, limit %d) = %v, want %v", tt.provider, tt.limit, ids, tt.want)
			}
		})
	}
}

// TestActivityFollowsRecords: the activity index loses a sandbox when its
// record stops or goes, or when the stop scan finds its entry stale.
func TestActivityFollowsRecords(t *testing.T) {
	s, db, _ := newStoreWithActivity(t, redistest.Embedded(t))
	ctx := context.Background()
	idle := func() []string {
		t.Helper()
		got, err := s.Idle(ctx, "docker", t0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, inst := range got {
			ids = append(ids, inst.SandboxID)
		}
		return ids
	}
	for i, id := range []string{"000000000000000a", "000000000000000b", "000000000000000c", "000000000000000d"} {
		if err := s.Touch(ctx, instance(id, fmt.Sprintf("chat%d", i)), t0.Add(-time.Duration(10-i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := idle(), []string{"000000000000000a", "000000000000000b", "000000000000000c", "000000000000000d"}; !slices.Equal(got, want) {
		t.Fatalf("Idle = %v, want %v", got, want)
	}
	if err := s.SetStatus(ctx, "docker", "000000000000000a", sandbox.StatusStopped); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "docker", "000000000000000b"); err != nil {
		t.Fatal(err)
	}
	// Stopping (written by earlier versions) keeps the entry.
	if err := s.SetStatus(ctx, "docker", "000000000000000d", sandbox.StatusStopping); err != nil {
		t.Fatal(err)
	}
	// A record removed behind the store's back leaves a stale entry, until
	// the scan finds the record missing and forgets it.
	if _, err := db.Collection(Collection).DeleteOne(ctx, key("docker", "000000000000000c")); err != nil {
		t.Fatal(err)
	}
	if got, want := idle(), []string{"000000000000000c", "000000000000000d"}; !slices.Equal(got, want) {
		t.Fatalf("Idle after stop, delete and removal = %v, want %v", got, want)
	}
	s.ForgetActivity(ctx, "docker", "000000000000000c")
	if got, want := idle(), []string{"000000000000000d"}; !slices.Equal(got, want) {
		t.Errorf("Idle after ForgetActivity = %v, want %v", got, want)
	}
	// Reconciliation's refresh puts back what the index misses.
	if err := s.SetStatus(ctx, "docker", "000000000000000d", sandbox.StatusRunning); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, instance("000000000000000e", "chat-e"), t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.activity.Forget(ctx, "docker", "000000000000000e"); err != nil {
		t.Fatal(err)
	}
	all, err := s.ByProvider(ctx, "docker")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.RefreshActivity(ctx, "docker", all); err != nil || n != 1 {
		t.Errorf("RefreshActivity = %d, %v; want 1 (the forgotten entry)", n, err)
	}
	if got, want := idle(), []string{"000000000000000e", "000000000000000d"}; !slices.Equal(got, want) {
		t.Errorf("Idle after the refresh = %v, want %v", got, want)
	}
}

// TestTouchWithRedisDown: the record is the truth; an activity index that
// cannot be written does not fail the command.
func TestTouchWithRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	db := mongotest.DB(t)
	s, err := New(context.Background(), db, quiet, WithActivity(activity.New(rdb, db.Name())))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(context.Background(), instance("000000000000000a", "chat"), t0); err != nil {
		t.Fatalf("Touch with Redis down: %v, want the record written", err)
	}
	if inst, err := s.Get(context.Background(), "docker", "000000000000000a"); err != nil || inst.Status != sandbox.StatusRunning {
		t.Errorf("record = %+v, %v; want running", inst, err)
	}
	if _, err := s.Idle(context.Background(), "docker", t0.Add(time.Hour), 0); err == nil {
		t.Error("Idle with Redis down succeeded; want an error, not an answer from an index it cannot read")
	}
}

// TestIdleQueryPlan shows which index Idle's query uses. MongoDB must use
// the {status, lastActiveAt} index. FerretDB 1.x (SQLite) pushes down only
// _id equality, so it scans the collection whatever the indexes; the test
// pins that down so that a FerretDB that starts using indexes is noticed.
func TestIdleQueryPlan(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	for i := range 5 {
		if err := s.Touch(ctx, instance(fmt.Sprintf("%016x", i), fmt.Sprintf("chat%d", i)), t0.Add(time.Duration(-i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	indexes, plan := explainIdle(t, s, "docker", t0, 10)
	t.Logf("indexes used: %v; plan: %v", indexes, plan)
	if isFerretDB(t, db) {
		if len(indexes) != 0 {
			t.Errorf("FerretDB plan names indexes %v, want none", indexes)
		}
		if pushdown, _ := plan["filterPushdown"].(bool); pushdown {
			t.Errorf("FerretDB pushed the Idle filter down; plan: %v", plan)
		}
		if !strings.Contains(fmt.Sprint(plan["queryPlanner"]), "SCAN") {
			t.Errorf("FerretDB plan does not show a scan: %v", plan["queryPlanner"])
		}
		return
	}
	if !slices.Contains(indexes, IndexIdle) {
		t.Errorf("MongoDB plan uses indexes %v, want %s", indexes, IndexIdle)
	}
}

// explainIdle explains Idle's query and returns the names of the indexes
// its winning plan reads, with the whole explain reply.
func explainIdle(t *testing.T, s *Store, provider string, before time.Time, limit int) ([]string, bson.M) {
	t.Helper()
	filter, sort := idleQuery(provider, before)
	cmd := bson.D{
		{Key: "explain", Value: bson.D{
			{Key: "find", Value: Collection},
			{Key: "filter", Value: filter},
			{Key: "sort", Value: sort},
			{Key: "hint", Value: IndexIdle},
			{Key: "limit", Value: int64(limit)},
		}},
		{Key: "verbosity", Value: "queryPlanner"},
	}
	var reply bson.M
	if err := s.coll.Database().RunCommand(context.Background(), cmd).Decode(&reply); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var names []string
	collectIndexNames(field(reply["queryPlanner"], "winningPlan"), &names)
	return names, reply
}

// field returns the field key of a document decoded as bson.D (the
// driver's default for nested documents) or bson.M, nil when absent.
func field(doc any, key string) any {
	switch doc := doc.(type) {
	case bson.M:
		return doc[key]
	case bson.D:
		for _, e := range doc {
			if e.Key == key {
				return e.Value
			}
		}
	}
	return nil
}

func collectIndexNames(v any, names *[]string) {
	switch v := v.(type) {
	case bson.M:
		if name, ok := v["indexName"].(string); ok {
			*names = append(*names, name)
		}
		for _, e := range v {
			collectIndexNames(e, names)
		}
	case bson.D:
		for _, e := range v {
			if e.Key == "indexName" {
				if name, ok := e.Value.(string); ok {
					*names = append(*names, name)
				}
			}
			collectIndexNames(e.Value, names)
		}
	case bson.A:
		for _, e := range v {
			collectIndexNames(e, names)
		}
	}
}

// TestCollectIndexNames checks the plan reader on the shape of a MongoDB 7
// explain (classic and SBE), which this machine's embedded server does not
// produce: only the winning plan counts, however deep its index scan.
func TestCollectIndexNames(t *testing.T) {
	tests := []struct {
		name, explain string
		want          []string
	}{
		{"classic", `{"queryPlanner": {"winningPlan": {"stage": "LIMIT", "inputStage": {"stage": "FETCH",
			"inputStage": {"stage": "IXSCAN", "indexName": "status_lastActiveAt"}}},
			"rejectedPlans": [{"stage": "FETCH", "inputStage": {"stage": "IXSCAN", "indexName": "provider_sandboxId"}}]}}`,
			[]string{"status_lastActiveAt"}},
		{"sbe", `{"queryPlanner": {"winningPlan": {"queryPlan": {"stage": "FETCH",
			"inputStage": {"stage": "IXSCAN", "indexName": "status_lastActiveAt"}}, "slotBasedPlan": {}}}}`,
			[]string{"status_lastActiveAt"}},
		{"collection scan", `{"queryPlanner": {"winningPlan": {"stage": "COLLSCAN"}}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reply bson.M
			if err := bson.UnmarshalExtJSON([]byte(tt.explain), false, &reply); err != nil {
				t.Fatal(err)
			}
			var got []string
			collectIndexNames(field(reply["queryPlanner"], "winningPlan"), &got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("index names = %v, want %v", got, tt.want)
			}
		})
	}
}

// The exec path looks records up by _id, the only field FerretDB's SQLite
// backend indexes; a record under any other _id would be found by a full
// scan or not at all.
func TestRecordIDIsProviderAndSandbox(t *testing.T) {
	s, db := newStore(t)
	ctx := context.Background()
	inst := sandbox.Instance{Provider: "bwrap", SandboxID: "00112233aabbccdd", AppID: "a", UserID: "u", ChatID: "c"}
	if err := s.Touch(ctx, inst, time.Now()); err != nil {
		t.Fatal(err)
	}
	var doc bson.M
	err := db.Collection(Collection).FindOne(ctx, bson.D{{Key: "_id", Value: "bwrap/00112233aabbccdd"}}).Decode(&doc)
	if err != nil {
		t.Fatalf("no record with _id bwrap/00112233aabbccdd: %v", err)
	}
	if doc["provider"] != "bwrap" || doc["sandboxId"] != "00112233aabbccdd" {
		t.Fatalf("record = %v, want provider and sandboxId stored beside the _id", doc)
	}
}

// schemas/sandbox_instance.schema.json documents the record; a record the
// store writes must have every field it requires, of the kind it names.
func TestRecordMatchesSchema(t *testing.T) {
	raw, err := os.ReadFile("../../schemas/sandbox_instance.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	s, db := newStore(t)
	ctx := context.Background()
	if err := s.Touch(ctx, instance("aabbccdd00112233", "chat-schema"), t0); err != nil {
		t.Fatal(err)
	}
	var doc bson.M
	if err := db.Collection(Collection).FindOne(ctx, bson.D{}).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, field := range schema.Required {
		if _, ok := doc[field]; !ok {
			t.Errorf("record lacks %q, which the schema requires; record: %v", field, doc)
		}
	}
	for field := range doc {
		if _, ok := schema.Properties[field]; !ok {
			t.Errorf("record has %q, which the schema does not describe", field)
		}
	}
	for _, field := range []string{"lastActiveAt", "createdAt"} {
		if _, ok := doc[field].(bson.DateTime); !ok {
			t.Errorf("%s is %T, want a BSON date", field, doc[field])
		}
	}
}

package activity_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox/activity"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// forEachRedis runs fn on a real redis-server and on the embedded Redis
// the engine falls back to.
func forEachRedis(t *testing.T, fn func(t *testing.T, rdb *redis.Client)) {
	for _, r := range []struct {
		name  string
		start func(testing.TB) string
	}{
		{"redis-server", func(t testing.TB) string { return redistest.Server(t) }},
		{"embedded", redistest.Embedded},
	} {
		t.Run(r.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: r.start(t)})
			t.Cleanup(func() { rdb.Close() })
			fn(t, rdb)
		})
	}
}

func ids(entries []activity.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.SandboxID
	}
	return out
}

func TestBefore(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		x := activity.New(rdb, "db1")
		if _, err := x.Fill(ctx, "bwrap", nil); err != nil {
			t.Fatal(err)
		}
		for i, id := range []string{"c", "a", "b", "d"} {
			if err := x.Active(ctx, "bwrap", id, t0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		// Another provider and another database share nothing with it.
		if err := x.Active(ctx, "docker", "other-provider", t0); err != nil {
			t.Fatal(err)
		}
		if err := activity.New(rdb, "db2").Active(ctx, "bwrap", "other-db", t0); err != nil {
			t.Fatal(err)
		}

		for _, tc := range []struct {
			name   string
			before time.Time
			limit  int
			want   []string
		}{
			{"all before, oldest first", t0.Add(time.Hour), 0, []string{"c", "a", "b", "d"}},
			{"limit", t0.Add(time.Hour), 2, []string{"c", "a"}},
			{"strictly before", t0.Add(2 * time.Minute), 0, []string{"c", "a"}},
			{"none", t0, 0, []string{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, filled, err := x.Before(ctx, "bwrap", tc.before, tc.limit)
				if err != nil || !filled {
					t.Fatalf("Before: filled %v, %v; want filled", filled, err)
				}
				if !slices.Equal(ids(got), tc.want) {
					t.Errorf("Before(%s, limit %d) = %v, want %v", tc.before.Format(time.TimeOnly), tc.limit, ids(got), tc.want)
				}
			})
		}
		got, _, _ := x.Before(ctx, "bwrap", t0.Add(time.Hour), 1)
		if len(got) != 1 || !got[0].LastActiveAt.Equal(t0) {
			t.Errorf("oldest entry = %+v, want c at %s", got, t0)
		}
	})
}

// TestTimeOnlyMovesForward: a refresh from records read a moment ago must
// not hide a use recorded since.
func TestTimeOnlyMovesForward(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		x := activity.New(rdb, "db")
		if err := x.Active(ctx, "bwrap", "s1", t0.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		added, err := x.Fill(ctx, "bwrap", []activity.Entry{{SandboxID: "s1", LastActiveAt: t0}, {SandboxID: "s2", LastActiveAt: t0}})
		if err != nil {
			t.Fatal(err)
		}
		if added != 1 {
			t.Errorf("Fill added %d, want 1 (s2; s1 was there)", added)
		}
		if err := x.Active(ctx, "bwrap", "s2", t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, _, err := x.Before(ctx, "bwrap", t0.Add(5*time.Minute), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), []string{"s2"}) || !got[0].LastActiveAt.Equal(t0) {
			t.Errorf("Before = %+v, want only s2 at %s", got, t0)
		}
	})
}

// TestLossIsDetected: an index Redis lost says so, until it is filled.
func TestLossIsDetected(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		x := activity.New(rdb, "db")
		if _, filled, err := x.Before(ctx, "bwrap", t0, 0); err != nil || filled {
			t.Fatalf("new index: filled %v, %v; want not filled", filled, err)
		}
		if _, err := x.Fill(ctx, "bwrap", []activity.Entry{{SandboxID: "s1", LastActiveAt: t0}}); err != nil {
			t.Fatal(err)
		}
		if got, filled, err := x.Before(ctx, "bwrap", t0.Add(time.Minute), 0); err != nil || !filled || len(got) != 1 {
			t.Fatalf("after Fill: %v, filled %v, %v; want s1, filled", got, filled, err)
		}
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// A command after the loss puts its sandbox back, but the index
		// is still incomplete.
		if err := x.Active(ctx, "bwrap", "s2", t0); err != nil {
			t.Fatal(err)
		}
		if _, filled, err := x.Before(ctx, "bwrap", t0.Add(time.Minute), 0); err != nil || filled {
			t.Errorf("after FLUSHALL: filled %v, %v; want not filled", filled, err)
		}
	})
}

func TestForget(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		x := activity.New(rdb, "db")
		if _, err := x.Fill(ctx, "bwrap", []activity.Entry{{SandboxID: "s1", LastActiveAt: t0}, {SandboxID: "s2", LastActiveAt: t0}, {SandboxID: "s3", LastActiveAt: t0}}); err != nil {
			t.Fatal(err)
		}
		if err := x.Forget(ctx, "bwrap", "s1", "s3", "never-there"); err != nil {
			t.Fatal(err)
		}
		if err := x.Forget(ctx, "bwrap"); err != nil {
			t.Fatalf("Forget of nothing: %v", err)
		}
		got, _, err := x.Before(ctx, "bwrap", t0.Add(time.Minute), 0)
		if err != nil || !slices.Equal(ids(got), []string{"s2"}) {
			t.Errorf("after Forget: %v, %v; want [s2]", ids(got), err)
		}
	})
}

// TestRunning: every entry with the user it was started for; Active keeps
// the user Started recorded, Fill records the users it is given, Forget
// takes entry and user together, and an entry only Active wrote has no
// user (the caller reads its record).
func TestRunning(t *testing.T) {
	forEachRedis(t, func(t *testing.T, rdb *redis.Client) {
		ctx := context.Background()
		x := activity.New(rdb, "db")
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(x.Started(ctx, "bwrap", activity.Entry{SandboxID: "s1", LastActiveAt: t0, UserID: "u:alice"}))
		must(x.Active(ctx, "bwrap", "s1", t0.Add(time.Minute)))
		must(x.Started(ctx, "bwrap", activity.Entry{SandboxID: "s2", LastActiveAt: t0, UserID: "share:L:v1"}))
		must(x.Active(ctx, "bwrap", "s3", t0))
		must(x.Started(ctx, "docker", activity.Entry{SandboxID: "d1", LastActiveAt: t0, UserID: "u:bob"}))
		_, err := x.Fill(ctx, "bwrap", []activity.Entry{{SandboxID: "s4", LastActiveAt: t0, UserID: "u:carol"}, {SandboxID: "s5", LastActiveAt: t0}})
		must(err)
		must(x.Forget(ctx, "bwrap", "s2"))
		// Started again after a stop, the time never moves back.
		must(x.Started(ctx, "bwrap", activity.Entry{SandboxID: "s1", LastActiveAt: t0, UserID: "u:alice"}))

		got, filled, err := x.Running(ctx, "bwrap")
		must(err)
		users := map[string]string{}
		for _, e := range got {
			users[e.SandboxID] = e.UserID
		}
		want := map[string]string{"s1": "u:alice", "s3": "", "s4": "u:carol", "s5": ""}
		if !filled || len(users) != len(want) {
			t.Fatalf("Running = %+v (filled %v); want the users %v", got, filled, want)
		}
		for id, u := range want {
			if got, ok := users[id]; !ok || got != u {
				t.Errorf("sandbox %s: user %q (listed %v), want %q", id, got, ok, u)
			}
		}
		if got[0].SandboxID == "s1" || !got[len(got)-1].LastActiveAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("s1's time moved back: %+v", got)
		}

		// Redis lost it all: nothing listed, not filled.
		must(rdb.FlushAll(ctx).Err())
		if got, filled, err := x.Running(ctx, "bwrap"); err != nil || filled || len(got) != 0 {
			t.Errorf("after FLUSHALL: %+v, filled %v, %v; want nothing, not filled", got, filled, err)
		}
	})
}

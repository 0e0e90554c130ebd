package web_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/chat"
)

// fakeNow is a clock the test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) Add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// redises runs a test on a real redis-server and on the embedded Redis
// the engine falls back to.
func redises(t *testing.T, test func(t *testing.T, rdb *redis.Client)) {
	for _, r := range []struct {
		name string
		addr func(testing.TB) string
	}{{"redis-server", func(t testing.TB) string { return redistest.Server(t) }}, {"embedded", redistest.Embedded}} {
		t.Run(r.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: r.addr(t)})
			t.Cleanup(func() { rdb.Close() })
			test(t, rdb)
		})
	}
}

// acquireAll asks for one place per user at once and returns the
// releases of those granted and the refusals.
func acquireAll(t *testing.T, l *chat.RunLimits, users []string) (granted []func(), refused []*chat.RunLimitError) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			release, err := l.Acquire(context.Background(), u)
			mu.Lock()
			defer mu.Unlock()
			var e *chat.RunLimitError
			switch {
			case err == nil:
				granted = append(granted, release)
			case errors.As(err, &e) && errors.Is(err, chat.ErrRunLimit):
				refused = append(refused, e)
			default:
				t.Errorf("Acquire(%s): %v, want a place or a *RunLimitError", u, err)
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, r := range granted {
			r()
		}
	})
	return granted, refused
}

// aliceOwns makes u:alice the owner of apps A and B and of share link L's
// app; every other user is its own owner.
func aliceOwns(_ context.Context, userID string) (string, error) {
	for _, g := range []string{"app:A:", "app:B:", "share:L:"} {
		if strings.HasPrefix(userID, g) {
			return "u:alice", nil
		}
	}
	return userID, nil
}

func repeat(user string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = user
	}
	return out
}

// TestRunLimitsCaps: under concurrency each cap grants exactly its number
// of places, refusals say which cap, and a released place is taken again.
func TestRunLimitsCaps(t *testing.T) {
	t.Parallel()
	redises(t, func(t *testing.T, rdb *redis.Client) {
		tests := []struct {
			name    string
			limits  chat.RunLimits
			users   []string
			granted int
			refusal chat.RunLimitError
			text    string
		}{
			{"per user", chat.RunLimits{PerUser: 3}, repeat("u:alice", 20), 3,
				chat.RunLimitError{Cap: sandbox.CapUser, Limit: 3, Use: 3}, "you already have 3 chat runs in progress and the limit per user is 3"},
			{"per share link", chat.RunLimits{PerUser: 5, PerGroup: 2}, []string{"share:L:a", "share:L:b", "share:L:c", "share:L:a", "share:L:d"}, 2,
				chat.RunLimitError{Cap: sandbox.CapGroup, Group: "share:L:", Limit: 2, Use: 2}, "share link L already has 2 chat runs in progress and its limit is 2"},
			// An app key's end users count together (T6): looping
			// customUid on one key takes only its app's places.
			{"per app", chat.RunLimits{PerUser: 5, PerGroup: 9, PerApp: 2}, []string{"app:A:u1", "app:A:u2", "app:A:u3", "app:A:u1", "app:A:u4"}, 2,
				chat.RunLimitError{Cap: sandbox.CapGroup, Group: "app:A:", Limit: 2, Use: 2}, "app A (its key users) already has 2 chat runs in progress and its limit is 2"},
			// An owner's apps, links and own chats count together: many
			// apps cannot take every place either.
			{"per owner", chat.RunLimits{PerUser: 5, PerGroup: 9, PerApp: 9, PerOwner: 3, Owner: aliceOwns},
				[]string{"app:A:u1", "share:L:a", "app:B:u1", "u:alice", "app:A:u2", "share:L:b"}, 3,
				chat.RunLimitError{Cap: sandbox.CapOwner, Owner: "u:alice", Limit: 3, Use: 3}, "owner u:alice (its own chats, its apps' key users and its share links' visitors together) already has 3 chat runs in progress and the limit per owner is 3"},
			{"global", chat.RunLimits{Global: 4, PerUser: 3}, []string{"u:a", "u:b", "u:c", "u:d", "u:e", "u:f", "share:L:a", "share:L:b"}, 4,
				chat.RunLimitError{Cap: sandbox.CapGlobal, Limit: 4, Use: 4}, "the server already has 4 chat runs in progress and its limit is 4"},
		}
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				l := tc.limits
				l.Redis, l.Namespace = rdb, fmt.Sprintf("caps%d", i)
				granted, refused := acquireAll(t, &l, tc.users)
				if len(granted) != tc.granted || len(refused) != len(tc.users)-tc.granted {
					t.Fatalf("%d granted and %d refused, want %d and %d", len(granted), len(refused), tc.granted, len(tc.users)-tc.granted)
				}
				for _, e := range refused {
					if e.Cap != tc.refusal.Cap || e.Group != tc.refusal.Group || e.Owner != tc.refusal.Owner || e.Limit != tc.refusal.Limit || e.Use != tc.refusal.Use || e.RetryAfter <= 0 {
						t.Errorf("refusal %+v, want %+v with a RetryAfter", *e, tc.refusal)
					}
					if !strings.Contains(e.Error(), tc.text) {
						t.Errorf("refusal says %q, want %q", e, tc.text)
					}
				}
				// A place given back is taken by the next run; releasing
				// twice gives back one place only.
				granted[0]()
				granted[0]()
				again, refused := acquireAll(t, &l, tc.users[:2])
				if len(again) != 1 || len(refused) != 1 {
					t.Fatalf("after one release: %d granted, %d refused; want 1 and 1", len(again), len(refused))
				}
			})
		}

		// Other users, share links and owners are not held back by a
		// full user, link or owner.
		l := chat.RunLimits{Redis: rdb, Namespace: "others", PerUser: 1, PerGroup: 1, PerOwner: 2, Owner: aliceOwns}
		acquireAll(t, &l, []string{"u:alice", "share:L:a"})
		granted, refused := acquireAll(t, &l, []string{"u:bob", "share:M:a", "u:alice", "share:L:b", "app:A:u1"})
		if len(granted) != 2 || len(refused) != 3 {
			t.Fatalf("%d granted, %d refused; want bob and link M granted, alice, link L and alice's app refused", len(granted), len(refused))
		}
		// A run whose owner cannot be read goes ahead, uncounted by owner.
		l = chat.RunLimits{Redis: rdb, Namespace: "unread", PerOwner: 1, Owner: func(context.Context, string) (string, error) {
			return "", errors.New("database down")
		}}
		if granted, _ := acquireAll(t, &l, []string{"app:A:u1", "app:A:u2"}); len(granted) != 2 {
			t.Fatalf("%d runs granted with unreadable owners, want 2", len(granted))
		}
	})
}

// TestRunLimitsAcrossProcesses: two limiters on one Redis, as two engine
// processes, share the caps exactly; the places of a process that died
// (never released) come free once their lease has expired, and not before.
func TestRunLimitsAcrossProcesses(t *testing.T) {
	t.Parallel()
	redises(t, func(t *testing.T, rdb *redis.Client) {
		clock := &fakeNow{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
		// The lease is long in real time so that nothing renews it: the
		// test moves the injected clock instead.
		a := chat.RunLimits{Redis: rdb, Namespace: "two", Global: 5, Lease: time.Hour, Now: clock.Now}
		b := a
		var mu sync.Mutex
		var wg sync.WaitGroup
		var granted []func()
		refused := 0
		for i := range 16 {
			l := &a
			if i%2 == 1 {
				l = &b
			}
			wg.Go(func() {
				release, err := l.Acquire(context.Background(), fmt.Sprintf("u:%d", i))
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					granted = append(granted, release)
				} else if errors.Is(err, chat.ErrRunLimit) {
					refused++
				} else {
					t.Errorf("Acquire: %v", err)
				}
			})
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, r := range granted {
				r()
			}
		})
		if len(granted) != 5 || refused != 11 {
			t.Fatalf("%d granted, %d refused over two processes; want 5 and 11", len(granted), refused)
		}
		use, err := b.Use(context.Background())
		if err != nil || use.Total != 5 {
			t.Fatalf("Use = %+v, %v; want 5 runs", use, err)
		}

		// The processes die holding their places.
		clock.Add(59 * time.Minute)
		if _, err := b.Acquire(context.Background(), "u:late"); !errors.Is(err, chat.ErrRunLimit) {
			t.Fatalf("before the leases expire: %v, want a refusal", err)
		}
		clock.Add(2 * time.Minute)
		release, err := b.Acquire(context.Background(), "u:late")
		if err != nil {
			t.Fatalf("after the leases expired: %v, want a place", err)
		}
		release()
	})
}

// TestRunLimitsRenewal: a run that lasts longer than its lease keeps its
// place, because it renews the lease while it goes on.
func TestRunLimitsRenewal(t *testing.T) {
	t.Parallel()
	redises(t, func(t *testing.T, rdb *redis.Client) {
		clock := &fakeNow{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
		const lease = 90 * time.Millisecond // renewed every 30 ms of real time
		l := &chat.RunLimits{Redis: rdb, Namespace: "renew", PerUser: 1, Lease: lease, Now: clock.Now}
		release, err := l.Acquire(context.Background(), "u:alice")
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		key := "flowbox:runs:{renew}:user:u:alice"
		for step := range 3 {
			clock.Add(lease / 2)
			want := float64(clock.Now().Add(lease).UnixMilli())
			// Wait for a renewal at the new time, however slow the machine.
			deadline := time.Now().Add(time.Minute)
			for {
				zs, err := rdb.ZRangeWithScores(context.Background(), key, 0, -1).Result()
				if err == nil && len(zs) == 1 && zs[0].Score == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("step %d: the lease was not renewed to %v: %+v, %v", step, want, zs, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// Well past the first expiry, the run still holds its place.
		if _, err := l.Acquire(context.Background(), "u:alice"); !errors.Is(err, chat.ErrRunLimit) {
			t.Fatalf("a second run beside a renewed one: %v, want a refusal", err)
		}
		release()
		r2, err := l.Acquire(context.Background(), "u:alice")
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		r2()
	})
}

// TestRunLimitsUse counts the runs in progress by user, by share link and
// by owner.
func TestRunLimitsUse(t *testing.T) {
	t.Parallel()
	redises(t, func(t *testing.T, rdb *redis.Client) {
		l := &chat.RunLimits{Redis: rdb, Namespace: "use", Owner: aliceOwns}
		acquireAll(t, l, []string{"u:alice", "u:alice", "u:bob", "share:L:a", "share:L:b", "share:M:a"})
		use, err := l.Use(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if use.Total != 6 || use.Users["u:alice"] != 2 || use.Users["u:bob"] != 1 || use.Groups["share:L:"] != 2 || use.Groups["share:M:"] != 1 || len(use.Groups) != 2 {
			t.Fatalf("Use = %+v", use)
		}
		if use.Owners["u:alice"] != 4 || use.Owners["u:bob"] != 1 || use.Owners["share:M:a"] != 1 || len(use.Owners) != 3 {
			t.Fatalf("Use.Owners = %v, want alice 4 (hers and link L's), bob 1, link M's visitor 1", use.Owners)
		}
	})
}

// TestRunLimitsWithoutRedis: no limiter, or one whose Redis is gone, lets
// runs through rather than stopping every chat.
func TestRunLimitsWithoutRedis(t *testing.T) {
	t.Parallel()
	var none *chat.RunLimits
	release, err := none.Acquire(context.Background(), "u:alice")
	if err != nil {
		t.Fatal(err)
	}
	release()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Embedded(t), MaxRetries: -1})
	rdb.Close()
	l := &chat.RunLimits{Redis: rdb, PerUser: 1, Log: slog.New(slog.DiscardHandler)}
	for range 2 {
		release, err := l.Acquire(context.Background(), "u:alice")
		if err != nil {
			t.Fatalf("Redis closed: %v, want the run let through", err)
		}
		release()
	}
}

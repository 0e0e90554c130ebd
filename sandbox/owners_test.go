package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCheckOwner: the owner cap counts every running sandbox of the
// starting user's owner, over the owner's own chats, apps and share
// links, and no one else's; the narrower caps still refuse first.
func TestCheckOwner(t *testing.T) {
	owners := map[string]string{
		"u:alice": "u:alice", "app:A1:c1": "u:alice", "app:A1:c2": "u:alice", "app:A2:c1": "u:alice", "share:L1:v1": "u:alice",
		"u:bob": "u:bob", "app:B1:c1": "u:bob",
		"app:gone:c1": "", // an app deleted meanwhile
	}
	tests := []struct {
		name     string
		caps     Caps
		running  []string
		user     string
		included bool
		want     *LimitError // nil: admitted
	}{
		{"apps and links of one owner together", Caps{PerOwner: 3},
			[]string{"app:A1:c1", "app:A2:c1", "share:L1:v1", "u:bob"}, "app:A2:c1", false,
			&LimitError{Cap: CapOwner, Owner: "u:alice", Limit: 3, Use: 3}},
		{"the owner's own chats count", Caps{PerOwner: 3},
			[]string{"u:alice", "app:A1:c1", "share:L1:v1"}, "u:alice", false,
			&LimitError{Cap: CapOwner, Owner: "u:alice", Limit: 3, Use: 3}},
		{"another owner's user starts", Caps{PerOwner: 3},
			[]string{"app:A1:c1", "app:A2:c1", "share:L1:v1"}, "app:B1:c1", false, nil},
		{"below the cap", Caps{PerOwner: 4},
			[]string{"app:A1:c1", "app:A2:c1", "share:L1:v1"}, "app:A1:c1", false, nil},
		{"the starting sandbox's own record is left out", Caps{PerOwner: 3},
			[]string{"app:A1:c1", "app:A2:c1", "u:alice"}, "app:A2:c1", true, nil},
		{"no owner, no owner cap", Caps{PerOwner: 1},
			[]string{"app:gone:c1", "app:gone:c1"}, "app:gone:c1", false, nil},
		{"off", Caps{PerOwner: 0, Global: 10},
			[]string{"app:A1:c1", "app:A2:c1", "share:L1:v1"}, "app:A1:c1", false, nil},
		{"the app's cap before the owner's", Caps{PerApp: 1, PerOwner: 2},
			[]string{"app:A1:c1", "app:A2:c1"}, "app:A1:c2", false,
			&LimitError{Cap: CapGroup, Group: "app:A1:", Limit: 1, Use: 1}},
		{"the owner's cap before the global one", Caps{Global: 2, PerOwner: 2},
			[]string{"app:A1:c1", "u:alice"}, "share:L1:v1", false,
			&LimitError{Cap: CapOwner, Owner: "u:alice", Limit: 2, Use: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			running := slices.Clone(tc.running)
			var owned map[string]string
			if tc.caps.PerOwner > 0 {
				owned = owners
			}
			err := tc.caps.check(running, tc.user, tc.included, owned)
			if !slices.Equal(running, tc.running) {
				t.Errorf("check changed its users: %v, want %v", running, tc.running)
			}
			var got *LimitError
			errors.As(err, &got)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("check = %v, want admitted", err)
			case tc.want != nil && (got == nil || *got != *tc.want):
				t.Fatalf("check = %#v, want %#v", err, tc.want)
			}
		})
	}
}

// TestCapsOwners: count resolves the owner of every running user once,
// only while the owner cap is on, and a failed read fails the count.
func TestCapsOwners(t *testing.T) {
	var asked []string
	caps := Caps{PerOwner: 2, Owner: func(_ context.Context, u string) (string, error) {
		asked = append(asked, u)
		if u == "app:broken:c1" {
			return "", errors.New("database down")
		}
		return "o:" + u, nil
	}}
	got, err := caps.owners(context.Background(), []string{"a", "b", "a", "c"}, "a")
	if err != nil || len(got) != 3 || got["b"] != "o:b" {
		t.Fatalf("owners = %v, %v; want a, b and c resolved", got, err)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(asked, want) {
		t.Errorf("asked %v, want each user once: %v", asked, want)
	}
	if _, err := caps.owners(context.Background(), []string{"app:broken:c1"}, "a"); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Errorf("a failed read: %v, want its error", err)
	}
	asked = nil
	caps.PerOwner = 0
	if got, err := caps.owners(context.Background(), []string{"a", "b"}, "a"); got != nil || err != nil || len(asked) != 0 {
		t.Errorf("owner cap off: %v, %v, asked %v; want nothing asked", got, err, asked)
	}
	// Without Owner every user is its own owner.
	if o, err := (Caps{}).OwnerOf(context.Background(), "u:alice"); o != "u:alice" || err != nil {
		t.Errorf("default owner = %q, %v; want u:alice", o, err)
	}
}

// fakeApps answers Owners' reads and counts them.
type fakeApps struct {
	mu          sync.Mutex
	owner, link map[string]string // app → owner, link → app
	reads       int
	fail        bool
}

func (f *fakeApps) appOwner(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail {
		return "", errors.New("database down")
	}
	return f.owner[id], nil
}

func (f *fakeApps) linkApp(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail {
		return "", errors.New("database down")
	}
	return f.link[id], nil
}

func (f *fakeApps) set(fn func()) { f.mu.Lock(); fn(); f.mu.Unlock() }

func TestOwners(t *testing.T) {
	f := &fakeApps{owner: map[string]string{"A1": "u:alice", "A2": "u:alice", "B1": "u:bob"}, link: map[string]string{"L1": "A2"}}
	now := time.Unix(1000, 0)
	o := &Owners{AppOwner: f.appOwner, LinkApp: f.linkApp, TTL: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	owner := func(user string) string {
		t.Helper()
		got, err := o.Owner(ctx, user)
		if err != nil {
			t.Fatalf("Owner(%s): %v", user, err)
		}
		return got
	}
	for _, tc := range []struct{ user, want string }{
		{"u:alice", "u:alice"},
		{"svc:x:y", "svc:x:y"},
		{"plain", "plain"},
		{"app:A1:c1", "u:alice"},
		{"app:A1", "u:alice"}, // the key itself (the sandbox API)
		{"app:B1:c1:extra", "u:bob"},
		{"share:L1:v1", "u:alice"},
		{"app:gone:c1", ""},   // deleted app
		{"share:gone:v1", ""}, // revoked link
		{"app::c1", ""},
		{"share:", ""},
	} {
		if got := owner(tc.user); got != tc.want {
			t.Errorf("Owner(%q) = %q, want %q", tc.user, got, tc.want)
		}
	}

	// Kept for TTL, unknown ones too: no read for the same names.
	reads := f.reads
	owner("app:A1:c2")
	owner("share:L1:v2")
	owner("app:gone:c2")
	if f.reads != reads {
		t.Errorf("%d reads for names read before, want none", f.reads-reads)
	}
	// A change is seen once the TTL has passed.
	f.set(func() { f.owner["A1"] = "u:carol" })
	if got := owner("app:A1:c1"); got != "u:alice" {
		t.Errorf("within the TTL: %q, want the kept u:alice", got)
	}
	now = now.Add(time.Minute)
	if got := owner("app:A1:c1"); got != "u:carol" {
		t.Errorf("after the TTL: %q, want u:carol", got)
	}
	// A transfer is seen at once, whatever a read finds meanwhile.
	o.Moved("A2", "u:dave")
	f.set(func() { f.owner["A2"] = "u:stale" })
	if got := owner("share:L1:v1"); got != "u:dave" {
		t.Errorf("after the app moved: %q, want u:dave", got)
	}
	// A failed read is an error, and is not kept.
	now = now.Add(time.Minute)
	f.set(func() { f.fail = true })
	if _, err := o.Owner(ctx, "app:B1:c1"); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Errorf("a failed read: %v, want its error", err)
	}
	f.set(func() { f.fail = false })
	if got := owner("app:B1:c1"); got != "u:bob" {
		t.Errorf("after a failed read: %q, want u:bob", got)
	}
}

// TestOwnersConcurrent: Owners is read and told of moves from many
// goroutines at once (go test -race).
func TestOwnersConcurrent(t *testing.T) {
	f := &fakeApps{owner: map[string]string{"A1": "u:alice"}, link: map[string]string{"L1": "A1"}}
	o := &Owners{AppOwner: f.appOwner, LinkApp: f.linkApp, TTL: time.Nanosecond}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				if i == 0 {
					o.Moved("A1", "u:alice")
				}
				if got, err := o.Owner(context.Background(), "share:L1:v1"); got != "u:alice" || err != nil {
					t.Errorf("Owner = %q, %v; want u:alice", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

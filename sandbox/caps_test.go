package sandbox_test

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
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

func TestUserGroups(t *testing.T) {
	tests := []struct{ user, link, app string }{
		{"share:L1:v9", "share:L1:", ""},
		{"share:L1:v9:extra", "share:L1:", ""},
		{"share:L1", "", ""},
		{"share::v", "", ""},
		{"app:A1:c9", "", "app:A1:"},
		{"app:A1:c9:extra", "", "app:A1:"},
		{"app:A1", "", ""},
		{"app::c", "", ""},
		{"u:alice", "", ""},
		{"svc:share:L1:v9", "", ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		if got := sandbox.ShareLinkGroup(tc.user); got != tc.link {
			t.Errorf("ShareLinkGroup(%q) = %q, want %q", tc.user, got, tc.link)
		}
		if got := sandbox.AppKeyGroup(tc.user); got != tc.app {
			t.Errorf("AppKeyGroup(%q) = %q, want %q", tc.user, got, tc.app)
		}
		if got, want := sandbox.UserGroup(tc.user), tc.link+tc.app; got != want {
			t.Errorf("UserGroup(%q) = %q, want %q", tc.user, got, want)
		}
	}
}

func TestLimitErrorText(t *testing.T) {
	tests := []struct {
		err  sandbox.LimitError
		want []string
	}{
		{sandbox.LimitError{Cap: sandbox.CapUser, Limit: 3, Use: 3}, []string{"refused", "you already have 3 running sandboxes", "limit per user is 3", "delete chats"}},
		{sandbox.LimitError{Cap: sandbox.CapGroup, Group: "share:L1:", Limit: 20, Use: 21}, []string{"share link L1 already has 21 running sandboxes", "its limit is 20"}},
		{sandbox.LimitError{Cap: sandbox.CapGlobal, Limit: 200, Use: 200}, []string{"the server already runs 200 sandboxes", "its limit is 200", "retry"}},
		{sandbox.LimitError{Cap: sandbox.CapOwner, Owner: "u:alice", Limit: 40, Use: 40}, []string{"owner u:alice (its own chats, its apps' key users and its share links' visitors together) already has 40 running sandboxes", "the limit per owner is 40", "wait for idle ones to stop"}},
	}
	for _, tc := range tests {
		err := error(&tc.err)
		if !errors.Is(fmt.Errorf("start: %w", err), sandbox.ErrLimit) || errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("%+v: errors.Is ErrLimit must hold and ErrUnavailable must not", tc.err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", tc.err, err, w)
			}
		}
	}
}

// TestCapsManager runs the caps on bwrap and the test database: many
// concurrent first commands admit exactly the cap, the refused ones create
// nothing and say why, a running sandbox's commands are never refused,
// and a stopped sandbox counts again when it is started.
func TestCapsManager(t *testing.T) {
	tests := []struct {
		name  string
		caps  sandbox.Caps
		users func(i int) string // the user of the i-th chat
		want  int                // sandboxes admitted
		text  string             // what a refusal says
	}{
		// Without a store that can stop idle sandboxes (IdleStopper), the
		// user's cap refuses as the others do; TestCapUserStopsIdle has the
		// stop.
		{"per user", sandbox.Caps{PerUser: 3}, func(int) string { return "u:alice" }, 3, "you already have 3 running sandboxes, all of them running commands, and the limit per user is 3"},
		{"per app", sandbox.Caps{PerUser: 10, PerApp: 3}, func(i int) string { return fmt.Sprintf("app:A1:c%d", i) }, 3, "app A1 (its key users) already has 3 running sandboxes"},
		{"per share link", sandbox.Caps{PerUser: 10, PerGroup: 4}, func(i int) string { return fmt.Sprintf("share:L1:v%d", i) }, 4, "share link L1 already has 4 running sandboxes"},
		{"global", sandbox.Caps{Global: 2, PerUser: 10}, func(i int) string { return fmt.Sprintf("u:%d", i) }, 2, "the server already runs 2 sandboxes"},
		// One owner's two apps and a share link, each under its own cap.
		{"per owner", sandbox.Caps{PerUser: 10, PerApp: 4, PerGroup: 4, PerOwner: 5, Owner: ownerOfAliceApps}, func(i int) string {
			return fmt.Sprintf([]string{"app:A1:c%d", "app:A2:c%d", "share:L1:v%d"}[i%3], i)
		}, 5, "owner u:alice (its own chats, its apps' key users and its share links' visitors together) already has 5 running sandboxes"},
	}
	for _, tc := range tests {
		// With a warm pool (empty here: the path, not the adoption, is
		// what differs), a new sandbox's record is inserted first and the
		// caps counted after it.
		// With the activity index (Redis, always there in the product),
		// the caps count its users, and recount exactly before refusing.
		for _, pooled := range []bool{false, true} {
			for _, index := range []bool{false, true} {
				name := tc.name
				if pooled {
					name += ", warm pool on"
				}
				if index {
					name += ", activity index"
				}
				t.Run(name, func(t *testing.T) { testCapsManager(t, tc.caps, tc.users, tc.want, tc.text, pooled, index) })
			}
		}
	}
}

// ownerOfAliceApps makes u:alice the owner of the apps "A1" and "A2" and
// of the app of the share link "L1".
func ownerOfAliceApps(_ context.Context, userID string) (string, error) {
	for _, g := range []string{"app:A1:", "app:A2:", "share:L1:"} {
		if strings.HasPrefix(userID, g) {
			return "u:alice", nil
		}
	}
	return userID, nil
}

func testCapsManager(t *testing.T, caps sandbox.Caps, users func(int) string, want int, text string, pooled, index bool) {
	e := newEnv(t)
	var idx *activity.Index
	if index {
		rdb := redis.NewClient(&redis.Options{Addr: redistest.Embedded(t)})
		t.Cleanup(func() { rdb.Close() })
		idx = activity.New(rdb, e.db.Name())
		store, err := mongostore.New(context.Background(), e.db, slog.Default(), mongostore.WithActivity(idx))
		if err != nil {
			t.Fatal(err)
		}
		e.store = store
	}
	// Only what the caps count with: no stop of idle sandboxes.
	store := countingStore{Store: e.store, RunningCounter: e.store}
	cfg := sandbox.Config{Provider: e.provider, Store: store, Now: e.clock.Now, Caps: caps}
	if pooled {
		cfg.Pool = sandbox.PoolConfig{Size: 1, Store: e.store}
	}
	m, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	scopes := make([]sandbox.Scope, n)
	for i := range scopes {
		scopes[i] = sandbox.Scope{AppID: "app", UserID: users(i), ChatID: fmt.Sprintf("chat%d", i)}
		id := scopes[i].SandboxID()
		t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
	}
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range scopes {
		wg.Go(func() {
			res, err := m.Exec(ctx(t), scopes[i], sandbox.ExecRequest{Command: "echo hi"})
			out[i] = outcome{res, err}
		})
	}
	wg.Wait()
	var admitted []sandbox.Scope
	for i, o := range out {
		var limit *sandbox.LimitError
		switch {
		case o.err == nil && o.res.Stdout == "hi\n":
			admitted = append(admitted, scopes[i])
		case errors.As(o.err, &limit):
			if o.res.ExitCode != -1 || !strings.Contains(o.res.Stderr, text) || !strings.Contains(o.err.Error(), text) {
				t.Errorf("refusal %d: result %+v, err %v; want exit code -1 and both saying %q", i, o.res, o.err, text)
			}
			if _, err := m.Lookup(ctx(t), scopes[i]); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("refused chat %d has a record (%v)", i, err)
			}
		default:
			t.Errorf("command %d: %+v, %v; want hi or a refusal", i, o.res, o.err)
		}
	}
	if len(admitted) != want {
		t.Fatalf("%d sandboxes admitted, want %d", len(admitted), want)
	}
	if got := resources(t, e); got != want {
		t.Fatalf("the provider holds %d sandboxes, want %d", got, want)
	}

	// At the cap, an admitted chat's next command runs.
	for _, s := range admitted {
		if res, err := m.Exec(ctx(t), s, sandbox.ExecRequest{Command: "echo again"}); err != nil || res.Stdout != "again\n" {
			t.Fatalf("a running sandbox's command at the cap: %+v, %v", res, err)
		}
	}
	// A stopped sandbox gives its place to another, and is then
	// refused itself.
	first := admitted[0]
	if err := m.Stop(ctx(t), first.SandboxID()); err != nil {
		t.Fatal(err)
	}
	if idx != nil {
		// The removal of its activity entry was lost: the cheap count
		// still sees it running, the exact one must not.
		rec, err := m.Lookup(ctx(t), first)
		if err != nil {
			t.Fatal(err)
		}
		if err := idx.Started(ctx(t), rec.Provider, activity.Entry{SandboxID: rec.SandboxID, LastActiveAt: e.clock.Now(), UserID: rec.UserID}); err != nil {
			t.Fatal(err)
		}
	}
	var other sandbox.Scope
	for _, s := range scopes {
		if _, err := m.Lookup(ctx(t), s); errors.Is(err, sandbox.ErrNotFound) {
			other = s
			break
		}
	}
	if res, err := m.Exec(ctx(t), other, sandbox.ExecRequest{Command: "echo in"}); err != nil || res.Stdout != "in\n" {
		t.Fatalf("a first command after a stop freed a place: %+v, %v", res, err)
	}
	if _, err := m.Exec(ctx(t), first, sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("starting the stopped sandbox again at the cap: err = %v, want ErrLimit", err)
	}
}

// TestCapsNeedACounter: caps on a Store that cannot count are refused at
// New, not at the first command.
func TestCapsNeedACounter(t *testing.T) {
	e := newEnv(t)
	_, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: &touches{Store: e.store}, Caps: sandbox.Caps{PerUser: 1}})
	if err == nil || !strings.Contains(err.Error(), "RunningCounter") {
		t.Fatalf("New = %v, want a refusal naming RunningCounter", err)
	}
}

func resources(t *testing.T, e *env) int {
	t.Helper()
	list, err := e.provider.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// countingStore is a Store that counts running records but cannot stop
// idle ones (no sandbox.IdleStopper).
type countingStore struct {
	sandbox.Store
	sandbox.RunningCounter
}

// TestCapUserStopsIdle: at a user's cap, a new chat's first command stops
// the user's least recently used sandbox that runs no command (its files
// kept, it starts again on its next command) instead of being refused;
// a sandbox running a command is never the one stopped, and when every
// one runs a command the new chat is refused.
func TestCapUserStopsIdle(t *testing.T) {
	e := newEnv(t)
	m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Now: e.clock.Now, Caps: sandbox.Caps{PerUser: 2}})
	if err != nil {
		t.Fatal(err)
	}
	scope := func(i int) sandbox.Scope {
		s := sandbox.Scope{AppID: "app", UserID: "u:alice", ChatID: fmt.Sprintf("chat%d", i)}
		id := s.SandboxID()
		t.Cleanup(func() { _ = m.Delete(context.Background(), id) })
		return s
	}
	status := func(s sandbox.Scope) sandbox.Status {
		t.Helper()
		rec, err := m.Lookup(ctx(t), s)
		if err != nil {
			t.Fatalf("record of %s: %v", s.ChatID, err)
		}
		return rec.Status
	}
	run := func(s sandbox.Scope, cmd, want string) {
		t.Helper()
		e.clock.Add(time.Second) // each use later than the one before
		res, err := m.Exec(ctx(t), s, sandbox.ExecRequest{Command: cmd})
		if err != nil || res.Stdout != want {
			t.Fatalf("%s in %s: %+v, %v; want %q", cmd, s.ChatID, res, err, want)
		}
	}
	c0, c1, c2, c3 := scope(0), scope(1), scope(2), scope(3)
	run(c0, "echo kept > f && cat f", "kept\n")
	run(c1, "echo one", "one\n")
	// At the cap: chat0, the least recently used, makes room.
	run(c2, "echo two", "two\n")
	if got := status(c0); got != sandbox.StatusStopped {
		t.Fatalf("chat0 (least recently used) is %s, want stopped", got)
	}
	if status(c1) != sandbox.StatusRunning || status(c2) != sandbox.StatusRunning {
		t.Fatal("chat1 and chat2 must still run")
	}
	// chat0 comes back with its files; chat1 is now the one to go.
	run(c0, "cat f", "kept\n")
	if got := status(c1); got != sandbox.StatusStopped {
		t.Fatalf("chat1 is %s, want stopped", got)
	}

	// A sandbox running a command is not stopped, whatever its age: chat2
	// (older) runs a command that waits for a file; chat0 is the one to go.
	e.clock.Add(time.Second)
	files, err := m.Files(ctx(t), c2, sandbox.Actor{UserID: "u:alice"})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		res, err := m.Exec(ctx(t), c2, sandbox.ExecRequest{Command: "touch started; while [ ! -e go ]; do sleep 0.05; done; echo done", Timeout: 2 * time.Minute})
		if err == nil && res.Stdout != "done\n" {
			err = fmt.Errorf("the waiting command answered %+v", res)
		}
		waiting <- err
	}()
	// The command has started once the file it makes first appears.
	for {
		if _, err := files.Stat(ctx(t), "started"); err == nil {
			break
		}
		select {
		case err := <-waiting:
			t.Fatalf("the waiting command ended early: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	run(c3, "echo three", "three\n")
	if got := status(c2); got != sandbox.StatusRunning {
		t.Fatalf("chat2, running a command, is %s; it must not be stopped", got)
	}
	if got := status(c0); got != sandbox.StatusStopped {
		t.Fatalf("chat0 (idle) is %s, want stopped", got)
	}
	if err := files.WriteFile(ctx(t), "go", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
}

package sessions_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func TestStore(t *testing.T) {
	ctx := context.Background()
	s, err := sessions.New(ctx, mongotest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(owner, app string, labels map[string]string, idle time.Duration, age time.Duration) sessions.Session {
		sess := sessions.Session{ID: sessions.NewID(), OwnerID: owner, AppID: app, Labels: labels, IdleTimeout: idle, CreatedAt: now.Add(-age)}
		if err := s.Create(ctx, sess); err != nil {
			t.Fatal(err)
		}
		return sess
	}
	old := mk("u1", "", map[string]string{"team": "data"}, time.Minute, time.Hour)
	newer := mk("u1", "app1", map[string]string{"team": "web"}, 0, 0)
	mk("u2", "", nil, 0, 0)

	if !strings.HasPrefix(old.ID, sessions.IDPrefix) || old.ID == newer.ID {
		t.Errorf("ids %q, %q", old.ID, newer.ID)
	}
	if got := old.Scope(); got != (sandbox.Scope{AppID: sessions.NoApp, UserID: "u1", ChatID: old.ID}) {
		t.Errorf("scope without an app: %+v", got)
	}
	list, err := s.List(ctx, "u1", nil)
	if err != nil || len(list) != 2 || list[0].ID != newer.ID || list[1].ID != old.ID {
		t.Errorf("u1's sessions, newest first: %+v, %v", list, err)
	}
	if list, _ := s.List(ctx, "u1", map[string]string{"team": "data"}); len(list) != 1 || list[0].ID != old.ID {
		t.Errorf("by label: %+v", list)
	}

	// A scope names its session only with the same owner and app.
	if got, err := s.ForScope(ctx, newer.Scope()); err != nil || got.ID != newer.ID {
		t.Errorf("ForScope: %+v, %v", got, err)
	}
	for _, sc := range []sandbox.Scope{{AppID: "app1", UserID: "u2", ChatID: newer.ID}, {AppID: sessions.NoApp, UserID: "u1", ChatID: newer.ID},
		{AppID: "app1", UserID: "u1", ChatID: "a-chat"}} {
		if _, err := s.ForScope(ctx, sc); !errors.Is(err, sessions.ErrNotFound) {
			t.Errorf("ForScope(%+v): %v, want ErrNotFound", sc, err)
		}
	}
	// Idle timeouts: only those that differ from the chats'.
	timeouts, err := s.IdleTimeouts(ctx)
	if err != nil || len(timeouts) != 1 || timeouts[old.Scope().SandboxID()] != time.Minute {
		t.Errorf("IdleTimeouts: %v, %v; want only the 1-minute session's", timeouts, err)
	}

	// The deletion tasks' hooks: a chat deletion of the session's app
	// removes it, another app's does not; an app deletion removes its own.
	if err := s.DeleteChats(ctx, []sandbox.Scope{{AppID: "app2", UserID: newer.OwnerID, ChatID: newer.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, newer.ID); err != nil {
		t.Errorf("another app's chat deletion removed the session: %v", err)
	}
	if err := s.DeleteChats(ctx, []sandbox.Scope{old.Scope(), {AppID: sessions.NoApp, UserID: old.OwnerID, ChatID: "a-chat"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, old.ID); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("after its deletion: %v", err)
	}
	if err := s.DeleteApp(ctx, "app1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(ctx, "u1", nil); len(list) != 0 {
		t.Errorf("after the app's deletion: %+v", list)
	}
}

// TestNarrowing: a session's sandbox gets the lower of the app's limits
// and its own, and only the egress both allow; a chat's keeps the app's.
func TestNarrowing(t *testing.T) {
	ctx := context.Background()
	s, err := sessions.New(ctx, mongotest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	sess := sessions.Session{ID: sessions.NewID(), OwnerID: "u1", AppID: "app1", CreatedAt: time.Now().UTC(),
		Limits: sandbox.Limits{MemoryMiB: 256, CPUCount: 2}, Egress: []string{"pypi.org", "evil.example"}}
	if err := s.Create(ctx, sess); err != nil {
		t.Fatal(err)
	}
	quiet := sessions.Session{ID: sessions.NewID(), OwnerID: "u1", AppID: "app1", CreatedAt: time.Now().UTC()}
	if err := s.Create(ctx, quiet); err != nil {
		t.Fatal(err)
	}
	app := sandbox.Limits{MemoryMiB: 512, CPUCount: 1, Pids: 64}
	if got := s.Limits(ctx, sess.Scope(), app); got != (sandbox.Limits{MemoryMiB: 256, CPUCount: 1, Pids: 64}) {
		t.Errorf("session limits %+v, want the lower of each", got)
	}
	chat := sandbox.Scope{AppID: "app1", UserID: "u1", ChatID: "a-chat"}
	if got := s.Limits(ctx, chat, app); got != app {
		t.Errorf("a chat's limits %+v, want the app's", got)
	}
	if got := s.Egress(ctx, sess.Scope(), []string{"pypi.org"}); len(got) != 1 || got[0] != "pypi.org" {
		t.Errorf("session egress %v, want only what the app allows too", got)
	}
	if got := s.Egress(ctx, sess.Scope(), nil); len(got) != 2 {
		t.Errorf("session egress under the operator's list %v, want the session's own", got)
	}
	if got := s.Egress(ctx, quiet.Scope(), nil); got == nil || len(got) != 0 {
		t.Errorf("a session that asked for no egress: %v, want none", got)
	}
	if got := s.Egress(ctx, chat, []string{"x.org"}); len(got) != 1 {
		t.Errorf("a chat's egress %v, want the app's", got)
	}
}

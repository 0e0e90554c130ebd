package preview

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/sandbox"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// TestLinks: one link per chat and port, found by its token alone;
// another secret, port or chat's token is refused; expiry renews the
// secret; revoking and deleting the chat end it.
func TestLinks(t *testing.T) {
	ctx := context.Background()
	s := New(mongotest.DB(t))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	alice := sandbox.Scope{AppID: "app", UserID: "u:alice", ChatID: "c1"}
	bob := sandbox.Scope{AppID: "app", UserID: "u:bob", ChatID: "c1"}

	l, err := s.Issue(ctx, alice, 8000)
	if err != nil || l.Port != 8000 || l.Scope() != alice || !l.ExpiresAt.Equal(now.Add(DefaultTTL)) {
		t.Fatalf("Issue: %+v, %v", l, err)
	}
	again, err := s.Issue(ctx, alice, 8000)
	if err != nil || again.Token() != l.Token() {
		t.Fatalf("Issue again: %q, %v; want %q", again.Token(), err, l.Token())
	}
	other, _ := s.Issue(ctx, alice, 8001)
	bobs, _ := s.Issue(ctx, bob, 8000)
	if other.Token() == l.Token() || bobs.Token() == l.Token() || other.Secret == l.Secret {
		t.Fatal("two ports or chats share a token")
	}
	if got, err := s.Find(ctx, l.Token()); err != nil || got.Key != l.Key {
		t.Fatalf("Find: %+v, %v", got, err)
	}
	for _, bad := range []string{
		l.Key + "-" + bobs.Secret,     // another chat's secret
		other.Key + "-" + l.Secret,    // another port's key
		l.Key + "-" + l.Secret + "x",  // not the secret
		l.Key, "", "x-y", "-8000-abc", // malformed
	} {
		if _, err := s.Find(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Find(%q) = %v, want ErrNotFound", bad, err)
		}
	}

	// A grant is the owner's, for GrantTTL.
	g, err := s.NewGrant(ctx, l)
	if err != nil || g == "" {
		t.Fatal(g, err)
	}
	l, _ = s.Find(ctx, l.Token())
	if !l.Granted(g, now) || l.Granted(g, now.Add(GrantTTL)) || l.Granted("x", now) || l.Granted("", now) {
		t.Error("the grant is not checked")
	}

	now = now.Add(DefaultTTL)
	if _, err := s.Find(ctx, l.Token()); !errors.Is(err, ErrExpired) {
		t.Errorf("Find past expiry: %v, want ErrExpired", err)
	}
	renewed, err := s.Issue(ctx, alice, 8000)
	if err != nil || renewed.Secret == l.Secret || renewed.Key != l.Key || renewed.Grant != "" {
		t.Fatalf("Issue past expiry: %+v, %v; want a new secret", renewed, err)
	}
	if _, err := s.Find(ctx, l.Token()); !errors.Is(err, ErrNotFound) {
		t.Errorf("the expired token after renewal: %v", err)
	}

	if u, err := s.Update(ctx, alice, 8000, true, 2*time.Hour); err != nil || !u.Shared || !u.ExpiresAt.Equal(now.Add(2*time.Hour)) {
		t.Errorf("Update: %+v, %v", u, err)
	}
	if _, err := s.Update(ctx, alice, 8000, true, MaxTTL+time.Hour); err == nil {
		t.Error("Update took a ttl over MaxTTL")
	}
	if list, err := s.List(ctx, alice); err != nil || len(list) != 2 {
		t.Errorf("List: %d, %v; want 2", len(list), err)
	}
	if err := s.Revoke(ctx, alice, 8000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Find(ctx, renewed.Token()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a revoked link: %v", err)
	}
	if err := s.Revoke(ctx, alice, 8000); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke twice: %v", err)
	}
	if err := s.DeleteChats(ctx, []sandbox.Scope{alice}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Find(ctx, other.Token()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted chat's link: %v", err)
	}
	if _, err := s.Find(ctx, bobs.Token()); errors.Is(err, ErrNotFound) { // expired by now, but there
		t.Errorf("bob's link went with alice's chat: %v", err)
	}
	if err := s.DeleteApp(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Find(ctx, bobs.Token()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a deleted app's link: %v", err)
	}
}

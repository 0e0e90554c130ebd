package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/crypto/bcrypt"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func newStore(t *testing.T) *Store {
	s := New(mongotest.DB(t))
	s.Cost = bcrypt.MinCost
	return s
}

func TestUsers(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateUser(ctx, "Alice", "correct horse", RoleUser); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, user, pass string
		role             Role
		want             error
	}{
		{"taken, other case", "ALICE", "another pass", RoleUser, ErrExists},
		{"short password", "bob", "short", RoleUser, ErrInvalid},
		{"bad name", "bob smith", "long enough", RoleUser, ErrInvalid},
		{"bad role", "bob", "long enough", Role("root"), ErrInvalid},
		{"fine", "bob", "long enough", RoleAdmin, nil},
	}
	for _, tc := range tests {
		_, err := s.CreateUser(ctx, tc.user, tc.pass, tc.role)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := s.EnsureAdmin(ctx, "bob", "whatever!"); err != nil {
		t.Fatalf("EnsureAdmin of an existing user: %v", err)
	}
}

func TestLoginSessionsAndKeys(t *testing.T) {
	s := newStore(t)
	db := s.users.Database()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	ctx := context.Background()
	u, _ := s.CreateUser(ctx, "alice", "correct horse", RoleUser)

	for _, bad := range [][2]string{{"alice", "wrong horse"}, {"nobody", "correct horse"}} {
		if _, _, _, err := s.Login(ctx, bad[0], bad[1]); err != ErrBadCredentials {
			t.Errorf("Login%v: err = %v, want the one ErrBadCredentials", bad, err)
		}
	}
	token, csrf, _, err := s.Login(ctx, "alice", "correct horse")
	if err != nil || !strings.HasPrefix(token, "fbs_") || len(csrf) < 40 {
		t.Fatalf("Login = %q, %q, %v", token, csrf, err)
	}
	p, gotCSRF, err := s.Session(ctx, token)
	if err != nil || p.UserID != u.ID || p.Role != RoleUser || p.ViaKey || gotCSRF != csrf {
		t.Fatalf("Session = %+v, %q, %v", p, gotCSRF, err)
	}
	if _, _, err := s.Session(ctx, token+"x"); err != ErrBadCredentials {
		t.Errorf("a forged token: %v", err)
	}
	now = now.Add(8 * 24 * time.Hour)
	if _, _, err := s.Session(ctx, token); err != ErrBadCredentials {
		t.Errorf("an expired session: %v, want ErrBadCredentials", err)
	}
	token, _, _, _ = s.Login(ctx, "alice", "correct horse")
	s.Logout(ctx, token)
	if _, _, err := s.Session(ctx, token); err != ErrBadCredentials {
		t.Errorf("after logout: %v", err)
	}

	key, err := s.CreateAPIKey(ctx, u.ID, "ci")
	if err != nil || !strings.HasPrefix(key, "fbk_") {
		t.Fatalf("CreateAPIKey = %q, %v", key, err)
	}
	if p, err := s.APIKey(ctx, key); err != nil || p.UserID != u.ID || !p.ViaKey {
		t.Fatalf("APIKey = %+v, %v", p, err)
	}
	if _, err := s.APIKey(ctx, "fbk_guess"); err != ErrBadCredentials {
		t.Errorf("a guessed key: %v", err)
	}
	// Only hashes are stored.
	for _, coll := range []string{"users", "sessions", "api_keys"} {
		cur, _ := db.Collection(coll).Find(ctx, bson.D{})
		var docs []bson.M
		cur.All(ctx, &docs)
		for _, d := range docs {
			text := strings.ToLower(bson.Raw(mustMarshal(d)).String())
			for _, secret := range []string{"correct horse", strings.ToLower(key), strings.ToLower(token)} {
				if strings.Contains(text, secret) {
					t.Errorf("%s stores a secret in clear: %s", coll, text)
				}
			}
		}
	}
}

func mustMarshal(v any) []byte {
	b, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestAccountManagement: what an admin and a user do to accounts takes
// effect at once on sessions and keys.
func TestAccountManagement(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Now = func() time.Time { return now }
	u, err := s.CreateUser(ctx, "carol", "first password", RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	tokA, _, _, err := s.Login(ctx, "carol", "first password")
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.CreateAPIKey(ctx, u.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}

	// Disabled: sign-in, sessions and keys refused at once; enabled again,
	// the key works and the ended sessions stay ended.
	if err := s.SetDisabled(ctx, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s.Login(ctx, "carol", "first password"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("sign-in of a disabled user: %v", err)
	}
	if _, err := s.APIKey(ctx, key); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("key of a disabled user: %v", err)
	}
	if err := s.SetDisabled(ctx, u.ID, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tokA); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a session from before the disable: %v, want ended", err)
	}
	if p, err := s.APIKey(ctx, key); err != nil || p.UserID != u.ID {
		t.Errorf("key after enabling: %+v %v", p, err)
	}

	// Her own change keeps her session and ends the others.
	tok1, _, _, _ := s.Login(ctx, "carol", "first password")
	tok2, _, _, _ := s.Login(ctx, "carol", "first password")
	if err := s.ChangePassword(ctx, u.ID, "wrong old one", "second password", tok1); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("change with a wrong old password: %v", err)
	}
	if err := s.ChangePassword(ctx, u.ID, "first password", "short", tok1); !errors.Is(err, ErrInvalid) {
		t.Errorf("change to a short password: %v", err)
	}
	if err := s.ChangePassword(ctx, u.ID, "first password", "second password", tok1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tok1); err != nil {
		t.Errorf("the changing session: %v, want it kept", err)
	}
	if _, _, err := s.Session(ctx, tok2); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("another session after the change: %v, want ended", err)
	}
	if _, _, _, err := s.Login(ctx, "carol", "second password"); err != nil {
		t.Errorf("sign-in with the new password: %v", err)
	}

	// An admin's reset ends every session.
	if err := s.SetPassword(ctx, u.ID, "third password"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Session(ctx, tok1); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a session after the reset: %v, want ended", err)
	}
	if err := s.SetPassword(ctx, "u:nobody", "third password"); !errors.Is(err, ErrNotFound) {
		t.Errorf("reset of an unknown user: %v", err)
	}

	// Keys: listed without secrets, with their last use; revoked at once.
	now = now.Add(2 * time.Minute)
	if _, err := s.APIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx, u.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	k := keys[0]
	if k.Name != "laptop" || k.Prefix != key[:10] || !k.LastUsedAt.Equal(now) || strings.Contains(k.ID, key[4:]) {
		t.Errorf("key info %+v; want name, prefix %q, last use %v, no secret", k, key[:10], now)
	}
	if err := s.RevokeKey(ctx, "u:someone-else", k.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoking another user's key: %v, want not found", err)
	}
	if err := s.RevokeKey(ctx, u.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.APIKey(ctx, key); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a revoked key: %v", err)
	}
	users, err := s.Users(ctx)
	if err != nil || len(users) != 1 || users[0].Name != "carol" || users[0].Disabled {
		t.Errorf("users: %+v %v", users, err)
	}
}

// A sign-in with an unknown name compares the password with a decoy hash
// of the store's own cost, so it takes as long as one with a known name
// and a wrong password: the time does not tell which names exist.
func TestDecoyHasTheStoresCost(t *testing.T) {
	for _, cost := range []int{bcrypt.MinCost, bcrypt.MinCost + 2} {
		s := &Store{Cost: cost}
		got, err := bcrypt.Cost(s.decoyHash())
		if err != nil || got != cost {
			t.Errorf("store of cost %d: decoy of cost %d (%v), want %d", cost, got, err, cost)
		}
	}
}

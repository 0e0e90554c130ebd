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

// Package auth keeps Flowbox's accounts: users with bcrypt-hashed
// passwords and a role, browser sessions, and API keys for programs. It
// stores only hashes of session tokens and API keys, so a copy of the
// database lets no one in. It must never log or return a password, a
// token or a key after the moment it is created.
//
// Documents are addressed by _id (see internal/mongodb on the embedded
// database): users by "u:<name>", sessions and keys by the SHA-256 of the
// secret. A unique _id also makes "create user" atomic on every server.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"golang.org/x/crypto/bcrypt"
)

// Role is what a user may do.
type Role string

const (
	RoleAdmin Role = "admin"
	RoleUser  Role = "user"
)

var (
	// ErrBadCredentials: wrong name or password, or an unknown token or
	// key. Deliberately one error: it must not tell which part was wrong.
	ErrBadCredentials = errors.New("wrong user name or password")
	// ErrExists: the user name is taken.
	ErrExists = errors.New("user name taken")
	// ErrInvalid: a name or password that does not meet the rules.
	ErrInvalid = errors.New("invalid account data")
)

// User is an account.
type User struct {
	ID           string    `bson:"_id" json:"id"`
	Name         string    `bson:"name" json:"name"`
	Role         Role      `bson:"role" json:"role"`
	PasswordHash string    `bson:"passwordHash" json:"-"`
	CreatedAt    time.Time `bson:"createdAt" json:"createdAt"`
}

// Principal is who is calling.
type Principal struct {
	UserID string
	Name   string
	Role   Role
	// ViaKey is true for API-key calls, which need no CSRF token.
	ViaKey bool
}

// Admin reports whether the caller is an admin.
func (p Principal) Admin() bool { return p.Role == RoleAdmin }

type session struct {
	ID        string    `bson:"_id"` // sha256 of the token
	UserID    string    `bson:"userId"`
	CSRF      string    `bson:"csrf"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

type apiKey struct {
	ID        string    `bson:"_id"` // sha256 of the key
	UserID    string    `bson:"userId"`
	Name      string    `bson:"name"`
	CreatedAt time.Time `bson:"createdAt"`
}

// Store keeps users, sessions and keys.
type Store struct {
	users, sessions, keys *mongo.Collection
	// SessionTTL is how long a session lasts; default 7 days.
	SessionTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Cost is bcrypt's work factor; default bcrypt.DefaultCost.
	Cost int
}

// New returns a store over db.
func New(db *mongo.Database) *Store {
	return &Store{users: db.Collection("users"), sessions: db.Collection("sessions"), keys: db.Collection("api_keys"),
		SessionTTL: 7 * 24 * time.Hour, Now: time.Now, Cost: bcrypt.DefaultCost}
}

var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func userID(name string) string { return "u:" + strings.ToLower(name) }

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func secret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("no randomness: %v", err))
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// CreateUser adds an account. Names are 1-64 lowercase letters, digits,
// '.', '_' or '-'; passwords at least 8 characters (bcrypt reads at most
// 72 bytes).
func (s *Store) CreateUser(ctx context.Context, name, password string, role Role) (User, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	switch {
	case !nameRe.MatchString(name):
		return User{}, fmt.Errorf("%w: user name %q: use 1-64 lowercase letters, digits, '.', '_' or '-'", ErrInvalid, name)
	case len(password) < 8 || len(password) > 72:
		return User{}, fmt.Errorf("%w: the password must be 8 to 72 bytes long", ErrInvalid)
	case role != RoleAdmin && role != RoleUser:
		return User{}, fmt.Errorf("%w: role %q: use admin or user", ErrInvalid, role)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.Cost)
	if err != nil {
		return User{}, fmt.Errorf("hash password: %w", err)
	}
	u := User{ID: userID(name), Name: name, Role: role, PasswordHash: string(h), CreatedAt: s.Now().UTC()}
	if _, err := s.users.InsertOne(ctx, u); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return User{}, fmt.Errorf("%w: %s", ErrExists, name)
		}
		return User{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return u, nil
}

// User returns an account by id.
func (s *Store) User(ctx context.Context, id string) (User, error) {
	var u User
	err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&u)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return User{}, ErrBadCredentials
	}
	return u, err
}

// EnsureAdmin creates the first admin from configuration when that user
// does not exist yet; an existing account is left as it is.
func (s *Store) EnsureAdmin(ctx context.Context, name, password string) error {
	_, err := s.CreateUser(ctx, name, password, RoleAdmin)
	if errors.Is(err, ErrExists) {
		return nil
	}
	return err
}

var decoy struct {
	once sync.Once
	hash []byte
}

// decoyHash is a hash no password matches, compared against when the user
// does not exist.
func decoyHash() []byte {
	decoy.once.Do(func() {
		decoy.hash, _ = bcrypt.GenerateFromPassword([]byte(secret("")), bcrypt.DefaultCost)
	})
	return decoy.hash
}

// Login checks a name and password and opens a session. It returns the
// session token (for the cookie) and its CSRF token (for the pages).
func (s *Store) Login(ctx context.Context, name, password string) (token, csrf string, u User, err error) {
	u, err = s.User(ctx, userID(strings.TrimSpace(name)))
	if err != nil {
		// Spend the time a real check would, so that timing does not tell
		// which user names exist.
		_ = bcrypt.CompareHashAndPassword(decoyHash(), []byte(password))
		return "", "", User{}, ErrBadCredentials
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return "", "", User{}, ErrBadCredentials
	}
	token, csrf = secret("fbs_"), secret("")
	sess := session{ID: hash(token), UserID: u.ID, CSRF: csrf, ExpiresAt: s.Now().Add(s.SessionTTL).UTC()}
	if _, err := s.sessions.InsertOne(ctx, sess); err != nil {
		return "", "", User{}, fmt.Errorf("open session: %w", err)
	}
	return token, csrf, u, nil
}

// Session returns the caller of a session token and its CSRF token.
func (s *Store) Session(ctx context.Context, token string) (Principal, string, error) {
	var sess session
	err := s.sessions.FindOne(ctx, bson.D{{Key: "_id", Value: hash(token)}}).Decode(&sess)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Principal{}, "", ErrBadCredentials
	}
	if err != nil {
		return Principal{}, "", err
	}
	if !s.Now().Before(sess.ExpiresAt) {
		_, _ = s.sessions.DeleteOne(ctx, bson.D{{Key: "_id", Value: sess.ID}})
		return Principal{}, "", ErrBadCredentials
	}
	u, err := s.User(ctx, sess.UserID)
	if err != nil {
		return Principal{}, "", err
	}
	return Principal{UserID: u.ID, Name: u.Name, Role: u.Role}, sess.CSRF, nil
}

// Logout ends a session.
func (s *Store) Logout(ctx context.Context, token string) error {
	_, err := s.sessions.DeleteOne(ctx, bson.D{{Key: "_id", Value: hash(token)}})
	return err
}

// CreateAPIKey makes a key for a user; the key is returned once and
// stored only as a hash.
func (s *Store) CreateAPIKey(ctx context.Context, userID, name string) (string, error) {
	if _, err := s.User(ctx, userID); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	key := secret("fbk_")
	if _, err := s.keys.InsertOne(ctx, apiKey{ID: hash(key), UserID: userID, Name: name, CreatedAt: s.Now().UTC()}); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	return key, nil
}

// APIKey returns the caller of an API key.
func (s *Store) APIKey(ctx context.Context, key string) (Principal, error) {
	var k apiKey
	err := s.keys.FindOne(ctx, bson.D{{Key: "_id", Value: hash(key)}}).Decode(&k)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Principal{}, ErrBadCredentials
	}
	if err != nil {
		return Principal{}, err
	}
	u, err := s.User(ctx, k.UserID)
	if err != nil {
		return Principal{}, err
	}
	return Principal{UserID: u.ID, Name: u.Name, Role: u.Role, ViaKey: true}, nil
}

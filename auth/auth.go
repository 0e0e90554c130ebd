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
	"slices"
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
	// ErrNotFound: no such user or key (for admins and owners, who may
	// know; sign-in never says it).
	ErrNotFound = errors.New("not found")
	// ErrKeyExpired: the API key is past its expiry. It is a bad
	// credential; only its holder learns why.
	ErrKeyExpired = fmt.Errorf("API key expired: %w", ErrBadCredentials)
)

// User is an account.
type User struct {
	ID           string    `bson:"_id" json:"id"`
	Name         string    `bson:"name" json:"name"`
	Role         Role      `bson:"role" json:"role"`
	PasswordHash string    `bson:"passwordHash" json:"-"`
	CreatedAt    time.Time `bson:"createdAt" json:"createdAt"`
	// Disabled users cannot sign in, and their sessions and keys stop
	// working at once.
	Disabled bool `bson:"disabled,omitempty" json:"disabled"`
}

// Principal is who is calling.
type Principal struct {
	UserID string
	Name   string
	Role   Role
	// ViaKey is true for API-key calls, which need no CSRF token.
	ViaKey bool
	// KeyID and KeyRatePerMinute are the key of an API-key call and its
	// limit (0: none).
	KeyID            string
	KeyRatePerMinute int
	// AppID binds the caller to one app: an app key's calls, and a share
	// link's visitors. Such callers reach only that app's chat API, its
	// chats and their files, never its settings.
	AppID string
	// LinkID is the share link of a visitor (empty for everyone else).
	LinkID string
}

// SignedIn reports whether p is a caller at all: the zero Principal is
// nobody (a request no credential identified).
func (p Principal) SignedIn() bool { return p.UserID != "" }

// Bound reports whether the caller may reach only one app (AppID).
func (p Principal) Bound() bool { return p.AppID != "" }

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
	Prefix    string    `bson:"prefix"` // the key's first characters, to tell keys apart
	CreatedAt time.Time `bson:"createdAt"`
	// LastUsedAt is refreshed at most once a minute.
	LastUsedAt time.Time `bson:"lastUsedAt,omitempty"`
	// ExpiresAt, when set, ends the key; RatePerMinute, when set, limits
	// its requests.
	ExpiresAt     time.Time `bson:"expiresAt,omitempty"`
	RatePerMinute int       `bson:"ratePerMinute,omitempty"`
	// AppID, when set, makes this an app key: it belongs to the app, not
	// to a user (UserID is empty; CreatedBy says who made it).
	AppID     string `bson:"appId,omitempty"`
	CreatedBy string `bson:"createdBy,omitempty"`
}

// KeySpec is what a new API key is made with.
type KeySpec struct {
	Name string
	// ExpiresAt, when set, must be in the future; zero: no expiry.
	ExpiresAt time.Time
	// RatePerMinute limits the key's requests (bursts up to the same
	// number); 0: only the limits every caller has.
	RatePerMinute int
}

// MaxKeyRate bounds KeySpec.RatePerMinute.
const MaxKeyRate = 10000

// KeyInfo describes an API key without its secret.
type KeyInfo struct {
	// ID names the key for revocation; it is the key's hash, which
	// lets no one in.
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Prefix        string    `json:"prefix"`
	CreatedAt     time.Time `json:"createdAt"`
	LastUsedAt    time.Time `json:"lastUsedAt,omitzero"`
	ExpiresAt     time.Time `json:"expiresAt,omitzero"`
	RatePerMinute int       `json:"ratePerMinute,omitempty"`
	// AppID and CreatedBy are set on app keys.
	AppID     string `json:"appId,omitempty"`
	CreatedBy string `json:"createdBy,omitempty"`
}

// keyPrefixLen is how much of a key KeyInfo shows: "fbk_" and 6
// characters of its 43 random ones.
const keyPrefixLen = 10

// keyUseEvery bounds how often a key's last use is written.
const keyUseEvery = time.Minute

// Store keeps users, sessions and keys.
type Store struct {
	users, sessions, keys *mongo.Collection
	// SessionTTL is how long a session lasts; default 7 days.
	SessionTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Cost is bcrypt's work factor; default bcrypt.DefaultCost.
	Cost int

	decoyOnce sync.Once
	decoy     []byte
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

// RandomPassword makes up a password for an account created or reset
// without one (16 random URL-safe characters).
func RandomPassword() string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("no randomness: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// CreateUser adds an account. Names are 1-64 lowercase letters, digits,
// '.', '_' or '-'; passwords at least 8 characters (bcrypt reads at most
// 72 bytes).
func (s *Store) CreateUser(ctx context.Context, name, password string, role Role) (User, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	switch {
	case !nameRe.MatchString(name):
		return User{}, fmt.Errorf("%w: user name %q: use 1-64 lowercase letters, digits, '.', '_' or '-'", ErrInvalid, name)
	case checkPassword(password) != nil:
		return User{}, checkPassword(password)
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

func checkPassword(password string) error {
	if len(password) < 8 || len(password) > 72 {
		return fmt.Errorf("%w: the password must be 8 to 72 bytes long", ErrInvalid)
	}
	return nil
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

// decoyHash is a hash no password matches, compared against when the user
// does not exist. It has the store's cost, so the comparison takes as long
// as one with a real user's hash.
func (s *Store) decoyHash() []byte {
	s.decoyOnce.Do(func() {
		s.decoy, _ = bcrypt.GenerateFromPassword([]byte(secret("")), s.Cost)
	})
	return s.decoy
}

// Login checks a name and password and opens a session. It returns the
// session token (for the cookie) and its CSRF token (for the pages).
func (s *Store) Login(ctx context.Context, name, password string) (token, csrf string, u User, err error) {
	u, err = s.User(ctx, userID(strings.TrimSpace(name)))
	if err != nil {
		// Spend the time a real check would, so that timing does not tell
		// which user names exist.
		_ = bcrypt.CompareHashAndPassword(s.decoyHash(), []byte(password))
		return "", "", User{}, ErrBadCredentials
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil || u.Disabled {
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
	if u.Disabled {
		return Principal{}, "", ErrBadCredentials
	}
	return Principal{UserID: u.ID, Name: u.Name, Role: u.Role}, sess.CSRF, nil
}

// Logout ends a session.
func (s *Store) Logout(ctx context.Context, token string) error {
	_, err := s.sessions.DeleteOne(ctx, bson.D{{Key: "_id", Value: hash(token)}})
	return err
}

// CreateAPIKey makes a key for a user with no expiry or rate of its own.
func (s *Store) CreateAPIKey(ctx context.Context, userID, name string) (string, error) {
	return s.CreateKey(ctx, userID, KeySpec{Name: name})
}

// CreateKey makes a key for a user; the key is returned once and stored
// only as a hash.
func (s *Store) CreateKey(ctx context.Context, userID string, spec KeySpec) (string, error) {
	if _, err := s.User(ctx, userID); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	key, _, err := s.insertKey(ctx, apiKey{UserID: userID}, spec)
	return key, err
}

// insertKey checks spec and stores a new key made from k (its owner
// fields) and spec; it returns the secret, shown once.
func (s *Store) insertKey(ctx context.Context, k apiKey, spec KeySpec) (string, KeyInfo, error) {
	name := strings.TrimSpace(spec.Name)
	switch {
	case name == "" || len(name) > 100:
		return "", KeyInfo{}, fmt.Errorf("%w: a key needs a name of 1 to 100 characters", ErrInvalid)
	case !spec.ExpiresAt.IsZero() && !spec.ExpiresAt.After(s.Now()):
		return "", KeyInfo{}, fmt.Errorf("%w: the expiry %s is not in the future", ErrInvalid, spec.ExpiresAt.UTC().Format(time.RFC3339))
	case spec.RatePerMinute < 0 || spec.RatePerMinute > MaxKeyRate:
		return "", KeyInfo{}, fmt.Errorf("%w: a key's rate is 0 (none) to %d requests a minute", ErrInvalid, MaxKeyRate)
	}
	key := secret("fbk_")
	k.ID, k.Name, k.Prefix, k.CreatedAt, k.RatePerMinute = hash(key), name, key[:keyPrefixLen], s.Now().UTC(), spec.RatePerMinute
	if !spec.ExpiresAt.IsZero() {
		k.ExpiresAt = spec.ExpiresAt.UTC()
	}
	if _, err := s.keys.InsertOne(ctx, k); err != nil {
		return "", KeyInfo{}, fmt.Errorf("create API key: %w", err)
	}
	return key, keyInfos([]apiKey{k})[0], nil
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
	var p Principal
	if k.AppID != "" {
		// An app key lives by its creator's account (T5): disabled or
		// deleted, the key stops with it, unless the app was handed to
		// another owner with its keys (TransferAppKeys).
		if err := s.Active(ctx, k.CreatedBy); err != nil {
			return Principal{}, err
		}
		p = Principal{UserID: AppKeyUser(k.AppID), Name: k.Name, Role: RoleUser, AppID: k.AppID}
	} else {
		u, err := s.User(ctx, k.UserID)
		if err != nil {
			return Principal{}, err
		}
		if u.Disabled {
			return Principal{}, ErrBadCredentials
		}
		p = Principal{UserID: u.ID, Name: u.Name, Role: u.Role}
	}
	now := s.Now()
	if !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt) {
		return Principal{}, ErrKeyExpired
	}
	if now.Sub(k.LastUsedAt) >= keyUseEvery {
		// A failed write costs only the "last used" shown to the user.
		_, _ = s.keys.UpdateOne(ctx, bson.D{{Key: "_id", Value: k.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "lastUsedAt", Value: now.UTC()}}}})
	}
	p.ViaKey, p.KeyID, p.KeyRatePerMinute = true, k.ID, k.RatePerMinute
	return p, nil
}

// Keys lists a user's API keys, newest first, without their secrets.
func (s *Store) Keys(ctx context.Context, userID string) ([]KeyInfo, error) {
	cur, err := s.keys.Find(ctx, bson.D{{Key: "userId", Value: userID}})
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	var keys []apiKey
	if err := cur.All(ctx, &keys); err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return keyInfos(keys), nil
}

// keyInfos describes keys, newest first.
func keyInfos(keys []apiKey) []KeyInfo {
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = KeyInfo{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt,
			ExpiresAt: k.ExpiresAt, RatePerMinute: k.RatePerMinute, AppID: k.AppID, CreatedBy: k.CreatedBy}
	}
	slices.SortFunc(out, func(a, b KeyInfo) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// RevokeKey deletes one of the user's keys; ErrNotFound when the user has
// no such key.
func (s *Store) RevokeKey(ctx context.Context, userID, keyID string) error {
	res, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID}, {Key: "userId", Value: userID}})
	if err != nil {
		return fmt.Errorf("revoke API key: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}

// Users lists every account, by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	cur, err := s.users.Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	var users []User
	if err := cur.All(ctx, &users); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	slices.SortFunc(users, func(a, b User) int { return strings.Compare(a.Name, b.Name) })
	return users, nil
}

// existing returns the user id names, or ErrNotFound.
func (s *Store) existing(ctx context.Context, id string) (User, error) {
	u, err := s.User(ctx, id)
	if errors.Is(err, ErrBadCredentials) {
		return User{}, fmt.Errorf("user %s: %w", id, ErrNotFound)
	}
	return u, err
}

// DeleteUser removes an account with its sessions and keys; what the user
// owns elsewhere (apps, chats) is the caller's to handle first.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	if _, err := s.existing(ctx, id); err != nil {
		return err
	}
	if _, err := s.keys.DeleteMany(ctx, bson.D{{Key: "userId", Value: id}}); err != nil {
		return fmt.Errorf("delete the keys of %s: %w", id, err)
	}
	if err := s.endSessions(ctx, id, ""); err != nil {
		return err
	}
	if err := s.cancelPasswordLink(ctx, id); err != nil {
		return err
	}
	if _, err := s.users.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delete user %s: %w", id, err)
	}
	return nil
}

// SetDisabled disables or enables an account. A disabled user's
// sessions end; their keys stay but are refused until it is enabled.
func (s *Store) SetDisabled(ctx context.Context, id string, disabled bool) error {
	if _, err := s.existing(ctx, id); err != nil {
		return err
	}
	if _, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "disabled", Value: disabled}}}}); err != nil {
		return fmt.Errorf("disable user %s: %w", id, err)
	}
	if disabled {
		return s.endSessions(ctx, id, "")
	}
	return nil
}

// SetPassword gives an account a new password (an admin's reset) and
// ends all its sessions.
func (s *Store) SetPassword(ctx context.Context, id, password string) error {
	if _, err := s.existing(ctx, id); err != nil {
		return err
	}
	if err := s.setPassword(ctx, id, password, ""); err != nil {
		return err
	}
	return s.cancelPasswordLink(ctx, id)
}

// ChangePassword is a user's own change: the old password must match.
// Every session but keep (the caller's, by token) ends.
func (s *Store) ChangePassword(ctx context.Context, id, old, password, keep string) error {
	u, err := s.existing(ctx, id)
	if err != nil {
		return err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(old)) != nil {
		return ErrBadCredentials
	}
	if err := s.setPassword(ctx, id, password, keep); err != nil {
		return err
	}
	return s.cancelPasswordLink(ctx, id)
}

func (s *Store) setPassword(ctx context.Context, id, password, keepToken string) error {
	if err := checkPassword(password); err != nil {
		return err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.Cost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	if _, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "passwordHash", Value: string(h)}}}}); err != nil {
		return fmt.Errorf("set the password of %s: %w", id, err)
	}
	return s.endSessions(ctx, id, keepToken)
}

// endSessions ends the user's sessions, but the one of keepToken.
func (s *Store) endSessions(ctx context.Context, id, keepToken string) error {
	filter := bson.D{{Key: "userId", Value: id}}
	if keepToken != "" {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$ne", Value: hash(keepToken)}}})
	}
	if _, err := s.sessions.DeleteMany(ctx, filter); err != nil {
		return fmt.Errorf("end the sessions of %s: %w", id, err)
	}
	return nil
}

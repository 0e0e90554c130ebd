// Package sessions stores the sandbox service API's sessions (A1): a
// sandbox with an owner, a name, labels and the settings it was created
// with. The sandbox itself is the manager's, named by Scope like a chat's:
// the session's id is its chat id, so the chats' lifecycle (lazy start,
// idle stop, deletion through the deletion path) is the sessions' too.
//
// Sessions are read by _id (see internal/mongodb on the embedded
// database); listing a caller's sessions scans the collection on the
// embedded database and uses the {ownerId, createdAt} index on MongoDB.
package sessions

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
)

// Collection holds the sessions.
const Collection = "sandbox_sessions"

// NoApp is the app id of sessions made without one: they run under the
// operator's policy. It names no app (app ids never start with "_").
const NoApp = "_sandbox_api"

// IDPrefix starts every session id.
const IDPrefix = "ses_"

// Idle timeouts a session may have; the default is the chats'.
const (
	MinIdle     = time.Minute
	MaxIdle     = 24 * time.Hour
	DefaultIdle = sandbox.IdleAfter
)

// ErrNotFound: no such session.
var ErrNotFound = errors.New("no such session")

// Session is one session.
type Session struct {
	ID   string `bson:"_id"`
	Name string `bson:"name,omitempty"`
	// OwnerID is the caller that made it: a user, or an app's keys
	// (auth.AppKeyUser).
	OwnerID string `bson:"ownerId"`
	// AppID is the app whose policy it runs under; "" for none.
	AppID  string            `bson:"appId,omitempty"`
	Labels map[string]string `bson:"labels,omitempty"`
	// Limits tighten the operator's for its sandbox.
	Limits sandbox.Limits `bson:"limits"`
	// Egress is its allowlist (nil: no network).
	Egress      []string      `bson:"egress,omitempty"`
	IdleTimeout time.Duration `bson:"idleTimeout"`
	// Temporary sessions are made for one call and deleted after it.
	Temporary bool      `bson:"temporary,omitempty"`
	CreatedAt time.Time `bson:"createdAt"`
}

// Scope is the scope of the session's sandbox.
func (s Session) Scope() sandbox.Scope {
	app := s.AppID
	if app == "" {
		app = NoApp
	}
	return sandbox.Scope{AppID: app, UserID: s.OwnerID, ChatID: s.ID}
}

// NewID returns a fresh session id.
func NewID() string {
	return IDPrefix + strings.ToLower(rand.Text())
}

// Store keeps sessions.
type Store struct{ coll *mongo.Collection }

// New returns the store of db and makes its index.
func New(ctx context.Context, db *mongo.Database) (*Store, error) {
	s := &Store{coll: db.Collection(Collection)}
	_, err := s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ownerId", Value: 1}, {Key: "createdAt", Value: -1}}})
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", Collection, err)
	}
	return s, nil
}

// Create stores a new session.
func (s *Store) Create(ctx context.Context, sess Session) error {
	if _, err := s.coll.InsertOne(ctx, sess); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// Get returns a session; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (Session, error) {
	var sess Session
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&sess)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, fmt.Errorf("read session: %w", err)
	}
	return sess, nil
}

// ForScope returns the session a sandbox scope belongs to; ErrNotFound
// when the scope is a chat's, or another owner's.
func (s *Store) ForScope(ctx context.Context, scope sandbox.Scope) (Session, error) {
	if !strings.HasPrefix(scope.ChatID, IDPrefix) {
		return Session{}, ErrNotFound
	}
	sess, err := s.Get(ctx, scope.ChatID)
	if err != nil {
		return Session{}, err
	}
	if sess.Scope() != scope {
		return Session{}, ErrNotFound
	}
	return sess, nil
}

// Limits is an app's limits lowered by the session's own, for the
// sandbox of a service API session; a chat's sandbox keeps the app's.
func (s *Store) Limits(ctx context.Context, scope sandbox.Scope, app sandbox.Limits) sandbox.Limits {
	sess, err := s.ForScope(ctx, scope)
	if err != nil {
		return app
	}
	lower := func(a, b float64) float64 {
		if a == 0 || b != 0 && b < a {
			return b
		}
		return a
	}
	l := app
	l.CPUCount = lower(l.CPUCount, sess.Limits.CPUCount)
	l.MemoryMiB = int64(lower(float64(l.MemoryMiB), float64(sess.Limits.MemoryMiB)))
	l.Pids = int64(lower(float64(l.Pids), float64(sess.Limits.Pids)))
	return l
}

// Egress is an app's egress allowlist (nil: the operator's) narrowed by
// a service API session's: none unless the session asked for egress, and
// then only the patterns the app allows too. A chat's sandbox keeps the
// app's.
func (s *Store) Egress(ctx context.Context, scope sandbox.Scope, app []string) []string {
	sess, err := s.ForScope(ctx, scope)
	if err != nil {
		return app
	}
	out := []string{}
	for _, p := range sess.Egress {
		if app == nil || slices.Contains(app, p) {
			out = append(out, p)
		}
	}
	return out
}

// List returns an owner's sessions, newest first, those with every label
// given.
func (s *Store) List(ctx context.Context, ownerID string, labels map[string]string) ([]Session, error) {
	filter := bson.D{{Key: "ownerId", Value: ownerID}}
	for k, v := range labels {
		filter = append(filter, bson.E{Key: "labels." + k, Value: v})
	}
	cur, err := s.coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "createdAt", Value: -1}}))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []Session
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// Delete removes a session's record; a missing one is not an error.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// DeleteChats removes the sessions among chats (the deletion tasks'
// ChatData: a session's id is its chat id). A chat without a user stands
// for every user's (an intent recorded before chat ids were scoped).
func (s *Store) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	for _, chat := range chats {
		if !strings.HasPrefix(chat.ChatID, IDPrefix) {
			continue
		}
		sess, err := s.Get(ctx, chat.ChatID)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if got := sess.Scope(); got.AppID == chat.AppID && (chat.UserID == "" || got.UserID == chat.UserID) {
			if err := s.Delete(ctx, chat.ChatID); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteApp removes the sessions of a deleted app.
func (s *Store) DeleteApp(ctx context.Context, appID string) error {
	if _, err := s.coll.DeleteMany(ctx, bson.D{{Key: "appId", Value: appID}}); err != nil {
		return fmt.Errorf("delete the sessions of app %s: %w", appID, err)
	}
	return nil
}

// IdleTimeouts are the sessions' idle timeouts that differ from the
// chats', by their sandbox's ID, for the stop scan: few sessions set one,
// so the scan reads them once instead of a record per candidate.
func (s *Store) IdleTimeouts(ctx context.Context) (map[string]time.Duration, error) {
	cur, err := s.coll.Find(ctx, bson.D{{Key: "idleTimeout", Value: bson.D{{Key: "$ne", Value: int64(DefaultIdle)}}}},
		options.Find().SetProjection(bson.D{{Key: "ownerId", Value: 1}, {Key: "appId", Value: 1}, {Key: "idleTimeout", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list the sessions' idle timeouts: %w", err)
	}
	var list []Session
	if err := cur.All(ctx, &list); err != nil {
		return nil, fmt.Errorf("list the sessions' idle timeouts: %w", err)
	}
	out := make(map[string]time.Duration, len(list))
	for _, sess := range list {
		if sess.IdleTimeout > 0 {
			out[sess.Scope().SandboxID()] = sess.IdleTimeout
		}
	}
	return out, nil
}

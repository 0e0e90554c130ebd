// Package preview keeps a chat's preview links (L2): links the engine
// serves, /preview/{token}/..., that lead to a TCP port a process of the
// chat's sandbox listens on, or (port Files) to the files of its
// workspace, so that an HTML file the agent wrote opens rendered.
//
// There is one link per (sandbox, port): asking again gives the same one
// until it expires or is revoked. Its token names the sandbox and the
// port and carries a random secret; the record is found by its key alone
// (the database answers a lookup by _id from an index) and the secret is
// compared in constant time.
//
// A link that is not shared works for the chat's owner alone: the engine
// sends the owner, signed in, on to the link with a grant (a second
// secret, good for GrantTTL), since the pages behind a link run in an
// origin of their own that carries no session. A shared link needs no
// grant: whoever has it may use it until it expires.
package preview

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/sandbox"
)

// Files is the port of a link to the workspace's files: its path
// /preview/{token}/site/index.html is the file /workspace/site/index.html.
const Files = 0

// checkPort refuses a port outside 1-65535 other than Files.
func checkPort(port int) error {
	if port == Files {
		return nil
	}
	return sandbox.CheckPort(port)
}

// Collection holds the links.
const Collection = "preview_links"

// Bounds of links.
const (
	// DefaultTTL is how long a new link lasts.
	DefaultTTL = 24 * time.Hour
	// MaxTTL bounds what an owner may ask for.
	MaxTTL = 30 * 24 * time.Hour
	// GrantTTL is how long an owner's grant lasts; opening the link
	// again gives a new one.
	GrantTTL = time.Hour
)

var (
	// ErrNotFound: no such link (never made, revoked, or its chat was
	// deleted), or a token that is not its.
	ErrNotFound = errors.New("no such preview link")
	// ErrExpired: the link is past its expiry.
	ErrExpired = errors.New("this preview link has expired")
)

// Link is a preview link.
type Link struct {
	// Key is the sandbox and the port: "{sandboxId}-{port}".
	Key    string `bson:"_id" json:"-"`
	AppID  string `bson:"appId" json:"appId"`
	UserID string `bson:"userId" json:"userId"`
	ChatID string `bson:"chatId" json:"chatId"`
	Port   int    `bson:"port" json:"port"`
	// Secret is the token's random part.
	Secret    string    `bson:"secret" json:"-"`
	Shared    bool      `bson:"shared" json:"shared"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	ExpiresAt time.Time `bson:"expiresAt" json:"expiresAt"`
	// Grant is the owner's current grant and GrantUntil its end.
	Grant      string    `bson:"grant,omitempty" json:"-"`
	GrantUntil time.Time `bson:"grantUntil,omitzero" json:"-"`
}

// Scope is the chat whose sandbox the link leads into.
func (l Link) Scope() sandbox.Scope {
	return sandbox.Scope{AppID: l.AppID, UserID: l.UserID, ChatID: l.ChatID}
}

// Token is what the link's path carries: "{sandboxId}-{port}-{secret}".
func (l Link) Token() string { return l.Key + "-" + l.Secret }

// Path is the link's path on the engine.
func (l Link) Path() string { return "/preview/" + l.Token() + "/" }

// cacheFor is how long Find trusts a link it read: a change made by
// another engine process (a revocation) takes this long to reach this
// one; this process's own changes reach it at once.
const cacheFor = 2 * time.Second

// Store keeps links.
type Store struct {
	links *mongo.Collection
	now   func() time.Time
	// cache holds links Find read lately, by key (a request for a page
	// brings a dozen for its assets).
	cache sync.Map // key → cached
}

type cached struct {
	l  Link
	at time.Time
}

func New(db *mongo.Database) *Store {
	return &Store{links: db.Collection(Collection), now: time.Now}
}

func key(scope sandbox.Scope, port int) string {
	return scope.SandboxID() + "-" + strconv.Itoa(port)
}

// secret is 160 random bits in hex, which holds no "-" (the token's
// separator) or "~" (the grant's).
func secret() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Issue returns the chat's live link to port, or makes one that lasts
// DefaultTTL.
func (s *Store) Issue(ctx context.Context, scope sandbox.Scope, port int) (Link, error) {
	if err := checkPort(port); err != nil {
		return Link{}, err
	}
	k := key(scope, port)
	for range 3 {
		l, err := s.get(ctx, k)
		now := s.now()
		switch {
		case err == nil && now.Before(l.ExpiresAt):
			return l, nil
		case err == nil:
			// Expired: a new secret, under a filter that the old one
			// still holds, so two who renew it agree.
			fresh := l
			fresh.Secret, fresh.Shared, fresh.CreatedAt, fresh.ExpiresAt = secret(), false, now.UTC(), now.Add(DefaultTTL).UTC()
			fresh.Grant, fresh.GrantUntil = "", time.Time{}
			s.cache.Delete(k)
			res, err := s.links.ReplaceOne(ctx, bson.D{{Key: "_id", Value: k}, {Key: "secret", Value: l.Secret}}, fresh)
			if err != nil {
				return Link{}, fmt.Errorf("renew preview link: %w", err)
			}
			if res.MatchedCount == 1 {
				return fresh, nil
			}
		case errors.Is(err, ErrNotFound):
			l = Link{Key: k, AppID: scope.AppID, UserID: scope.UserID, ChatID: scope.ChatID, Port: port, Secret: secret(),
				CreatedAt: now.UTC(), ExpiresAt: now.Add(DefaultTTL).UTC()}
			_, err := s.links.InsertOne(ctx, l)
			if err == nil {
				return l, nil
			}
			if !mongo.IsDuplicateKeyError(err) {
				return Link{}, fmt.Errorf("record preview link: %w", err)
			}
		default:
			return Link{}, err
		}
	}
	return Link{}, fmt.Errorf("record preview link %s: it kept changing under this request; try again", k)
}

func (s *Store) get(ctx context.Context, k string) (Link, error) {
	var l Link
	err := s.links.FindOne(ctx, bson.D{{Key: "_id", Value: k}}).Decode(&l)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Link{}, ErrNotFound
	}
	if err != nil {
		return Link{}, fmt.Errorf("read preview link: %w", err)
	}
	return l, nil
}

// ParseToken splits a token into its key and secret.
func ParseToken(token string) (k, secret string, ok bool) {
	i := strings.LastIndexByte(token, '-')
	if i <= 0 || i == len(token)-1 {
		return "", "", false
	}
	k, secret = token[:i], token[i+1:]
	j := strings.LastIndexByte(k, '-')
	if j <= 0 {
		return "", "", false
	}
	if _, err := strconv.Atoi(k[j+1:]); err != nil {
		return "", "", false
	}
	return k, secret, true
}

// Find is the link token names: ErrNotFound when there is none or the
// secret is not its, ErrExpired past its expiry.
func (s *Store) Find(ctx context.Context, token string) (Link, error) {
	k, sec, ok := ParseToken(token)
	if !ok {
		return Link{}, ErrNotFound
	}
	var l Link
	if c, ok := s.cache.Load(k); ok && s.now().Sub(c.(cached).at) < cacheFor && subtle.ConstantTimeCompare([]byte(sec), []byte(c.(cached).l.Secret)) == 1 {
		l = c.(cached).l
	} else {
		var err error
		if l, err = s.get(ctx, k); err != nil {
			return Link{}, err
		}
		if subtle.ConstantTimeCompare([]byte(sec), []byte(l.Secret)) != 1 {
			return Link{}, ErrNotFound
		}
		s.cache.Store(k, cached{l: l, at: s.now()})
	}
	if !s.now().Before(l.ExpiresAt) {
		return Link{}, ErrExpired
	}
	return l, nil
}

// Granted tells whether grant is the link's current grant.
func (l Link) Granted(grant string, now time.Time) bool {
	return l.Grant != "" && now.Before(l.GrantUntil) && subtle.ConstantTimeCompare([]byte(grant), []byte(l.Grant)) == 1
}

// NewGrant returns the link's grant for its owner: the current one while
// it has more than half its time left, else a new one.
func (s *Store) NewGrant(ctx context.Context, l Link) (string, error) {
	now := s.now()
	if l.Grant != "" && l.GrantUntil.Sub(now) > GrantTTL/2 {
		return l.Grant, nil
	}
	g, until := secret(), now.Add(GrantTTL).UTC()
	_, err := s.links.UpdateOne(ctx, bson.D{{Key: "_id", Value: l.Key}, {Key: "secret", Value: l.Secret}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "grant", Value: g}, {Key: "grantUntil", Value: until}}}})
	if err != nil {
		return "", fmt.Errorf("record the preview grant: %w", err)
	}
	s.cache.Delete(l.Key)
	return g, nil
}

// List lists the chat's links, expired ones included.
func (s *Store) List(ctx context.Context, scope sandbox.Scope) ([]Link, error) {
	cur, err := s.links.Find(ctx, bson.D{{Key: "appId", Value: scope.AppID}, {Key: "userId", Value: scope.UserID}, {Key: "chatId", Value: scope.ChatID}})
	if err != nil {
		return nil, fmt.Errorf("list preview links: %w", err)
	}
	out := []Link{}
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list preview links: %w", err)
	}
	return out, nil
}

// Update sets whether the chat's link to port is shared and, when ttl is
// set, makes it last ttl from now (at most MaxTTL).
func (s *Store) Update(ctx context.Context, scope sandbox.Scope, port int, shared bool, ttl time.Duration) (Link, error) {
	if ttl < 0 || ttl > MaxTTL {
		return Link{}, fmt.Errorf("a preview link lasts at most %s", MaxTTL)
	}
	l, err := s.get(ctx, key(scope, port))
	if err != nil {
		return Link{}, err
	}
	l.Shared = shared
	if ttl > 0 {
		l.ExpiresAt = s.now().Add(ttl).UTC()
	}
	set := bson.D{{Key: "shared", Value: l.Shared}, {Key: "expiresAt", Value: l.ExpiresAt}}
	if _, err := s.links.UpdateOne(ctx, bson.D{{Key: "_id", Value: l.Key}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		return Link{}, fmt.Errorf("update preview link: %w", err)
	}
	s.cache.Delete(l.Key)
	return l, nil
}

// Revoke deletes the chat's link to port: it stops working at once, and
// asking again makes a new one.
func (s *Store) Revoke(ctx context.Context, scope sandbox.Scope, port int) error {
	res, err := s.links.DeleteOne(ctx, bson.D{{Key: "_id", Value: key(scope, port)}})
	s.cache.Delete(key(scope, port))
	if err != nil {
		return fmt.Errorf("revoke preview link: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteChats deletes the chats' links; a chat without a user stands for
// that chat id of every user of its app.
func (s *Store) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	defer s.cache.Clear()
	for _, c := range chats {
		f := bson.D{{Key: "appId", Value: c.AppID}, {Key: "chatId", Value: c.ChatID}}
		if c.UserID != "" {
			f = append(f, bson.E{Key: "userId", Value: c.UserID})
		}
		if _, err := s.links.DeleteMany(ctx, f); err != nil {
			return fmt.Errorf("delete preview links: %w", err)
		}
	}
	return nil
}

// DeleteApp deletes every link of the app's chats.
func (s *Store) DeleteApp(ctx context.Context, appID string) error {
	defer s.cache.Clear()
	if _, err := s.links.DeleteMany(ctx, bson.D{{Key: "appId", Value: appID}}); err != nil {
		return fmt.Errorf("delete preview links: %w", err)
	}
	return nil
}

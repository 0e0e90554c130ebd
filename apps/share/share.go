// Package share keeps an app's share links: login-free chat windows that
// an app's owner hands to people without accounts, as FastGPT's share
// links do. A link has an expiry, a rate per visitor, a cap on its total
// runs, and says whether visitors see the tool cards and the files panel.
//
// A visitor is known by a session of the link (a random token in a
// cookie, stored here only as its hash) that names their uid: a random one,
// or the uid the link's identity hook answered for a token from the site
// that shared the link. Visitors' chats belong to the user id
// VisitorUser(link, uid), which no account and no other link can have, so
// two visitors never reach each other's chats or sandboxes.
//
// Revoking a link deletes it and its visitor sessions: visitors are
// refused at once, their chats stay for the app's owner to read.
package share

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/outbound"
)

// Files is what a link's visitors may do in the files panel.
type Files string

const (
	FilesHidden    Files = "hidden"
	FilesReadOnly  Files = "read"
	FilesReadWrite Files = "write"
)

var (
	// ErrNotFound: no such link (never made, or revoked).
	ErrNotFound = errors.New("no such share link")
	// ErrExpired: the link is past its expiry.
	ErrExpired = errors.New("this share link has expired")
	// ErrInvalid: a link spec that does not meet the rules.
	ErrInvalid = errors.New("invalid share link")
	// ErrRunsUsed: the link has used its cap of runs.
	ErrRunsUsed = errors.New("this share link has used all its runs")
	// ErrNoVisitor: no visitor session (or an ended one).
	ErrNoVisitor = errors.New("no visitor session")
	// ErrHookRefused: the identity hook did not accept the token.
	ErrHookRefused = errors.New("the site that shared this link did not accept your token")
	// ErrHookFailed: the identity hook could not be reached, or answered
	// something other than a uid or a refusal. The error's text is for
	// the engine's log only: what a hook answers, or why it cannot be
	// reached, would tell visitors about the network behind the engine.
	ErrHookFailed = errors.New("the identity hook failed")
)

// Limits on what a link may be given.
const (
	MaxRatePerMinute = 10000
	MaxRuns          = 10_000_000
)

// Link is a share link.
type Link struct {
	ID        string    `bson:"_id" json:"id"`
	AppID     string    `bson:"appId" json:"appId"`
	Name      string    `bson:"name" json:"name"`
	CreatedBy string    `bson:"createdBy" json:"createdBy"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	// ExpiresAt, when set, ends the link.
	ExpiresAt time.Time `bson:"expiresAt,omitempty" json:"expiresAt,omitzero"`
	// RatePerMinute limits each visitor's requests (0: the engine's
	// limits only).
	RatePerMinute int `bson:"ratePerMinute" json:"ratePerMinute"`
	// MaxRuns caps the link's chat turns over all visitors (0: no cap);
	// Runs counts them.
	MaxRuns int `bson:"maxRuns" json:"maxRuns"`
	Runs    int `bson:"runs" json:"runs"`
	// ShowTools shows visitors the tool cards (commands and their
	// output); off, they see the answers only.
	ShowTools bool  `bson:"showTools" json:"showTools"`
	Files     Files `bson:"files" json:"files"`
	// Terminal lets visitors open a terminal into their chat's sandbox
	// (L1), where the app allows terminals; it needs Files write, since a
	// terminal reads and changes every file.
	Terminal bool `bson:"terminal,omitempty" json:"terminal"`
	// HookURL, when set, is the identity hook: visitors open the link
	// with ?token=..., the engine POSTs {"token"} there and the answer's
	// uid names the visitor. Without it every browser is a visitor of
	// its own.
	HookURL string `bson:"hookUrl,omitempty" json:"hookUrl,omitempty"`
}

// URL is the link's path on the engine.
func (l Link) URL() string { return "/share/" + l.ID }

// Expired reports whether the link is past its expiry at now.
func (l Link) Expired(now time.Time) bool { return !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt) }

// MarshalJSON adds url and expired to the stored fields.
func (l Link) MarshalJSON() ([]byte, error) {
	type plain Link
	return json.Marshal(struct {
		plain
		URL     string `json:"url"`
		Expired bool   `json:"expired"`
	}{plain(l), l.URL(), l.Expired(time.Now())})
}

// Spec is what a new link is made with.
type Spec struct {
	Name          string    `json:"name"`
	ExpiresAt     time.Time `json:"expiresAt"`
	RatePerMinute int       `json:"ratePerMinute"`
	MaxRuns       int       `json:"maxRuns"`
	ShowTools     bool      `json:"showTools"`
	Files         Files     `json:"files"`
	Terminal      bool      `json:"terminal"`
	HookURL       string    `json:"hookUrl"`
}

// VisitorUser is the user id of a link's visitor: it owns their chats
// and sandboxes.
func VisitorUser(linkID, uid string) string { return "share:" + linkID + ":" + uid }

// visitor is a visitor's session of one link.
type visitor struct {
	ID        string    `bson:"_id"` // sha256 of the cookie's token
	LinkID    string    `bson:"linkId"`
	UID       string    `bson:"uid"`
	CSRF      string    `bson:"csrf"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// Visitor is who a visitor session names.
type Visitor struct {
	UID, CSRF string
}

// Store keeps links and their visitor sessions.
type Store struct {
	links, visitors *mongo.Collection
	// Now is the clock; default time.Now.
	Now func() time.Time
	// VisitorTTL is how long a visitor session lasts; default 30 days.
	VisitorTTL time.Duration
	// Hook is the client of identity hooks; default the outbound client
	// (public addresses only) with a 5-second timeout, following no
	// redirect: a hook answers where its owner said.
	Hook *http.Client
}

// New returns a store over db.
func New(db *mongo.Database) *Store {
	return &Store{links: db.Collection("share_links"), visitors: db.Collection("share_visitors"),
		Now: time.Now, VisitorTTL: 30 * 24 * time.Hour, Hook: HookClient(outbound.Allow{})}
}

// HookClient is the client of identity hooks with the operator's
// exceptions to the outbound refusals.
func HookClient(allow outbound.Allow) *http.Client {
	return allow.Client(outbound.Options{Timeout: 5 * time.Second})
}

func random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("no randomness: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// check validates a spec and returns it cleaned.
func (s *Store) check(spec Spec) (Spec, error) {
	spec.Name = strings.TrimSpace(spec.Name)
	spec.HookURL = strings.TrimSpace(spec.HookURL)
	if spec.Files == "" {
		spec.Files = FilesHidden
	}
	switch {
	case spec.Name == "" || len(spec.Name) > 100:
		return spec, fmt.Errorf("%w: a link needs a name of 1 to 100 characters", ErrInvalid)
	case !spec.ExpiresAt.IsZero() && !spec.ExpiresAt.After(s.Now()):
		return spec, fmt.Errorf("%w: the expiry %s is not in the future", ErrInvalid, spec.ExpiresAt.UTC().Format(time.RFC3339))
	case spec.RatePerMinute < 0 || spec.RatePerMinute > MaxRatePerMinute:
		return spec, fmt.Errorf("%w: ratePerMinute is 0 (no limit of the link's own) to %d", ErrInvalid, MaxRatePerMinute)
	case spec.MaxRuns < 0 || spec.MaxRuns > MaxRuns:
		return spec, fmt.Errorf("%w: maxRuns is 0 (no cap) to %d", ErrInvalid, MaxRuns)
	case !slices.Contains([]Files{FilesHidden, FilesReadOnly, FilesReadWrite}, spec.Files):
		return spec, fmt.Errorf("%w: files is %q, %q or %q, not %q", ErrInvalid, FilesHidden, FilesReadOnly, FilesReadWrite, spec.Files)
	case spec.Terminal && spec.Files != FilesReadWrite:
		return spec, fmt.Errorf("%w: a terminal reads and changes every file of the sandbox: a link with terminal needs files %q", ErrInvalid, FilesReadWrite)
	}
	if spec.HookURL != "" {
		u, err := url.Parse(spec.HookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || len(spec.HookURL) > 2000 {
			return spec, fmt.Errorf("%w: hookUrl must be an absolute http(s) URL without credentials in it", ErrInvalid)
		}
	}
	return spec, nil
}

// Create makes a link for an app.
func (s *Store) Create(ctx context.Context, appID, createdBy string, spec Spec) (Link, error) {
	spec, err := s.check(spec)
	if err != nil {
		return Link{}, err
	}
	l := Link{ID: random(12), AppID: appID, Name: spec.Name, CreatedBy: createdBy, CreatedAt: s.Now().UTC(),
		RatePerMinute: spec.RatePerMinute, MaxRuns: spec.MaxRuns, ShowTools: spec.ShowTools, Files: spec.Files, Terminal: spec.Terminal, HookURL: spec.HookURL}
	if !spec.ExpiresAt.IsZero() {
		l.ExpiresAt = spec.ExpiresAt.UTC()
	}
	if _, err := s.links.InsertOne(ctx, l); err != nil {
		return Link{}, fmt.Errorf("create share link: %w", err)
	}
	return l, nil
}

// List returns an app's links, newest first.
func (s *Store) List(ctx context.Context, appID string) ([]Link, error) {
	cur, err := s.links.Find(ctx, bson.D{{Key: "appId", Value: appID}})
	if err != nil {
		return nil, fmt.Errorf("list share links: %w", err)
	}
	links := []Link{}
	if err := cur.All(ctx, &links); err != nil {
		return nil, fmt.Errorf("list share links: %w", err)
	}
	slices.SortFunc(links, func(a, b Link) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return links, nil
}

// Get returns a link that works now: ErrNotFound for a revoked or unknown
// one, ErrExpired (with the link) for an expired one.
func (s *Store) Get(ctx context.Context, id string) (Link, error) {
	var l Link
	err := s.links.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&l)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Link{}, ErrNotFound
	}
	if err != nil {
		return Link{}, fmt.Errorf("read share link: %w", err)
	}
	if l.Expired(s.Now()) {
		return l, ErrExpired
	}
	return l, nil
}

// AppOf is the app a link shares, for the owner caps; "" for a link that
// is gone. An expired link still names its app: its visitors' sandboxes
// may still run (sandbox.Owners.LinkApp).
func (s *Store) AppOf(ctx context.Context, id string) (string, error) {
	l, err := s.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil
	case errors.Is(err, ErrExpired):
		return l.AppID, nil
	}
	return l.AppID, err
}

// Revoke deletes one of the app's links and its visitor sessions.
func (s *Store) Revoke(ctx context.Context, appID, id string) error {
	res, err := s.links.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "appId", Value: appID}})
	if err != nil {
		return fmt.Errorf("revoke share link: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	// The link is gone, so its sessions are refused anyway (Visitor is
	// only asked once the link is found); this only tidies up.
	_, _ = s.visitors.DeleteMany(ctx, bson.D{{Key: "linkId", Value: id}})
	return nil
}

// TransferApp makes to the creator of every link of appID: the app
// changes hands with its links, which then live by to's account.
func (s *Store) TransferApp(ctx context.Context, appID, to string) error {
	if appID == "" || to == "" {
		return fmt.Errorf("%w: transferring an app's links needs the app and the new owner", ErrInvalid)
	}
	if _, err := s.links.UpdateMany(ctx, bson.D{{Key: "appId", Value: appID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "createdBy", Value: to}}}}); err != nil {
		return fmt.Errorf("transfer the app's share links: %w", err)
	}
	return nil
}

// DeleteApp deletes every link of an app (the app is being deleted).
func (s *Store) DeleteApp(ctx context.Context, appID string) error {
	links, err := s.List(ctx, appID)
	if err != nil {
		return err
	}
	for _, l := range links {
		if err := s.Revoke(ctx, appID, l.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// TakeRun counts one run against the link's cap: ErrRunsUsed when it has
// none left. The check and the count are one update, so concurrent runs
// never pass the cap.
func (s *Store) TakeRun(ctx context.Context, l Link) error {
	filter := bson.D{{Key: "_id", Value: l.ID}}
	if l.MaxRuns > 0 {
		filter = append(filter, bson.E{Key: "runs", Value: bson.D{{Key: "$lt", Value: l.MaxRuns}}})
	}
	res, err := s.links.UpdateOne(ctx, filter, bson.D{{Key: "$inc", Value: bson.D{{Key: "runs", Value: 1}}}})
	if err != nil {
		return fmt.Errorf("count the run: %w", err)
	}
	if res.MatchedCount == 0 {
		if _, err := s.Get(ctx, l.ID); err != nil {
			return err
		}
		return fmt.Errorf("%w (%d)", ErrRunsUsed, l.MaxRuns)
	}
	return nil
}

// NewVisitor opens a visitor session of a link for uid (empty: a new
// random visitor) and returns its cookie token.
func (s *Store) NewVisitor(ctx context.Context, linkID, uid string) (token string, v Visitor, err error) {
	if uid == "" {
		uid = random(12)
	}
	token, v = "fbv_"+random(32), Visitor{UID: uid, CSRF: random(32)}
	doc := visitor{ID: hash(token), LinkID: linkID, UID: uid, CSRF: v.CSRF, ExpiresAt: s.Now().Add(s.VisitorTTL).UTC()}
	if _, err := s.visitors.InsertOne(ctx, doc); err != nil {
		return "", Visitor{}, fmt.Errorf("open visitor session: %w", err)
	}
	return token, v, nil
}

// Visitor returns the visitor of a session token of the link.
func (s *Store) Visitor(ctx context.Context, linkID, token string) (Visitor, error) {
	if token == "" {
		return Visitor{}, ErrNoVisitor
	}
	var doc visitor
	// By _id alone, the link compared here: the embedded database looks
	// up only a filter of exactly {_id} and reads the whole collection for
	// any other (internal/mongodb), on every request of every visitor.
	err := s.visitors.FindOne(ctx, bson.D{{Key: "_id", Value: hash(token)}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) || err == nil && doc.LinkID != linkID {
		return Visitor{}, ErrNoVisitor
	}
	if err != nil {
		return Visitor{}, fmt.Errorf("read visitor session: %w", err)
	}
	if !s.Now().Before(doc.ExpiresAt) {
		_, _ = s.visitors.DeleteOne(ctx, bson.D{{Key: "_id", Value: doc.ID}})
		return Visitor{}, ErrNoVisitor
	}
	return Visitor{UID: doc.UID, CSRF: doc.CSRF}, nil
}

// maxUID bounds a uid from an identity hook.
const maxUID = 128

// Identify asks the link's identity hook who holds token: it POSTs
// {"token": token} and accepts a 2xx answer {"uid": "..."} (or FastGPT's
// {"success": true, "data": {"uid": "..."}}). Anything else is
// ErrHookRefused when the hook refuses (a 4xx answer), ErrHookFailed
// when it cannot be reached or answers anything else; both texts name
// what happened for the engine's log, never for the visitor.
func (s *Store) Identify(ctx context.Context, l Link, token string) (string, error) {
	if l.HookURL == "" {
		return "", errors.New("this link has no identity hook")
	}
	if token == "" || len(token) > 4096 {
		return "", fmt.Errorf("%w: no token (open the link from the site that shared it)", ErrHookRefused)
	}
	body, _ := json.Marshal(map[string]string{"token": token})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.HookURL, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrHookFailed, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flowbox-share-link")
	resp, err := s.Hook.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrHookFailed, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode/100 == 4:
		return "", fmt.Errorf("%w (it answered %d)", ErrHookRefused, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		// Redirects included: they are not followed.
		return "", fmt.Errorf("%w: it answered %d", ErrHookFailed, resp.StatusCode)
	}
	var ans struct {
		UID     string `json:"uid"`
		Success *bool  `json:"success"`
		Data    struct {
			UID string `json:"uid"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return "", fmt.Errorf("%w: its answer is not JSON with a uid", ErrHookFailed)
	}
	uid := ans.UID
	if uid == "" && (ans.Success == nil || *ans.Success) {
		uid = ans.Data.UID
	}
	uid = strings.TrimSpace(uid)
	if uid == "" || len(uid) > maxUID || strings.ContainsAny(uid, "\x00\n\r") {
		return "", fmt.Errorf("%w: no usable uid in its answer", ErrHookFailed)
	}
	return uid, nil
}

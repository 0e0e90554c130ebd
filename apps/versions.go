package apps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/nodes"
)

// Versions of an app. Publishing copies the draft, exactly as it was
// saved, into a version document that is never changed afterwards, and
// makes the app name it (PublishedVersionID). A version's _id is its app's
// id and its number, so that numbers are claimed by inserting under them:
// on the embedded database only inserts under a unique key are atomic.
// The app document's Versions counts them as a hint, and readers go on
// past it. The app's pointer to its published version is an update of the
// app document, which the embedded database applies as read-modify-write:
// a save of the draft at the very instant of a publish may undo the
// pointer (the version stays; publishing again sets it).

// VersionsCollection holds the apps' versions.
const VersionsCollection = "app_versions"

// ErrVersionNotFound: the app has no such version.
var ErrVersionNotFound = errors.New("version not found")

// Version is a published version of an app: the draft's graph as it was
// when it was published, with a note saying what changed.
type Version struct {
	ID     string `bson:"_id" json:"versionId"`
	AppID  string `bson:"appId" json:"appId"`
	Number int    `bson:"number" json:"number"`
	Note   string `bson:"note" json:"note"`
	// AuthorID is the user who published it.
	AuthorID  string    `bson:"authorId" json:"author"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	// Graph is nil in lists.
	Graph     *nodes.Graph `bson:"-" json:"graph,omitempty"`
	GraphJSON string       `bson:"graph,omitempty" json:"-"`
}

// MaxNoteLength bounds a version's note, in characters.
const MaxNoteLength = 500

// versionID is the _id of an app's version n.
func versionID(appID string, n int) string { return appID + "-v" + strconv.Itoa(n) }

// maxClaims bounds the numbers one publish tries past the hint before it
// gives up: more publishes of one app at once than this are not expected.
const maxClaims = 100

// Publication is what publishing adds to the draft.
type Publication struct {
	Note, AuthorID string
	// Check, when set, says what is wrong with the draft beyond what the
	// templates check (the check an app's save passes); a draft with
	// problems is not published.
	Check func(nodes.Graph) []nodes.Problem
}

// Publish makes the app's current draft a new version and the published
// one. The draft is read from the database, not the cache, so that what
// is published is what was saved last. A draft that fails the checks is
// refused with a *nodes.ValidationError; a missing app with ErrNotFound.
func (s *Store) Publish(ctx context.Context, appID string, p Publication, now time.Time) (Version, error) {
	a, err := s.read(ctx, appID)
	if err != nil {
		return Version{}, err
	}
	if s.templates != nil {
		if err := s.templates.Validate(&a.Graph); err != nil {
			return Version{}, err
		}
	}
	if p.Check != nil {
		if problems := p.Check(a.Graph); len(problems) > 0 {
			return Version{}, &nodes.ValidationError{Problems: problems}
		}
	}
	v := Version{AppID: appID, Note: p.Note, AuthorID: p.AuthorID, CreatedAt: now.UTC().Truncate(time.Millisecond), GraphJSON: a.GraphJSON}
	for n := a.Versions + 1; ; n++ {
		v.ID, v.Number = versionID(appID, n), n
		_, err := s.versions.InsertOne(ctx, v)
		if err == nil {
			break
		}
		if !mongo.IsDuplicateKeyError(err) || n >= a.Versions+maxClaims {
			return Version{}, fmt.Errorf("publish app %s: keep version %d: %w", appID, n, err)
		}
	}
	defer s.forget(appID)
	res, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: appID}}, bson.D{{Key: "$set", Value: bson.D{
		{Key: "publishedVersionId", Value: v.ID}, {Key: "versions", Value: v.Number}}}})
	if err == nil && res.MatchedCount == 0 {
		// Deleted meanwhile: its versions go with it.
		_, _ = s.versions.DeleteOne(ctx, bson.D{{Key: "_id", Value: v.ID}})
		return Version{}, fmt.Errorf("app %s: %w", appID, ErrNotFound)
	}
	if err != nil {
		return Version{}, fmt.Errorf("publish app %s: version %d is kept, but the app could not be made to run it: %w", appID, v.Number, err)
	}
	g := a.Graph
	v.Graph = &g
	return v, nil
}

// Version returns a version of the app, with its graph, which is the
// caller's to change; ErrVersionNotFound when the app has no such version.
func (s *Store) Version(ctx context.Context, appID, id string) (Version, error) {
	s.mu.Lock()
	v, ok := s.published[id]
	s.mu.Unlock()
	switch {
	case ok && v.AppID != appID:
		return Version{}, fmt.Errorf("app %s, version %s: %w", appID, id, ErrVersionNotFound)
	case ok:
		g := v.Graph.Clone()
		v.Graph = &g
		return v, nil
	}
	err := s.versions.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&v)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && v.AppID != appID) {
		return Version{}, fmt.Errorf("app %s, version %s: %w", appID, id, ErrVersionNotFound)
	} else if err != nil {
		return Version{}, fmt.Errorf("read app %s's version %s: %w", appID, id, err)
	}
	var g nodes.Graph
	if err := json.Unmarshal([]byte(v.GraphJSON), &g); err != nil {
		return Version{}, fmt.Errorf("app %s's version %s has an unreadable graph: %w", appID, id, err)
	}
	v.Graph = &g
	s.mu.Lock()
	if len(s.published) >= cacheLimit {
		clear(s.published)
	}
	kept := v
	kg := g.Clone()
	kept.Graph = &kg
	s.published[id] = kept
	s.mu.Unlock()
	return v, nil
}

// Versions lists the app's versions newest first, without their graphs:
// limit of them (0: all) after skipping offset. total is how many the app
// has.
func (s *Store) Versions(ctx context.Context, a App, offset, limit int) (list []Version, total int, err error) {
	total = a.Versions
	// Versions published since the app was read follow the hint.
	for {
		err := s.versions.FindOne(ctx, bson.D{{Key: "_id", Value: versionID(a.ID, total+1)}},
			options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if errors.Is(err, mongo.ErrNoDocuments) {
			break
		} else if err != nil {
			return nil, 0, fmt.Errorf("list app %s's versions: %w", a.ID, err)
		}
		total++
	}
	last := max(1, total-offset-limit+1)
	if limit <= 0 {
		last = 1
	}
	list = []Version{}
	for n := total - offset; n >= last; n-- {
		var v Version
		err := s.versions.FindOne(ctx, bson.D{{Key: "_id", Value: versionID(a.ID, n)}},
			options.FindOne().SetProjection(bson.D{{Key: "graph", Value: 0}})).Decode(&v)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		} else if err != nil {
			return nil, 0, fmt.Errorf("list app %s's versions: %w", a.ID, err)
		}
		list = append(list, v)
	}
	return list, total, nil
}

// Rollback makes a version's graph the app's draft again and, with
// publish, the published version too; without, the version that was
// published stays so until the draft is published. The draft it replaces
// is not kept. A missing app is ErrNotFound, a version not the app's
// ErrVersionNotFound.
func (s *Store) Rollback(ctx context.Context, appID, id string, publish bool, now time.Time) (App, error) {
	v, err := s.Version(ctx, appID, id)
	if err != nil {
		return App{}, err
	}
	if s.templates != nil {
		if err := s.templates.Validate(v.Graph); err != nil {
			return App{}, err
		}
	}
	set := bson.D{{Key: "graph", Value: v.GraphJSON}, {Key: "updatedAt", Value: now.UTC()}}
	if publish {
		set = append(set, bson.E{Key: "publishedVersionId", Value: v.ID})
	}
	res, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: appID}}, bson.D{{Key: "$set", Value: set}})
	s.forget(appID)
	if err != nil {
		return App{}, fmt.Errorf("roll app %s back to version %d: %w", appID, v.Number, err)
	}
	if res.MatchedCount == 0 {
		return App{}, fmt.Errorf("app %s: %w", appID, ErrNotFound)
	}
	return s.Get(ctx, appID)
}

// Running is the graph the app's chats run: its published version's, or
// its draft when it has none; versionID is the version's ("" for the
// draft).
func (s *Store) Running(ctx context.Context, a App) (g nodes.Graph, versionID string, err error) {
	if a.PublishedVersionID == "" {
		return a.Graph, "", nil
	}
	v, err := s.Version(ctx, a.ID, a.PublishedVersionID)
	if err != nil {
		return nodes.Graph{}, "", err
	}
	return *v.Graph, v.ID, nil
}

// deleteVersions removes every version of an app (the app is being
// deleted). It scans the collection on the embedded database, which is
// fine for something this rare.
func (s *Store) deleteVersions(ctx context.Context, appID string) error {
	if _, err := s.versions.DeleteMany(ctx, bson.D{{Key: "appId", Value: appID}}); err != nil {
		return fmt.Errorf("delete app %s's versions: %w", appID, err)
	}
	s.mu.Lock()
	for id, v := range s.published {
		if v.AppID == appID {
			delete(s.published, id)
		}
	}
	s.mu.Unlock()
	return nil
}

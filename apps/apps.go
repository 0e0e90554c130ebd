// Package apps stores apps: a named workflow graph with its owner. Graphs
// are validated against the node templates before they are saved. The
// graph an app's owner saves is its draft; publishing it keeps a copy as
// an immutable version (versions.go), and the app names the version its
// chats run. Apps and versions are read by _id only (see internal/mongodb
// on the embedded database), and kept in memory once read: every chat
// turn needs its app, and apps change rarely. It must never decide who
// may read or change an app: callers check OwnerID.
package apps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/nodes"
)

// Collection holds the apps.
const Collection = "apps"

// ErrNotFound: no such app.
var ErrNotFound = errors.New("app not found")

// DemoAppID is the app every engine has: the demo model with the sandbox
// switch on, so a first run shows the whole loop.
const DemoAppID = "demo"

// App is an app as stored. The graph is kept as JSON text, exactly as
// validated.
type App struct {
	ID      string `bson:"_id" json:"appId"`
	Name    string `bson:"name" json:"name"`
	OwnerID string `bson:"ownerId" json:"ownerId"`
	// Public apps may be chatted with by every signed-in user.
	Public bool `bson:"public" json:"public"`
	// TerminalOff turns the web terminal (L1) off for the app's chats:
	// by default a chat's owner may open one (share links' visitors only
	// where their link allows it); admins may always.
	TerminalOff bool `bson:"terminalOff,omitempty" json:"terminalOff"`
	// IdleMinutes is how long the app's chats' sandboxes may go unused
	// before they stop (R4); 0: the engine's 5 minutes.
	IdleMinutes int `bson:"idleMinutes,omitempty" json:"idleMinutes,omitempty"`
	// CheckpointKeep and CheckpointMaxAgeHours lower the engine's
	// retention of the app's chats' checkpoints (R4): those of their last
	// this many turns, none older than this many hours; 0: the engine's.
	CheckpointKeep        int `bson:"checkpointKeep,omitempty" json:"checkpointKeep,omitempty"`
	CheckpointMaxAgeHours int `bson:"checkpointMaxAgeHours,omitempty" json:"checkpointMaxAgeHours,omitempty"`
	// Graph is the draft: what the owner saved last.
	Graph     nodes.Graph `bson:"-" json:"graph"`
	GraphJSON string      `bson:"graph" json:"-"`
	// PublishedVersionID names the version chats, app keys and share
	// links run; empty: the app has none, and they run the draft.
	PublishedVersionID string `bson:"publishedVersionId,omitempty" json:"publishedVersionId"`
	// Versions is the number of the newest version as this document last
	// heard of it: a hint, since versions are claimed by inserting them
	// (see Publish).
	Versions  int       `bson:"versions,omitempty" json:"-"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time `bson:"updatedAt" json:"updatedAt"`
}

// CacheMaxAge bounds how long an app read from the database is served from
// memory. A change through this Store is seen at once; a change made by
// another engine process sharing the database is seen within this time.
const CacheMaxAge = 2 * time.Second

// cacheLimit bounds the apps kept in memory; past it the cache starts over.
const cacheLimit = 1024

// Store keeps apps and their versions in MongoDB.
type Store struct {
	coll, versions *mongo.Collection
	templates      nodes.Templates
	now            func() time.Time // tests move it

	mu    sync.Mutex
	cache map[string]cachedApp
	// gen counts the changes made through this Store, so that a read that
	// raced with one is not cached.
	gen uint64
	// published holds versions read, which never change.
	published map[string]Version
}

type cachedApp struct {
	app    App
	readAt time.Time
}

// New returns a store that validates graphs with templates.
func New(db *mongo.Database, templates nodes.Templates) *Store {
	return &Store{coll: db.Collection(Collection), versions: db.Collection(VersionsCollection), templates: templates, now: time.Now,
		cache: map[string]cachedApp{}, published: map[string]Version{}}
}

// Get returns an app; ErrNotFound when there is none. The app is the
// caller's to change: its graph is a copy.
func (s *Store) Get(ctx context.Context, id string) (App, error) {
	s.mu.Lock()
	c, ok := s.cache[id]
	gen := s.gen
	s.mu.Unlock()
	if ok && s.now().Sub(c.readAt) < CacheMaxAge {
		return c.app.clone(), nil
	}
	readAt := s.now()
	a, err := s.read(ctx, id)
	if err != nil {
		return App{}, err
	}
	s.mu.Lock()
	if s.gen == gen {
		if len(s.cache) >= cacheLimit {
			clear(s.cache)
		}
		s.cache[id] = cachedApp{app: a.clone(), readAt: readAt}
	}
	s.mu.Unlock()
	return a, nil
}

// forget drops an app from the cache, and makes reads in flight not
// cache what they find.
func (s *Store) forget(id string) {
	s.mu.Lock()
	delete(s.cache, id)
	s.gen++
	s.mu.Unlock()
}

func (a App) clone() App {
	a.Graph = a.Graph.Clone()
	return a
}

func (s *Store) read(ctx context.Context, id string) (App, error) {
	var a App
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&a)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return App{}, fmt.Errorf("app %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return App{}, fmt.Errorf("read app %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(a.GraphJSON), &a.Graph); err != nil {
		return App{}, fmt.Errorf("app %s has an unreadable graph: %w", id, err)
	}
	return a, nil
}

// Put validates the app's graph and saves it (insert or replace) as the
// draft; which version is published is left as it is.
func (s *Store) Put(ctx context.Context, a App, now time.Time) error {
	if a.ID == "" || a.Name == "" {
		return fmt.Errorf("an app needs an id and a name")
	}
	if err := s.templates.Validate(&a.Graph); err != nil {
		return err
	}
	graph, err := json.Marshal(a.Graph)
	if err != nil {
		return err
	}
	now = now.UTC()
	defer s.forget(a.ID)
	_, err = s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: a.ID}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "name", Value: a.Name}, {Key: "ownerId", Value: a.OwnerID}, {Key: "public", Value: a.Public}, {Key: "terminalOff", Value: a.TerminalOff}, {Key: "idleMinutes", Value: a.IdleMinutes},
			{Key: "checkpointKeep", Value: a.CheckpointKeep}, {Key: "checkpointMaxAgeHours", Value: a.CheckpointMaxAgeHours}, {Key: "graph", Value: string(graph)}, {Key: "updatedAt", Value: now}}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "createdAt", Value: now}}},
	}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("save app %s: %w", a.ID, err)
	}
	return nil
}

// DemoGraph is the demo app's workflow: the tool-call node on the offline
// demo model with the sandbox on.
func DemoGraph() nodes.Graph {
	var g nodes.Graph
	_ = json.Unmarshal([]byte(`{"nodes":[
		{"nodeId":"start","type":"workflowStart","name":"Start"},
		{"nodeId":"agent","type":"tools","name":"Agent","inputs":{
			"model":"flowbox-demo","useAgentSandbox":true,
			"systemPrompt":"You are a helpful assistant with a Linux sandbox."}}],
		"edges":[{"source":"start","target":"agent"}]}`), &g)
	return g
}

// EnsureDemo creates the demo app when it does not exist; an existing one
// (perhaps edited) is left alone.
func (s *Store) EnsureDemo(ctx context.Context, owner string, now time.Time) error {
	if _, err := s.Get(ctx, DemoAppID); err == nil || !errors.Is(err, ErrNotFound) {
		return err
	}
	return s.Put(ctx, App{ID: DemoAppID, Name: "Demo: sandbox agent", OwnerID: owner, Public: true, Graph: DemoGraph()}, now)
}

// List returns the apps of an owner, or every app when owner is empty,
// by name.
func (s *Store) List(ctx context.Context, owner string) ([]App, error) {
	filter := bson.D{}
	if owner != "" {
		filter = bson.D{{Key: "ownerId", Value: owner}}
	}
	cur, err := s.coll.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "name", Value: 1}}).SetProjection(bson.D{{Key: "graph", Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	var out []App
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	return out, nil
}

// Delete removes an app with its versions; a missing one is not an
// error.
func (s *Store) Delete(ctx context.Context, id string) error {
	defer s.forget(id)
	// The versions first: when they cannot go, the app stays, and a retry
	// finds it to delete.
	if err := s.deleteVersions(ctx, id); err != nil {
		return err
	}
	if _, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("delete app %s: %w", id, err)
	}
	return nil
}

// IdleTimeouts are the idle timeouts of the apps that set one (R4), by
// app id.
func (s *Store) IdleTimeouts(ctx context.Context) (map[string]time.Duration, error) {
	cur, err := s.coll.Find(ctx, bson.D{{Key: "idleMinutes", Value: bson.D{{Key: "$gt", Value: 0}}}}, options.Find().SetProjection(bson.D{{Key: "idleMinutes", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("read the apps' idle timeouts: %w", err)
	}
	var list []App
	if err := cur.All(ctx, &list); err != nil {
		return nil, fmt.Errorf("read the apps' idle timeouts: %w", err)
	}
	out := make(map[string]time.Duration, len(list))
	for _, a := range list {
		out[a.ID] = time.Duration(a.IdleMinutes) * time.Minute
	}
	return out, nil
}

package mcptool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Collection holds the registered servers, one document per server
// under its id.
const Collection = "mcp_servers"

var (
	// ErrNotFound: no server has this id.
	ErrNotFound = errors.New("MCP server not found")
	// ErrExists: a server has this id already; choose another id or
	// update that server.
	ErrExists = errors.New("an MCP server with this id exists already")
	// ErrInvalid: the server's settings are refused; the error says why.
	ErrInvalid = errors.New("invalid MCP server")
	// ErrDisabled: an admin disabled the server; its tools are not
	// offered.
	ErrDisabled = errors.New("MCP server is disabled")
)

// stored is srv as its document: times in UTC, as they read back.
func stored(srv Server) Server {
	srv.CreatedAt, srv.UpdatedAt = srv.CreatedAt.UTC(), srv.UpdatedAt.UTC()
	return srv
}

// Store is the registry of MCP servers in MongoDB. Every write is one
// document by _id, as the embedded database (FerretDB, no transactions)
// requires: the id's uniqueness is the _id index's.
type Store struct {
	c   *mongo.Collection
	now func() time.Time
}

// NewStore returns a store over db.
func NewStore(db *mongo.Database) *Store {
	return &Store{c: db.Collection(Collection), now: time.Now}
}

// Put registers a new server and returns it as stored. ErrExists when
// its id is taken; ErrInvalid, saying why, when its settings are wrong.
func (s *Store) Put(ctx context.Context, srv Server) (Server, error) {
	if err := srv.Validate(); err != nil {
		return Server{}, err
	}
	if err := noMasked(srv); err != nil {
		return Server{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond) // what the database keeps
	srv.CreatedAt, srv.UpdatedAt = now, now
	_, err := s.c.InsertOne(ctx, stored(srv))
	if mongo.IsDuplicateKeyError(err) {
		return Server{}, fmt.Errorf("register MCP server %s: %w", srv.ID, ErrExists)
	} else if err != nil {
		return Server{}, fmt.Errorf("register MCP server %s: %w", srv.ID, err)
	}
	return srv, nil
}

// noMasked refuses the placeholder as a secret of a new server: there is
// no stored secret for it to stand for.
func noMasked(srv Server) error {
	if srv.Token == Masked {
		return fmt.Errorf("%w: the token %q is the placeholder of a hidden token; give the token itself", ErrInvalid, Masked)
	}
	for name, v := range srv.Headers {
		if v == Masked {
			return fmt.Errorf("%w: header %s has the placeholder %q as its value; give the value itself", ErrInvalid, name, Masked)
		}
	}
	return nil
}

// Update replaces a registered server's settings and returns it as
// stored. A header value or a token equal to Masked keeps the stored
// one, and so does the URL as the public view shows it (its password
// hidden); an empty token removes it. ErrNotFound when no server has the
// id.
func (s *Store) Update(ctx context.Context, srv Server) (Server, error) {
	old, err := s.Get(ctx, srv.ID)
	if err != nil {
		return Server{}, err
	}
	if srv.Token == Masked {
		srv.Token = old.Token
	}
	if srv.URL != "" && srv.URL != old.URL && srv.URL == redactURL(old.URL) {
		// The public view's URL sent back: its hidden password stays.
		srv.URL = old.URL
	}
	if len(srv.Headers) > 0 {
		headers := maps.Clone(srv.Headers)
		for name, v := range headers {
			if v != Masked {
				continue
			}
			stored, ok := old.Headers[name]
			if !ok {
				return Server{}, fmt.Errorf("%w: header %s is new and has the placeholder %q as its value; give the value itself", ErrInvalid, name, Masked)
			}
			headers[name] = stored
		}
		srv.Headers = headers
	}
	if err := srv.Validate(); err != nil {
		return Server{}, err
	}
	srv.CreatedAt, srv.UpdatedAt = old.CreatedAt, s.now().UTC().Truncate(time.Millisecond)
	res, err := s.c.ReplaceOne(ctx, bson.D{{Key: "_id", Value: srv.ID}}, stored(srv))
	if err != nil {
		return Server{}, fmt.Errorf("update MCP server %s: %w", srv.ID, err)
	}
	if res.MatchedCount == 0 {
		return Server{}, fmt.Errorf("update MCP server %s: it was deleted meanwhile: %w", srv.ID, ErrNotFound)
	}
	return srv, nil
}

// Get returns a server with its secrets; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (Server, error) {
	var d Server
	err := s.c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Server{}, fmt.Errorf("MCP server %q: %w", id, ErrNotFound)
	} else if err != nil {
		return Server{}, fmt.Errorf("read MCP server %q: %w", id, err)
	}
	return d, nil
}

// List returns every registered server, by id.
func (s *Store) List(ctx context.Context) ([]Server, error) {
	cur, err := s.c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	var out []Server
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list MCP servers: %w", err)
	}
	return out, nil
}

// Delete removes a server; ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, id string) error {
	res, err := s.c.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return fmt.Errorf("delete MCP server %q: %w", id, err)
	}
	if res.DeletedCount == 0 {
		return fmt.Errorf("delete MCP server %q: %w", id, ErrNotFound)
	}
	return nil
}

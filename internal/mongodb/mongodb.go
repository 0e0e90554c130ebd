// Package mongodb connects Flowbox to its MongoDB-wire database: a real
// MongoDB in production, or an embedded FerretDB (SQLite backend) for a
// zero-setup run.
//
// It is connection plumbing only. It must never know the product's
// collections, documents or indexes (their owners do, e.g.
// sandbox/mongostore), and it must never log or return a connection string
// or an error that still carries the password.
//
// What the embedded FerretDB v1.24 (SQLite) does differently from MongoDB,
// which every collection's owner must design for (measured here):
//   - Only a filter that is exactly {_id: <string or ObjectId>} is
//     answered from an index, and only thanks to the index the embedded
//     database adds (Embedded.IndexIDs); every other query, $in on _id
//     included, decodes the whole collection (about 15-20 µs a
//     document).
//   - Updates are read-modify-write without a lock: of 20 concurrent $inc
//     on one document about 6 land, and a conditional update
//     ({_id, status: "running"} → "stopping") can succeed for several
//     concurrent callers. Inserts under a unique key are atomic (a
//     duplicate gets E11000): build exclusive claims on them, or on Redis.
//   - No transactions, partial indexes (refused with code 238), TTL
//     indexes or change streams; $slice in $push is accepted and ignored;
//     one createIndexes naming several existing indexes drops the
//     connection.
package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Connect opens a client for uri, checks with a ping that the server
// answers, and returns it with the database dbName. ctx bounds the ping:
// without a deadline the driver waits up to its server selection timeout
// (30s unless the URI sets serverSelectionTimeoutMS).
func Connect(ctx context.Context, uri, dbName string) (*mongo.Client, *mongo.Database, error) {
	if dbName == "" {
		return nil, nil, errors.New("connect to MongoDB: empty database name")
	}
	fail := func(err error) error {
		return fmt.Errorf("cannot reach MongoDB at %s: %w; set FLOWBOX_MONGODB_URI or leave it empty for the embedded database",
			Redact(uri), redactErr(err, uri))
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return nil, nil, fail(err)
	}
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		// The client holds pools and monitors; release them even when the
		// caller's context is already done.
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, nil, fail(err)
	}
	return client, client.Database(dbName), nil
}

// redacted replaces a password wherever a URI or an error would show it.
const redacted = "xxxxx"

// Redact returns uri with the password of its user information, if any,
// replaced, so that it can be logged and shown in errors.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority = rest[:i]
	}
	// LastIndex: an unescaped "@" in the password must not leak its tail.
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return uri
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return uri
	}
	return scheme + "://" + user + ":" + redacted + rest[at:]
}

// password returns the password of uri as written and percent-decoded; the
// driver may quote either in its errors.
func password(uri string) []string {
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return nil
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || pw == "" {
		return nil
	}
	out := []string{pw}
	if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
		out = append(out, dec)
	}
	return out
}

// redactErr hides the password of uri in err's text while keeping err in
// the chain for errors.Is and errors.As.
func redactErr(err error, uri string) error {
	secrets := password(uri)
	msg := err.Error()
	leaks := false
	for _, s := range secrets {
		leaks = leaks || strings.Contains(msg, s)
	}
	if !leaks {
		return err
	}
	return &redactedError{err: err, secrets: secrets}
}

type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, redacted)
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// IsFerretDB reports whether the server behind client is FerretDB, which
// answers buildInfo with its own ferretdbVersion field. Callers use it to
// explain, not to decide: features are detected by trying them.
func IsFerretDB(ctx context.Context, client *mongo.Client) (bool, error) {
	var info bson.M
	err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info)
	if err != nil {
		return false, fmt.Errorf("ask the server for buildInfo: %w", err)
	}
	_, ok := info["ferretdbVersion"]
	return ok, nil
}

package mongodb_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/internal/mongodb"
)

// TestIndexIDs: lookups by _id on the embedded database use an index once
// IndexIDs has run; before, SQLite reads every row. A database dropped in
// between is not created again.
func TestIndexIDs(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	client, db, err := mongodb.Connect(ctx, e.URI(), "idx")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(ctx)
	coll := db.Collection("things")
	if _, err := coll.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	// SQLite's plan of the lookup, as FerretDB's explain reports it.
	plan := func() string {
		t.Helper()
		var out bson.M
		cmd := bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "things"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: "b"}}}}}}
		if err := db.RunCommand(ctx, cmd).Decode(&out); err != nil {
			t.Fatal(err)
		}
		p, err := bson.MarshalExtJSON(out, false, false)
		if err != nil {
			t.Fatal(err)
		}
		return string(p)
	}
	// The embedded database indexes by itself every few seconds; index a
	// second database right away, and compare.
	other := client.Database("idx_other").Collection("things")
	if _, err := other.InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	if p := plan(); strings.Contains(p, "USING INDEX") {
		t.Logf("already indexed by the periodic pass: %s", p)
	} else if !strings.Contains(p, "SCAN") {
		t.Fatalf("plan before IndexIDs = %s, want a SCAN", p)
	}
	if err := e.IndexIDs(ctx); err != nil {
		t.Fatal(err)
	}
	// A connection learns of the new index at its next statement;
	// EXPLAIN alone does not tell it.
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if p := plan(); !strings.Contains(p, "USING INDEX") || !strings.Contains(p, "flowbox_id_expr") {
		t.Errorf("plan after IndexIDs = %s, want a SEARCH using the _id expression index", p)
	}
	// Idempotent, and the data is intact.
	if err := e.IndexIDs(ctx); err != nil {
		t.Fatalf("second IndexIDs: %v", err)
	}
	var doc bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "b"}}).Decode(&doc); err != nil || doc["_id"] != "b" {
		t.Errorf("lookup after indexing: %v, %v", doc, err)
	}
	if err := coll.Database().Collection("things").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.Database("idx_other").Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.IndexIDs(ctx); err != nil {
		t.Fatalf("IndexIDs after drops: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "idx_other.sqlite")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dropped database file: %v, want it gone", err)
	}
}

// Package mongotest gives tests a real MongoDB-wire database: one embedded
// FerretDB per test binary, or the server named by FLOWBOX_TEST_MONGODB_URI,
// so that the same tests can run against real MongoDB. scripts/test sets
// it to one FerretDB process that serves every test binary of the run
// (testdb). Each test gets a database of its own, dropped when the test
// ends.
//
// It is for tests only and must never be imported by product code; it never
// fakes a database.
package mongotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/mongodb"
)

// URIEnv names the variable that points the tests at a server of their
// own: a real MongoDB, or the FerretDB of testdb.
const URIEnv = "FLOWBOX_TEST_MONGODB_URI"

// FerretDBEnv, set to 1 beside URIEnv, says that the server URIEnv names
// is FerretDB (scripts/test sets it beside the URI of testdb).
const FerretDBEnv = "FLOWBOX_TEST_MONGODB_FERRETDB"

// FerretDB reports whether the tests' server is FerretDB: the embedded
// one, or one that FerretDBEnv says is.
func FerretDB() bool {
	return os.Getenv(URIEnv) == "" || os.Getenv(FerretDBEnv) == "1"
}

var (
	mu       sync.Mutex
	client   *mongo.Client
	uri      string
	embedded *mongodb.Embedded
	tempDir  string
	startErr error
	started  bool
)

// connect starts or reaches the shared server once per test binary.
func connect() (*mongo.Client, error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return client, startErr
	}
	started = true

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	uri = os.Getenv(URIEnv)
	if uri == "" {
		tempDir, startErr = os.MkdirTemp("", "flowbox-mongotest-")
		if startErr != nil {
			return nil, startErr
		}
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		embedded, startErr = mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: tempDir, Logger: logger})
		if startErr != nil {
			_ = os.RemoveAll(tempDir)
			return nil, startErr
		}
		uri = embedded.URI()
	}
	// The database chosen here is never used: DB hands out its own.
	client, _, startErr = mongodb.Connect(ctx, uri, "flowbox_test")
	return client, startErr
}

// DB returns a database with a name unique to this test (and to this run,
// so that binaries sharing one MongoDB do not collide), dropped in
// t.Cleanup. A server that cannot be started or reached fails the test:
// the embedded one is always possible, and a configured one was asked for.
func DB(t testing.TB) *mongo.Database {
	t.Helper()
	c, err := connect()
	if err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	db := c.Database(dbName(t.Name()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("mongotest: drop database %s: %v", db.Name(), err)
		}
	})
	return db
}

// URI returns the shared server's connection string and a database of
// this test's own (as DB), for code that connects by itself, such as the
// engine's composition root.
func URI(t testing.TB) (string, *mongo.Database) {
	t.Helper()
	db := DB(t)
	mu.Lock()
	defer mu.Unlock()
	return uri, db
}

// dbName builds a valid database name from a test name: letters, digits
// and underscores only, short enough for MongoDB's and FerretDB's limits,
// with a random suffix.
func dbName(testName string) string {
	var b strings.Builder
	for _, r := range testName {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails
	return fmt.Sprintf("t_%s_%s", name, hex.EncodeToString(suffix))
}

// Main runs the tests and then shuts the shared server down, so that no
// goroutine or temporary file outlives the test binary. Use it from
// TestMain:
//
//	func TestMain(m *testing.M) { mongotest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shutdown()
	os.Exit(code)
}

func shutdown() {
	mu.Lock()
	defer mu.Unlock()
	if client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = client.Disconnect(ctx)
		cancel()
	}
	if embedded != nil {
		embedded.Close()
	}
	if tempDir != "" {
		_ = os.RemoveAll(tempDir)
	}
	client, uri, embedded, tempDir, startErr, started = nil, "", nil, "", nil, false
}

// IndexIDs gives the embedded database's collections their _id lookup
// index now, rather than within the few seconds the database takes by
// itself (mongodb.Embedded.IndexIDs); for benchmarks, which measure
// lookups right after creating a collection. Against a real MongoDB it
// does nothing.
func IndexIDs(t testing.TB) {
	t.Helper()
	if _, err := connect(); err != nil {
		t.Fatalf("mongotest: %v", err)
	}
	if embedded == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := embedded.IndexIDs(ctx); err != nil {
		t.Fatalf("mongotest: %v", err)
	}
}

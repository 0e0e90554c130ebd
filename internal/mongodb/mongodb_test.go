package mongodb_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func TestRedact(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"mongodb://127.0.0.1:27017/", "mongodb://127.0.0.1:27017/"},
		{"mongodb://user@host/db", "mongodb://user@host/db"},
		{"mongodb://user:secret@host:27017/db?authSource=admin", "mongodb://user:xxxxx@host:27017/db?authSource=admin"},
		{"mongodb+srv://user:s%40cret@cluster.example.com", "mongodb+srv://user:xxxxx@cluster.example.com"},
		{"mongodb://user:p@ss@h1:1,h2:2/?replicaSet=rs", "mongodb://user:xxxxx@h1:1,h2:2/?replicaSet=rs"},
		{"not a uri", "not a uri"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := mongodb.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestConnectUnreachable(t *testing.T) {
	uri := "mongodb://flowbox:hunter2@" + closedPort(t) + "/?serverSelectionTimeoutMS=300"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, db, err := mongodb.Connect(ctx, uri, "flowbox")
	if err == nil {
		t.Fatalf("Connect to a closed port: got client %v db %v, want an error", client, db)
	}
	msg := err.Error()
	for _, want := range []string{"cannot reach MongoDB at mongodb://flowbox:xxxxx@", "FLOWBOX_MONGODB_URI"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("error %q shows the password", msg)
	}
}

func TestConnectAndDetect(t *testing.T) {
	db := mongotest.DB(t)
	ctx := context.Background()
	got, err := mongodb.IsFerretDB(ctx, db.Client())
	if err != nil {
		t.Fatal(err)
	}
	want := mongotest.FerretDB()
	if got != want {
		t.Errorf("IsFerretDB = %v, want %v", got, want)
	}
}

// TestEmbeddedKeepsData starts the embedded server twice on one directory:
// what the first wrote, the second must read, so the data lives in DataDir
// and nowhere else.
func TestEmbeddedKeepsData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	run := func(f func(coll *mongo.Collection)) {
		t.Helper()
		e, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: dir, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		// A Unix socket in the data directory, never a TCP port (T1).
		if want := "mongodb://" + strings.ReplaceAll(dir, "/", "%2F") + "%2Fsockets%2Fferretdb-"; !strings.HasPrefix(e.URI(), want) || !strings.HasSuffix(e.URI(), ".sock/") {
			t.Errorf("URI = %q, want %s...ferretdb.sock/", e.URI(), want)
		}
		client, db, err := mongodb.Connect(ctx, e.URI(), "keep")
		if err != nil {
			t.Fatal(err)
		}
		defer client.Disconnect(ctx)
		f(db.Collection("things"))
	}

	run(func(coll *mongo.Collection) {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 42}}); err != nil {
			t.Fatal(err)
		}
		// A failed command is the client's to report, not FerretDB's to log.
		if err := coll.Database().RunCommand(ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Err(); err == nil {
			t.Error("noSuchCommand: got nil error, want one")
		}
	})
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("data directory mode = %v, want 0700", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.sqlite")); err != nil {
		t.Errorf("database file not in the data directory: %v", err)
	}
	run(func(coll *mongo.Collection) {
		var doc struct{ N int }
		if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&doc); err != nil {
			t.Fatalf("after restart: %v", err)
		}
		if doc.N != 42 {
			t.Errorf("after restart n = %d, want 42", doc.N)
		}
	})

	// FerretDB logs every connection at info and every failed reply at
	// warn; none of that may come through.
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			t.Errorf("FerretDB logged below warn: %s", line)
		}
		if strings.Contains(line, "Response") {
			t.Errorf("FerretDB logged a failed reply: %s", line)
		}
	}
}

func TestStartEmbeddedBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := mongodb.StartEmbedded(context.Background(), mongodb.Config{DataDir: filepath.Join(file, "data")})
	if err == nil {
		e.Close()
		t.Fatal("StartEmbedded under a regular file: got nil error, want one")
	}
}

// BenchmarkStartEmbedded measures StartEmbedded on a fresh directory, up to
// the first answered ping; Close is not timed.
func BenchmarkStartEmbedded(b *testing.B) {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	for i := 0; b.Loop(); i++ {
		e, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: filepath.Join(b.TempDir(), fmt.Sprint(i)), Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		e.Close()
		b.StartTimer()
	}
}

// BenchmarkUpsert measures the upsert every sandbox command makes (S5):
// one UpdateOne with upsert in a collection of the given size, filtered by
// {provider, sandboxId} as sandbox/mongostore does, and by _id for
// comparison. FerretDB's SQLite backend pushes down only _id equality and
// scans the collection for anything else; real MongoDB uses the index.
func BenchmarkUpsert(b *testing.B) {
	for _, size := range []int{1, 1000} {
		for _, by := range []string{"provider_sandboxId", "_id"} {
			b.Run(fmt.Sprintf("docs=%d/by=%s", size, by), func(b *testing.B) {
				benchmarkUpsert(b, size, by)
			})
		}
	}
}

func benchmarkUpsert(b *testing.B, size int, by string) {
	ctx := context.Background()
	coll := mongotest.DB(b).Collection("sandbox_instances")
	_, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "provider", Value: 1}, {Key: "sandboxId", Value: 1}},
		Options: options.Index().SetUnique(true),
	})
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]any, size)
	for i := range docs {
		id := fmt.Sprintf("%016x", i)
		docs[i] = bson.D{{Key: "_id", Value: "docker/" + id}, {Key: "provider", Value: "docker"}, {Key: "sandboxId", Value: id}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	id := fmt.Sprintf("%016x", size/2)
	filter := bson.D{{Key: "provider", Value: "docker"}, {Key: "sandboxId", Value: id}}
	if by == "_id" {
		filter = bson.D{{Key: "_id", Value: "docker/" + id}}
	}
	for b.Loop() {
		update := bson.D{
			{Key: "$set", Value: bson.D{{Key: "status", Value: "running"}, {Key: "lastActiveAt", Value: time.Now()}}},
			{Key: "$setOnInsert", Value: bson.D{{Key: "createdAt", Value: time.Now()}}},
		}
		res, err := coll.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true))
		if err != nil {
			b.Fatal(err)
		}
		if res.MatchedCount != 1 {
			b.Fatalf("matched %d documents, want 1", res.MatchedCount)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// A data directory whose path is too long for a socket's puts the socket
// in a private directory of the temporary directory instead; Close
// removes it.
func TestEmbeddedLongDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sock, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(e.URI(), "mongodb://"), "/"))
	if err != nil || !strings.HasPrefix(sock, os.TempDir()) || !strings.HasSuffix(sock, ".sock") {
		t.Errorf("socket %q (%v), want one in %s", sock, err, os.TempDir())
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v %v, want mode 0700", fi, err)
	}
	client, _, err := mongodb.Connect(ctx, e.URI(), "long")
	if err != nil {
		t.Fatal(err)
	}
	client.Disconnect(ctx)
	e.Close()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Errorf("socket directory after Close: %v, want it removed", err)
	}
}

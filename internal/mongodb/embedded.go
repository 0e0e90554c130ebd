package mongodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Config configures the embedded database.
type Config struct {
	// DataDir holds the SQLite files, one per database. It is created with
	// mode 0700 when missing. Required.
	DataDir string
	// Logger receives FerretDB's warnings and errors; its chatter below
	// warn and its dumps of failed replies are dropped. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Embedded is a FerretDB running inside this process with its SQLite
// backend, listening on a Unix socket in a directory only this process's
// user can enter.
//
// FerretDB has no authentication of its own: whoever connects reads and
// writes every collection (the users and their password hashes). A
// loopback port is reachable by every local process and by a sandbox that
// shares the host's network; the socket's 0700 directory is not (T1).
type Embedded struct {
	uri     string
	dir     string
	sockDir string
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// newMu serialises ferretdb.New, which writes package-level state of
// FerretDB (its version record) without a lock.
var newMu sync.Mutex

// StartEmbedded starts FerretDB on a Unix socket of its own (see
// Embedded) and returns once it answers a ping. ctx bounds the start only; the server runs until
// Close.
func StartEmbedded(ctx context.Context, cfg Config) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("start embedded database: empty data directory")
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("start embedded database: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start embedded database: create data directory: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(quiet{h: logger.Handler()}).With("component", "ferretdb")

	// FerretDB wants a "file:" URI naming a directory with a trailing
	// slash; url.URL escapes whatever the path contains.
	//
	// FerretDB runs SQLite in WAL mode. synchronous=NORMAL syncs the log
	// at checkpoints instead of at every commit: a crash of the process
	// loses nothing and nothing is ever corrupted; a power loss may take
	// the last commits, as MongoDB's default (journal synced every 100
	// ms, writes acknowledged before) may. A commit's fsync cost ~3 ms of
	// each record write on the 2-core test machine, most of a warm
	// command's overhead (docs/BENCHMARKS.md).
	sqliteURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir) + "/", RawQuery: "_pragma=synchronous(normal)"}).String()

	sockDir, err := socketDir(dir)
	if err != nil {
		return nil, fmt.Errorf("start embedded database: %w", err)
	}
	sock := filepath.Join(sockDir, "ferretdb.sock")

	newMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: sock},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	newMu.Unlock()
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("start embedded database in %s: %w", dir, err)
	}

	// The listener is bound by New, so the URI is known now; connections
	// wait in the backlog until Run accepts them.
	runCtx, cancel := context.WithCancel(context.Background())
	e := &Embedded{uri: socketURI(sock), dir: dir, sockDir: sockDir, cancel: cancel, done: make(chan struct{})}
	indexed := make(chan struct{})
	go func() {
		defer close(e.done)
		defer func() { <-indexed }()
		_ = f.Run(runCtx) // always nil; it returns when runCtx is done
	}()
	go func() {
		defer close(indexed)
		e.indexIDsEvery(runCtx, logger)
	}()

	if err := ping(ctx, e.uri); err != nil {
		e.Close()
		return nil, fmt.Errorf("start embedded database in %s: %w", dir, err)
	}
	return e, nil
}

func ping(ctx context.Context, uri string) error {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return err
	}
	// Disconnect before returning: FerretDB gives connections still open at
	// shutdown a few seconds' grace, which would slow every Close.
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	return client.Ping(ctx, readpref.Primary())
}

// URI is the mongodb:// URI of the embedded server.
func (e *Embedded) URI() string { return e.uri }

// Close stops the server and waits until it has released its files.
// Clients should disconnect first: FerretDB waits up to 3 seconds for
// connections still open. Close may be called more than once.
func (e *Embedded) Close() {
	e.once.Do(func() {
		e.cancel()
		<-e.done
		os.RemoveAll(e.sockDir)
	})
}

// maxSocketPath is the longest path a Unix socket can have on Linux
// (sun_path is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// socketDir makes a new directory, mode 0700, for this process's socket:
// under the data directory's "sockets" (0700 too), or in the temporary
// directory when the data directory's path is too long for a socket. A
// directory per process, because other engine commands (engine user,
// engine migrate) start their own server on the same files.
func socketDir(dataDir string) (string, error) {
	parent := filepath.Join(dataDir, "sockets")
	// "/ferretdb-" + 10 random digits + "/ferretdb.sock"
	if len(parent)+len("/ferretdb-0123456789/ferretdb.sock") <= maxSocketPath {
		if err := os.Mkdir(parent, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create the socket directory: %w", err)
		}
		// A directory made before with a wider mode is narrowed.
		if err := os.Chmod(parent, 0o700); err != nil {
			return "", fmt.Errorf("create the socket directory: %w", err)
		}
	} else {
		parent = ""
	}
	d, err := os.MkdirTemp(parent, "ferretdb-") // mode 0700
	if err != nil {
		return "", fmt.Errorf("create the socket directory: %w", err)
	}
	return d, nil
}

// socketURI is the mongodb:// URI of a Unix socket: its path, escaped
// whole, as the host (the driver takes a host ending in ".sock" for one).
func socketURI(sock string) string {
	return "mongodb://" + strings.ReplaceAll(url.PathEscape(sock), "/", "%2F") + "/"
}

// quiet keeps FerretDB's own log down to what an operator should see: it
// drops records below warn (FerretDB logs every connection at info) and the
// warn-level dumps of failed replies. A failed command is the client's
// error to report, and the driver's endSessions, which FerretDB does not
// implement, fails that way at every disconnect.
//
// FerretDB derives a logger with attributes for every connection and
// command. Handing those to the wrapped handler formats them at once
// (about 6% of the engine's CPU under load), for records that are almost
// all dropped; quiet keeps them and applies them only to a record it
// passes on.
type quiet struct {
	h   slog.Handler
	ops []func(slog.Handler) slog.Handler // WithAttrs and WithGroup calls, in order
}

func (q quiet) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && q.h.Enabled(ctx, l)
}

func (q quiet) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError &&
		(strings.HasPrefix(r.Message, "Response header: ") || strings.HasPrefix(r.Message, "Response message:")) {
		return nil
	}
	h := q.h
	for _, op := range q.ops {
		h = op(h)
	}
	return h.Handle(ctx, r)
}

func (q quiet) with(op func(slog.Handler) slog.Handler) quiet {
	return quiet{h: q.h, ops: append(slices.Clip(q.ops), op)}
}

func (q quiet) WithAttrs(attrs []slog.Attr) slog.Handler {
	return q.with(func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
}

func (q quiet) WithGroup(name string) slog.Handler {
	return q.with(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

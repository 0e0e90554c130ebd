// Command testdb serves the embedded MongoDB-wire database (FerretDB on
// SQLite, exactly as the engine embeds it) to the test binaries of one
// test run. scripts/test starts it, built without the race detector, and
// points every package's tests at it through FLOWBOX_TEST_MONGODB_URI:
// the database then costs each test binary neither its start nor the
// race detector's instrumentation of FerretDB and SQLite, which was most
// of the CPU time of the web and workers tests.
//
//	testdb -dir DIR
//
// It prints the server's mongodb:// URI on one line of stdout once the
// server answers, and serves until stdin is closed or it is signalled,
// so it never outlives the script that started it.
//
// It is for tests only: the socket's directory keeps other users out,
// but there is no authentication, as in the engine.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb"
)

func main() {
	dir := flag.String("dir", "", "directory for the SQLite files (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "testdb: -dir is required")
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	db, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: *dir, Logger: logger})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(db.URI())

	stop := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- struct{}{}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-sig
		stop <- struct{}{}
	}()
	<-stop
	db.Close()
}

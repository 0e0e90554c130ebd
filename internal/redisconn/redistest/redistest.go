// Package redistest gives tests a Redis to talk to: a real redis-server
// process (Server) or the embedded miniredis the engine falls back to
// (Embedded), each stopped when the test ends.
//
// It is for tests only and must never be imported by product code. Server
// never substitutes miniredis for a missing redis-server: it skips, or
// fails when FLOWBOX_TEST_REQUIRE names "redis".
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn"
	"github.com/flowbox/flowbox/internal/testenv"
)

// Server starts a redis-server on a free loopback port, without
// persistence, waits until it answers PING and returns its address. The
// process is killed in t.Cleanup. args are passed on to redis-server (for
// example "--requirepass", "secret").
func Server(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Need(t, "redis", fmt.Errorf("redis-server not found (apt-get install redis-server): %w", err))
	}
	// The port is chosen before redis-server binds it, so another process
	// may take it in between; try again with a new one.
	var errs []error
	for range 3 {
		addr, err := start(t, bin, args)
		if err == nil {
			return addr
		}
		errs = append(errs, err)
	}
	t.Fatalf("redistest: %v", errors.Join(errs...))
	return ""
}

func start(t testing.TB, bin string, args []string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dir := t.TempDir() // redis-server's working directory; nothing is written to it
	var out syncBuffer
	cmd := exec.Command(bin, append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	}, args...)...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	client := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		// A reply, even NOAUTH from a server started with --requirepass,
		// means it is up.
		var reply redis.Error
		if err == nil || errors.As(err, &reply) {
			break
		}
		select {
		case <-exited:
			return "", fmt.Errorf("redis-server on %s exited: %s", addr, out.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("redis-server on %s does not answer PING: %w; output: %s", addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(stop)
	return addr, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Embedded starts a miniredis with the embedded Redis's real-time TTLs
// and returns its address; it is closed in t.Cleanup. Unlike the
// engine's (redisconn.StartEmbedded) it asks for no password, so that
// tests connect with an address alone.
func Embedded(t testing.TB) string {
	t.Helper()
	m := redisconn.NewMiniredis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		t.Fatalf("redistest: start miniredis: %v", err)
	}
	t.Cleanup(m.Close)
	return m.Addr()
}

// syncBuffer collects redis-server's output, written by exec's copying
// goroutine and read on failure.
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

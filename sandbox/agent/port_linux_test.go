package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

func (e agentEnv) dialer() func(ctx context.Context) (*Conn, error) {
	return func(ctx context.Context) (*Conn, error) { return Dial(ctx, e.sock, e.token) }
}

// serveOnce accepts one connection on network's loopback address and
// answers what it read, until the client's half close, reversed.
func serveOnce(t *testing.T, network, addr string) int {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c)
		for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
			got[i], got[j] = got[j], got[i]
		}
		_, _ = c.Write(got)
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestDialPort: a port of the agent's network namespace is reached
// through the agent, in either address family, with the half close
// passed on and megabytes whole both ways.
func TestDialPort(t *testing.T) {
	e := startAgentWith(t, Config{Token: []byte("0123456789abcdef0123456789abcdef")})
	big := make([]byte, 8<<20)
	_, _ = rand.Read(big)
	for _, c := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(c.network, func(t *testing.T) {
			port := serveOnce(t, c.network, c.addr)
			conn, err := DialPort(context.Background(), e.dialer(), port)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			go func() {
				_, _ = conn.Write(big)
				_ = conn.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err := io.ReadAll(conn)
			if err != nil || len(got) != len(big) {
				t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(big))
			}
			for i := range got {
				if got[i] != big[len(big)-1-i] {
					t.Fatalf("byte %d differs", i)
				}
			}
		})
	}
}

// TestDialPortClosed: nothing listening is ErrPortClosed, at once; a
// port out of range is refused by the client and by the agent.
func TestDialPortClosed(t *testing.T) {
	e := startAgent(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conn, err := DialPort(context.Background(), e.dialer(), port)
	if !errors.Is(err, sandbox.ErrPortClosed) || !strings.Contains(err.Error(), "nothing listens on port") {
		t.Fatalf("got %v, %v; want ErrPortClosed", conn, err)
	}
	if _, err := DialPort(context.Background(), e.dialer(), 70000); err == nil {
		t.Error("the client sent port 70000")
	}
	c, r, err := Files{Dial: e.dialer()}.op(context.Background(), wireRequest{Op: opDial, Port: 70000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := answer(context.Background(), opDial, r, func([]byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "not between 1 and 65535") {
		t.Errorf("the agent answered port 70000 with %v", err)
	}
}

// TestDialPortEndsWithAgent: the agent's end ends its connections to
// ports.
func TestDialPortEndsWithAgent(t *testing.T) {
	e, cancel, done := bareAgent(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = c.Write([]byte("hi"))
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	conn, err := DialPort(context.Background(), e.dialer(), ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil || !bytes.Equal(buf, []byte("hi")) {
		t.Fatalf("read %q, %v", buf, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
		t.Errorf("the connection outlives the agent: read %d, %v", n, err)
	}
}

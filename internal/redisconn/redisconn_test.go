package redisconn_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
)

// servers are the two Redis the engine can run against; every behaviour
// the engine relies on is checked on both.
var servers = []struct {
	name string
	addr func(testing.TB) string
}{
	{"redis-server", func(t testing.TB) string { return redistest.Server(t) }},
	{"embedded", redistest.Embedded},
}

func TestSetGet(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			client, err := redisconn.Connect(ctx, s.addr(t), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			if err := client.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := client.Get(ctx, "greeting").Result()
			if err != nil || got != "hello" {
				t.Errorf("GET greeting = %q, %v; want %q, nil", got, err, "hello")
			}
		})
	}
}

// TestTTLExpires sets a key with a short TTL and polls until it is gone.
// Nobody moves the embedded server's clock: only real time passes.
func TestTTLExpires(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			client, err := redisconn.Connect(ctx, s.addr(t), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()

			set := time.Now()
			if err := client.Set(ctx, "lease", "worker-1", ttl).Err(); err != nil {
				t.Fatal(err)
			}
			if got, err := client.Get(ctx, "lease").Result(); err != nil || got != "worker-1" {
				t.Fatalf("GET lease right after SET = %q, %v; want %q, nil", got, err, "worker-1")
			}
			// The TTL a client reads must shrink with time, too.
			time.Sleep(100 * time.Millisecond)
			if left, err := client.PTTL(ctx, "lease").Result(); err != nil || left <= 0 || left >= ttl {
				t.Errorf("PTTL after 100ms = %v, %v; want between 0 and %v", left, err, ttl)
			}

			deadline := time.Now().Add(5 * time.Second)
			for {
				err := client.Get(ctx, "lease").Err()
				if errors.Is(err, redis.Nil) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("key with a %v TTL still there after %v", ttl, time.Since(set))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if gone := time.Since(set); gone < ttl {
				t.Errorf("key expired after %v, before its %v TTL", gone, ttl)
			}
			if n, err := client.Exists(ctx, "lease").Result(); err != nil || n != 0 {
				t.Errorf("EXISTS lease after expiry = %d, %v; want 0, nil", n, err)
			}
		})
	}
}

func TestConnectUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, err := redisconn.Connect(ctx, addr, "hunter2", 3)
	if err == nil {
		client.Close()
		t.Fatal("Connect to a closed port: got nil error, want one")
	}
	want := "cannot reach Redis at " + addr + " (db 3)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestConnectPassword(t *testing.T) {
	addr := redistest.Server(t, "--requirepass", "s3cret")
	ctx := context.Background()
	tests := []struct {
		name     string
		password string
		ok       bool
	}{
		{"right", "s3cret", true},
		{"wrong", "not-the-password", false},
		{"none", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := redisconn.Connect(ctx, addr, tt.password, 0)
			if client != nil {
				defer client.Close()
			}
			if got := err == nil; got != tt.ok {
				t.Fatalf("Connect with password %q: error %v, want success %v", tt.password, err, tt.ok)
			}
			if err != nil && (!strings.Contains(err.Error(), "cannot reach Redis") || strings.Contains(err.Error(), "not-the-password")) {
				t.Errorf("error = %q, want a reachability error without the password", err)
			}
		})
	}
}

func TestEmbeddedCloseTwice(t *testing.T) {
	e, err := redisconn.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if client, err := redisconn.Connect(ctx, e.Addr(), "", 0); err == nil {
		client.Close()
		t.Error("Connect after Close: got nil error, want one")
	}
}

// The embedded Redis answers nothing before AUTH with its own password
// (T1): a local process that reaches its port gets NOAUTH, the engine,
// which has the password, gets answers.
func TestEmbeddedNeedsPassword(t *testing.T) {
	e, err := redisconn.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if client, err := redisconn.Connect(ctx, e.Addr(), "", 0); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		if client != nil {
			client.Close()
		}
		t.Errorf("Connect without the password: %v, want NOAUTH", err)
	}
	if len(e.Password()) < 32 {
		t.Errorf("password of %d characters, want a long random one", len(e.Password()))
	}
	client, err := redisconn.Connect(ctx, e.Addr(), e.Password(), 0)
	if err != nil {
		t.Fatalf("Connect with the password: %v", err)
	}
	defer client.Close()
	if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Error(err)
	}
}

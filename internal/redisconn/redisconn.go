// Package redisconn connects Flowbox to Redis, which carries the Asynq task
// queues: a real Redis in production, or an in-process miniredis for a
// zero-setup run.
//
// It is connection plumbing only. It must never know task types, queues or
// keys (workers does), and it must never log or return the password.
package redisconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Connect opens a client for the Redis at addr and checks with a PING that
// it answers and accepts the password. ctx bounds the PING.
func Connect(ctx context.Context, addr, password string, db int) (*redis.Client, error) {
	client := redis.NewClient(&redis.Options{Addr: addr, Password: password, DB: db})
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		msg := err.Error()
		if password != "" {
			msg = strings.ReplaceAll(msg, password, "xxxxx")
		}
		// The driver's error is flattened to text: it may quote the
		// password, and nothing checks it with errors.Is.
		return nil, fmt.Errorf("cannot reach Redis at %s (db %d): %s; check FLOWBOX_REDIS_ADDR and FLOWBOX_REDIS_PASSWORD, or leave FLOWBOX_REDIS_ADDR empty for the embedded Redis",
			addr, db, msg)
	}
	return client, nil
}

// Embedded is a miniredis listening on a random loopback port. Unlike a
// plain miniredis, keys with a TTL expire as wall-clock time passes, as
// they do in Redis: Asynq's leases and locks depend on it.
//
// It answers nothing before AUTH with a password made at start and known
// only to this process: any local process (a sandbox sharing the host's
// loopback, another user's program) can reach a loopback port, and
// without the password all it gets is NOAUTH.
type Embedded struct {
	m        *miniredis.Miniredis
	addr     string
	password string
}

// StartEmbedded starts the embedded Redis on 127.0.0.1 with a random port
// and a random password (Password).
func StartEmbedded() (*Embedded, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("start embedded Redis: make its password: %w", err)
	}
	password := hex.EncodeToString(secret[:])
	m := NewMiniredis()
	m.RequireAuth(password)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	return &Embedded{m: m, addr: m.Addr(), password: password}, nil
}

// NewMiniredis returns a miniredis, not started, whose keys with a TTL
// expire with the wall clock as the embedded Redis's do.
func NewMiniredis() *miniredis.Miniredis {
	m := miniredis.NewMiniRedis()
	// ClockTTL makes every command first age all TTLs by the time elapsed
	// since the previous one, so expiry follows the wall clock without a
	// goroutine calling FastForward. Expired keys are removed at the next
	// command, which is also when Redis would be asked about them.
	m.ClockTTL(true)
	return m
}

// Addr is the host:port the embedded Redis listens on (or did, once
// closed).
func (e *Embedded) Addr() string { return e.addr }

// Password is what a client sends with AUTH (redis.Options.Password).
// It must never be logged.
func (e *Embedded) Password() string { return e.password }

// Close stops the server and closes its connections. It may be called more
// than once.
func (e *Embedded) Close() { e.m.Close() }

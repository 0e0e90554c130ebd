package chat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/sandbox"
)

// TestStopsWithoutRedis: with Redis down, a stop still ends a run of the
// process that answers it, and says so; another chat's run goes on.
func TestStopsWithoutRedis(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	s := &Stops{Redis: rdb, Lease: time.Minute}
	chat := sandbox.Scope{AppID: "a", UserID: "u:alice", ChatID: "c1"}
	other := sandbox.Scope{AppID: "a", UserID: "u:bob", ChatID: "c1"}

	ctx, done := s.Track(t.Context(), chat)
	defer done()
	otherCtx, otherDone := s.Track(t.Context(), other)
	defer otherDone()

	stopped, err := s.Stop(t.Context(), chat)
	if !stopped || err != nil {
		t.Fatalf("Stop = %v, %v; want true, nil", stopped, err)
	}
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), ErrStopped) {
			t.Errorf("cause %v, want ErrStopped", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stopped run's context was not cancelled")
	}
	if otherCtx.Err() != nil {
		t.Error("stopping alice's chat cancelled bob's chat of the same id")
	}
	done()
	if stopped, _ := s.Stop(t.Context(), chat); stopped {
		t.Error("Stop after the run ended: true, want false")
	}
}

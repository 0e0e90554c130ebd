package mongostore

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestRunningUsers: the users of the running records of one provider, one
// entry per record, whether they are read from the records or through the
// activity index (FerretDB's way), including after Redis lost the index.
func TestRunningUsers(t *testing.T) {
	tests := []struct {
		name  string
		store func(t *testing.T) (*Store, *redis.Client)
		lose  bool
	}{
		{"records", func(t *testing.T) (*Store, *redis.Client) { s, _ := newStore(t); return s, nil }, false},
		{"activity index", func(t *testing.T) (*Store, *redis.Client) {
			s, _, rdb := newStoreWithActivity(t, redistest.Embedded(t))
			return s, rdb
		}, false},
		{"activity index lost", func(t *testing.T) (*Store, *redis.Client) {
			s, _, rdb := newStoreWithActivity(t, redistest.Embedded(t))
			return s, rdb
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb := tc.store(t)
			ctx := context.Background()
			n := 0
			put := func(provider, user string, status sandbox.Status) {
				t.Helper()
				n++
				inst := instance(fmt.Sprintf("%016x", n), fmt.Sprintf("chat%d", n))
				inst.Provider, inst.UserID = provider, user
				if err := s.Touch(ctx, inst, t0); err != nil {
					t.Fatal(err)
				}
				if status != sandbox.StatusRunning {
					if err := s.SetStatus(ctx, provider, inst.SandboxID, status); err != nil {
						t.Fatal(err)
					}
				}
			}
			put("bwrap", "u:alice", sandbox.StatusRunning)
			put("bwrap", "u:alice", sandbox.StatusRunning)
			put("bwrap", "u:alice", sandbox.StatusStopped)
			put("docker", "u:alice", sandbox.StatusRunning)
			put("bwrap", "share:L:v1", sandbox.StatusRunning)
			put("bwrap", "share:L:v2", sandbox.StatusDeleting)
			put("bwrap", "u:bob", sandbox.StatusRunning)
			if err := s.Delete(ctx, "bwrap", fmt.Sprintf("%016x", n)); err != nil {
				t.Fatal(err)
			}
			if tc.lose {
				if err := rdb.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.RunningUsers(ctx, "bwrap")
			slices.Sort(got)
			want := []string{"share:L:v1", "u:alice", "u:alice"}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("RunningUsers(bwrap) = %q, %v; want %q", got, err, want)
			}
		})
	}
}

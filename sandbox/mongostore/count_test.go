package mongostore

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
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
			got, err := s.RunningUsers(ctx, "bwrap", true)
			slices.Sort(got)
			want := []string{"share:L:v1", "u:alice", "u:alice"}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("RunningUsers(bwrap) = %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestRunningUsersFromIndex: with the activity index, the caps' cheap
// count reads no record for the entries whose user the index keeps; the
// exact count drops what the cheap one may count, a sandbox stopped whose
// entry stayed; an entry without its user is read from its record either
// way.
func TestRunningUsersFromIndex(t *testing.T) {
	counted, _, finds := countingFinds(t)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Embedded(t)})
	t.Cleanup(func() { rdb.Close() })
	idx := activity.New(rdb, counted.Name())
	s, err := New(ctx, counted, quiet, WithActivity(idx))
	if err != nil {
		t.Fatal(err)
	}
	// As an engine does once: the index is filled from the records (none
	// yet), so the users below are what Touch recorded.
	if _, err := s.FillActivity(ctx, "docker"); err != nil {
		t.Fatal(err)
	}
	var insts []sandbox.Instance
	for i, user := range []string{"u:alice", "u:alice", "u:bob", "u:carol"} {
		inst := instance(fmt.Sprintf("%016x", i+1), fmt.Sprintf("chat%d", i))
		inst.UserID = user
		if err := s.Touch(ctx, inst, t0); err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
	}
	count := func(exact bool, want []string, wantFinds int64) {
		t.Helper()
		finds.Store(0)
		got, err := s.RunningUsers(ctx, insts[0].Provider, exact)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("RunningUsers(exact %v) = %q, %v; want %q", exact, got, err, want)
		}
		if n := finds.Load(); n != wantFinds {
			t.Errorf("RunningUsers(exact %v) sent %d finds, want %d", exact, n, wantFinds)
		}
	}
	count(false, []string{"u:alice", "u:alice", "u:bob", "u:carol"}, 0)
	count(true, []string{"u:alice", "u:alice", "u:bob", "u:carol"}, 4)

	// Carol's sandbox stopped, and the removal of its entry was lost.
	carol := insts[3]
	if err := s.SetStatus(ctx, carol.Provider, carol.SandboxID, sandbox.StatusStopped); err != nil {
		t.Fatal(err)
	}
	if err := idx.Started(ctx, carol.Provider, activity.Entry{SandboxID: carol.SandboxID, LastActiveAt: t0, UserID: carol.UserID}); err != nil {
		t.Fatal(err)
	}
	count(false, []string{"u:alice", "u:alice", "u:bob", "u:carol"}, 0)
	count(true, []string{"u:alice", "u:alice", "u:bob"}, 4)

	// The index lost Bob's user (an entry written before users were kept).
	if err := rdb.HDel(ctx, "flowbox:sandbox:activity:"+counted.Name()+":"+insts[2].Provider+":users", insts[2].SandboxID).Err(); err != nil {
		t.Fatal(err)
	}
	count(false, []string{"u:alice", "u:alice", "u:bob", "u:carol"}, 1)
}

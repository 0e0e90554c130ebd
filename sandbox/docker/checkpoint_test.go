package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// TestSweepCheckpoints (R4): the sweep removes the pool's files that no
// sandbox owns once they are older than the grace, and the directory of
// a fork that never became whole; it keeps a running sandbox's, a
// fork's that has no container yet, and young ones.
func TestSweepCheckpoints(t *testing.T) {
	t.Parallel()
	cfg := pathConfig(t, true)
	cfg.CheckpointPool = checkpointtest.Pool(t)
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	kept := e.started(t, sandbox.Spec{})
	t.Cleanup(func() { _ = e.p.Delete(context.Background(), kept) })
	if res := e.run(t, kept, "echo mine > f", time.Minute); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	if _, err := e.p.Checkpoint(ctx, kept, "c1"); err != nil {
		t.Fatal(err)
	}
	fork := sandboxtest.NewID(t)
	if err := e.p.ForkCheckpoint(ctx, kept, "c1", fork); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.p.Delete(context.Background(), fork) })
	// What a killed engine left: another handle on the same pool.
	other, err := checkpoint.Open(cfg.CheckpointPool)
	if err != nil {
		t.Fatal(err)
	}
	orphan, young, leftover := sandboxtest.NewID(t), sandboxtest.NewID(t), sandboxtest.NewID(t)
	for _, id := range []string{orphan, young} {
		if err := other.Create(id, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Checkpoint(id, "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(e.root, leftover), 0o755); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	for _, path := range []string{other.Dir(orphan), filepath.Join(cfg.CheckpointPool, "checkpoints", orphan), filepath.Join(e.root, leftover),
		other.Dir(kept), other.Dir(fork), filepath.Join(e.root, fork)} {
		if err := os.Chtimes(path, long, long); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.p.SweepCheckpoints(ctx, time.Now().Add(-10*time.Minute))
	if err != nil || n != 2 {
		t.Errorf("SweepCheckpoints = %d, %v; want the orphan and the leftover", n, err)
	}
	ids, _ := other.Sandboxes()
	if !slices.Equal(ids, slices.Sorted(slices.Values([]string{kept, fork, young}))) {
		t.Errorf("the pool holds %v, want %s (a running sandbox's), %s (a fork's) and %s (younger than the grace)", ids, kept, fork, young)
	}
	if _, err := os.Stat(filepath.Join(e.root, leftover)); !os.IsNotExist(err) {
		t.Errorf("the unfinished fork's directory: %v", err)
	}
	if res := e.run(t, kept, "cat f", time.Minute); res.Stdout != "mine\n" {
		t.Errorf("the sandbox after the sweep: %+v", res)
	}
	if err := e.p.Ensure(ctx, sandbox.Spec{ID: fork}); err != nil {
		t.Fatal(err)
	}
	if res := e.run(t, fork, "cat f", time.Minute); res.Stdout != "mine\n" {
		t.Errorf("the fork after the sweep: %+v", res)
	}
}

// Package checkpointtest gives tests a checkpoint pool's directory: a
// btrfs image of the test's own, loop-mounted, unmounted at its end. It
// needs root and btrfs-progs; a test without them skips, or fails when
// FLOWBOX_TEST_REQUIRE names btrfs.
package checkpointtest

import (
	"path/filepath"
	"testing"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// Pool returns the directory of a new pool of 4 GiB (sparse).
func Pool(t testing.TB) string { return PoolOf(t, 4<<30) }

// PoolOf is Pool on an image of size bytes.
func PoolOf(t testing.TB, size int64) string {
	t.Helper()
	testenv.Need(t, "btrfs", checkpoint.Usable())
	dir := t.TempDir()
	mnt := filepath.Join(dir, "pool")
	if err := checkpoint.MountImage(filepath.Join(dir, "pool.img"), mnt, size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := diskimage.Unmount(mnt); err != nil {
			t.Errorf("unmount the checkpoint pool: %v", err)
		}
	})
	return filepath.Join(mnt, "sandboxes")
}

package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// newPool opens a pool on a btrfs image of its own, unmounted at the
// end of the test.
func newPool(t testing.TB) *Pool { return newPoolOf(t, 2<<30) }

// newPoolOf is newPool on an image of size bytes.
func newPoolOf(t testing.TB, size int64) *Pool {
	t.Helper()
	testenv.Need(t, "btrfs", Usable())
	dir := t.TempDir()
	mnt := filepath.Join(dir, "pool")
	if err := MountImage(filepath.Join(dir, "pool.img"), mnt, size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := diskimage.Unmount(mnt); err != nil {
			t.Error(err)
		}
	})
	p, err := Open(filepath.Join(mnt, "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// manifest is every entry under dir: its path, type and mode, and its
// content's hash (a file) or target (a link).
func manifest(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:8])
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			line += " -> " + target
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestRestore: three turns create, change and delete files, a link, a
// mode and the shell's state; restoring each turn's checkpoint brings
// back its files exactly, and the later checkpoints stay for a redo.
func TestRestore(t *testing.T) {
	p := newPool(t)
	const id = "0123456789abcdef"
	if err := p.Create(id, 0); err != nil {
		t.Fatal(err)
	}
	ws := p.Dir(id)
	var want []([]string)
	turn := func(name string, change func()) {
		change()
		if _, err := p.Checkpoint(id, name); err != nil {
			t.Fatal(err)
		}
		want = append(want, manifest(t, ws))
	}
	turn("t0", func() {})
	turn("t1", func() {
		write(t, filepath.Join(ws, "workspace/a.txt"), "one", 0o644)
		write(t, filepath.Join(ws, "workspace/bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
		write(t, filepath.Join(ws, "state/cwd"), "/workspace\n", 0o600)
		if err := os.Symlink("a.txt", filepath.Join(ws, "workspace/link")); err != nil {
			t.Fatal(err)
		}
	})
	turn("t2", func() {
		write(t, filepath.Join(ws, "workspace/a.txt"), "two", 0o600)
		write(t, filepath.Join(ws, "workspace/deep/x/y.bin"), strings.Repeat("y", 1<<20), 0o644)
		write(t, filepath.Join(ws, "state/cwd"), "/tmp\n", 0o600)
	})
	turn("t3", func() {
		if err := os.RemoveAll(filepath.Join(ws, "workspace/bin")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(ws, "workspace/link")); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(ws, "state/cwd"), "/workspace/deep\n", 0o600)
	})
	// Work after the last checkpoint, which a rewind discards.
	write(t, filepath.Join(ws, "workspace/later"), "discarded", 0o644)

	for _, step := range []int{2, 1, 0, 3, 1} {
		name := fmt.Sprintf("t%d", step)
		if err := p.Restore(id, name); err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, ws); !slices.Equal(got, want[step]) {
			t.Errorf("after restoring %s:\n got %q\nwant %q", name, got, want[step])
		}
	}
	if err := p.Reset(id); err != nil {
		t.Fatal(err)
	}
	if got := manifest(t, ws); !slices.Equal(got, []string{". drwxr-xr-x"}) {
		t.Errorf("after a reset: %q, want nothing", got)
	}
	list, err := p.Checkpoints(id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"t0", "t1", "t2", "t3"}) {
		t.Errorf("checkpoints %v, want t0…t3 oldest first", names)
	}
	// A checkpoint is read-only: the sandbox cannot change its past.
	if err := os.WriteFile(filepath.Join(p.checkpoint(id, "t1"), "workspace/a.txt"), []byte("x"), 0o644); err == nil {
		t.Error("a checkpoint's file was written")
	}
}

// TestFork: a fork starts from the checkpoint; the fork and the
// original then change apart.
func TestFork(t *testing.T) {
	p := newPool(t)
	const src, dst = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	if err := p.Create(src, 0); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(p.Dir(src), "workspace/f"), "at the fork", 0o644)
	if _, err := p.Checkpoint(src, "c1"); err != nil {
		t.Fatal(err)
	}
	at := manifest(t, p.Dir(src))
	write(t, filepath.Join(p.Dir(src), "workspace/f"), "original goes on", 0o644)
	if err := p.Fork(src, "c1", dst, 0); err != nil {
		t.Fatal(err)
	}
	if got := manifest(t, p.Dir(dst)); !slices.Equal(got, at) {
		t.Errorf("the fork has %q, want the checkpoint's %q", got, at)
	}
	write(t, filepath.Join(p.Dir(dst), "workspace/g"), "the fork's own", 0o644)
	if b, _ := os.ReadFile(filepath.Join(p.Dir(src), "workspace/f")); string(b) != "original goes on" {
		t.Errorf("the original's file holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(p.Dir(src), "workspace/g")); err == nil {
		t.Error("the fork's new file is in the original")
	}
	if err := p.Fork(src, "c1", dst, 0); !errors.Is(err, ErrExists) {
		t.Errorf("a fork onto an existing sandbox: %v, want ErrExists", err)
	}
	if err := p.Fork(src, "nope", "cccccccccccccccc", 0); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("a fork of a missing checkpoint: %v, want ErrNoCheckpoint", err)
	}
	if cps, _ := p.Checkpoints(dst); len(cps) != 0 {
		t.Errorf("the fork has checkpoints %v of its own from the start", cps)
	}
}

// TestDelete: deleting a sandbox leaves nothing of it in the pool, and
// the pool's other sandboxes as they were.
func TestDelete(t *testing.T) {
	p := newPool(t)
	const a, b = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	for _, id := range []string{a, b} {
		if err := p.Create(id, 0); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(p.Dir(id), "workspace/f"), id, 0o644)
		for _, n := range []string{"c1", "c2"} {
			if _, err := p.Checkpoint(id, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Drop(b, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(a); err != nil {
		t.Fatal(err)
	}
	if ids, _ := p.Sandboxes(); !slices.Equal(ids, []string{b}) {
		t.Errorf("sandboxes after the delete: %v, want only %s", ids, b)
	}
	if cps, _ := p.Checkpoints(b); len(cps) != 1 || cps[0].Name != "c2" {
		t.Errorf("the other sandbox's checkpoints: %v, want c2", cps)
	}
	for _, d := range []string{p.trashDir(), p.liveDir()} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() != b {
				t.Errorf("%s holds %s after the delete", d, e.Name())
			}
		}
	}
	if err := p.Delete(a); err != nil {
		t.Errorf("deleting again: %v", err)
	}
	if err := p.Restore(a, "c1"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("restoring a deleted sandbox: %v, want ErrNoCheckpoint", err)
	}
}

// TestRecover: an engine that stopped between a restore's steps left a
// copy in live/ and a subvolume in the trash; opening the pool again
// deletes both and keeps the sandbox's files whole.
func TestRecover(t *testing.T) {
	p := newPool(t)
	const id = "aaaaaaaaaaaaaaaa"
	if err := p.Create(id, 0); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(p.Dir(id), "workspace/f"), "kept", 0o644)
	if _, err := p.Checkpoint(id, "c1"); err != nil {
		t.Fatal(err)
	}
	// The steps of an interrupted restore: a copy made, one trashed.
	if err := snapshot(p.checkpoint(id, "c1"), temp(p.liveDir(), id), false, 0); err != nil {
		t.Fatal(err)
	}
	if err := snapshot(p.checkpoint(id, "c1"), temp(p.trashDir(), "gone"), false, 0); err != nil {
		t.Fatal(err)
	}
	before := manifest(t, p.Dir(id))
	p2, err := Open(p.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{p2.liveDir(), p2.trashDir()} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || d == p2.trashDir() {
				t.Errorf("%s still holds %s", d, e.Name())
			}
		}
	}
	if got := manifest(t, p2.Dir(id)); !slices.Equal(got, before) {
		t.Errorf("the sandbox's files changed: %q, want %q", got, before)
	}
}

// TestRefused: bad names and ids, a missing sandbox, and a directory
// that is not on btrfs are refused with a reason.
func TestRefused(t *testing.T) {
	p := newPool(t)
	const id = "aaaaaaaaaaaaaaaa"
	if _, err := p.Checkpoint(id, "c1"); !errors.Is(err, ErrNotInPool) {
		t.Errorf("checkpoint of a sandbox not in the pool: %v", err)
	}
	if err := p.Create("../etc", 0); err == nil {
		t.Error("a sandbox id with a path was accepted")
	}
	if err := p.Create(id, 0); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "../x", ".hidden", "a/b", strings.Repeat("n", 65)} {
		if _, err := p.Checkpoint(id, name); err == nil {
			t.Errorf("checkpoint name %q accepted", name)
		}
	}
	if _, err := p.Checkpoint(id, "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Checkpoint(id, "c1"); !errors.Is(err, ErrExists) {
		t.Errorf("a second checkpoint c1: %v, want ErrExists", err)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotBtrfs) {
		t.Errorf("a pool on %s: %v, want ErrNotBtrfs", os.TempDir(), err)
	}
}

// TestQuota: a sandbox's limit holds its files and its checkpoints
// together: blocks a checkpoint keeps count until it is dropped; a fork
// is charged only for what it writes.
func TestQuota(t *testing.T) {
	p := newPool(t)
	const id, fork = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	if err := p.Create(id, 64<<20); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(p.Dir(id), "big")
	fill := func(path string, mib int) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		block := make([]byte, 1<<20)
		for i := 0; i < mib; i++ {
			block[0] = byte(i)
			if _, err := f.Write(block); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := fill(big, 40); err != nil {
		t.Fatalf("40 MiB under a 64 MiB limit: %v", err)
	}
	settled(t, p)
	if u := p.Usage(id); u < 40<<20 || u > 48<<20 {
		t.Errorf("usage %d bytes after 40 MiB written, want about 40 MiB", u)
	}
	if _, err := p.Checkpoint(id, "c1"); err != nil {
		t.Fatal(err)
	}
	// The checkpoint keeps the first 40 MiB: 40 more do not fit.
	os.Remove(big)
	err := fill(filepath.Join(p.Dir(id), "again"), 40)
	if !errors.Is(err, unix.EDQUOT) {
		t.Errorf("40 MiB more beside a checkpoint of 40 under 64: %v, want EDQUOT", err)
	}
	os.Remove(filepath.Join(p.Dir(id), "again"))
	if err := p.Drop(id, "c1"); err != nil {
		t.Fatal(err)
	}
	settled(t, p)
	// The cleaner frees the dropped checkpoint's blocks in the
	// background.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		settled(t, p)
		if err = fill(filepath.Join(p.Dir(id), "again"), 40); err == nil || time.Now().After(deadline) {
			break
		}
		os.Remove(filepath.Join(p.Dir(id), "again"))
	}
	if err != nil {
		t.Errorf("40 MiB after the checkpoint was dropped: %v", err)
	}
	// A fork shares the checkpoint's blocks without being charged.
	if _, err := p.Checkpoint(id, "c2"); err != nil {
		t.Fatal(err)
	}
	if err := p.Fork(id, "c2", fork, 16<<20); err != nil {
		t.Fatal(err)
	}
	settled(t, p)
	if u := p.Usage(fork); u < 0 || u > 4<<20 {
		t.Errorf("a fresh fork's usage: %d bytes, want next to none", u)
	}
	if err := fill(filepath.Join(p.Dir(fork), "own"), 20); !errors.Is(err, unix.EDQUOT) {
		t.Errorf("20 MiB in a fork limited to 16: %v, want EDQUOT", err)
	}
}

// settled writes the pool's filesystem out, which brings its quota
// groups' counts up to date.
func settled(t testing.TB, p *Pool) {
	t.Helper()
	fd, err := unix.Open(p.Root(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		t.Fatal(err)
	}
}

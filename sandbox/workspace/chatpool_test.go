//go:build linux

package workspace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
)

// Warm pool members of the pooled tests. Their first 12 hex digits
// differ: they name the members' quota groups in the pool.
const memberA, memberB, memberC = "a00000000000000a", "b00000000000000b", "c00000000000000c"

// newPooledStore is a Store whose chats' files are kept in a checkpoint
// pool on a btrfs image of the test's own, with that pool; a skip where
// btrfs cannot be mounted (a failure when FLOWBOX_TEST_REQUIRE names
// btrfs).
func newPooledStore(t *testing.T, cfg Config) (*Store, *checkpoint.Pool) {
	t.Helper()
	pool, err := checkpoint.OpenChats(filepath.Join(checkpointtest.Pool(t), "chats"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pool = pool
	s := newStore(t, cfg)
	// The owner.json syncs still pending finish before the pool's
	// filesystem is unmounted, which they would keep busy.
	t.Cleanup(func() {
		s.ownerSyncs.Range(func(id, o any) bool {
			s.runOwnerSync(id.(string), o.(*ownerSync))
			return true
		})
	})
	return s, pool
}

// save uploads a file of content into the chat's uploads.
func save(t *testing.T, s *Store, scope sandbox.Scope, name, content string) {
	t.Helper()
	if _, err := s.Save(context.Background(), scope, "", name, strings.NewReader(content)); err != nil {
		t.Fatalf("Save %s: %v", name, err)
	}
}

// put writes a file straight into the chat's area, as its sandbox does.
func put(t *testing.T, s *Store, scope sandbox.Scope, area Area, rel, content string) {
	t.Helper()
	p := filepath.Join(areaDir(s, scope, area), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// files is every entry under the chat's uploads and intermediate
// directories, by path from the chat's directory: a file's content, or
// "<dir>".
func files(t *testing.T, s *Store, scope sandbox.Scope) map[string]string {
	t.Helper()
	out := map[string]string{}
	chat := s.chatDir(scope.SandboxID())
	for _, a := range []Area{Uploads, Intermediate} {
		err := filepath.WalkDir(filepath.Join(chat, string(a)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(chat, p)
			if d.IsDir() {
				out[rel] = "<dir>"
				return nil
			}
			b, err := os.ReadFile(p)
			out[rel] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sameFiles(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: the chat's files are %v; want %v", what, got, want)
	}
}

// checkpointNames lists the names of the chat's checkpoints, oldest
// first.
func checkpointNames(t *testing.T, s *Store, scope sandbox.Scope) []string {
	t.Helper()
	list, err := s.Checkpoints(context.Background(), scope)
	if err != nil {
		t.Fatalf("Checkpoints: %v", err)
	}
	var names []string
	for _, c := range list {
		names = append(names, c.Name)
	}
	return names
}

// linksTo fails unless the path is a link to target.
func linksTo(t *testing.T, path, target string) {
	t.Helper()
	if got, err := os.Readlink(path); err != nil || got != target {
		t.Errorf("%s leads to %q (%v); want a link to %s", path, got, err, target)
	}
}

// gone fails unless nothing is at path, not even a link.
func gone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v; want it gone", path, err)
	}
}

// owners is Dirs by sandbox ID, each owner known.
func owners(t *testing.T, s *Store) map[string]sandbox.Scope {
	t.Helper()
	dirs, err := s.Dirs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sandbox.Scope{}
	for _, o := range dirs {
		if !o.Known() {
			t.Errorf("Dirs lists %s without its owner", o.SandboxID)
		}
		out[o.SandboxID] = o.Scope()
	}
	return out
}

// TestPooledCheckpointRestore: a chat's files are a link into the pool;
// a checkpoint keeps its uploads and intermediate files as they were, a
// restore brings back exactly those (and a later one again, a redo); a
// restore to a name the files have no checkpoint of empties them but
// keeps the chat's owner, and the chat goes on taking uploads.
func TestPooledCheckpointRestore(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{})
	sid := scopeA.SandboxID()
	save(t, s, scopeA, "data.csv", "a,b\n1,2\n")
	put(t, s, scopeA, Intermediate, "out/result.txt", "first")
	linksTo(t, s.chatDir(sid), pool.Dir(sid))
	t1 := files(t, s, scopeA)
	if cp, err := s.Checkpoint(ctx, scopeA, "t1"); err != nil || cp.Name != "t1" {
		t.Fatalf("Checkpoint t1 = %+v, %v", cp, err)
	}

	if err := s.Delete(ctx, scopeA, Uploads, "data.csv"); err != nil {
		t.Fatal(err)
	}
	save(t, s, scopeA, "other.txt", "other")
	put(t, s, scopeA, Intermediate, "out/result.txt", "second")
	put(t, s, scopeA, Intermediate, "new.txt", "new")
	t2 := files(t, s, scopeA)
	if _, err := s.Checkpoint(ctx, scopeA, "t2"); err != nil {
		t.Fatal(err)
	}
	if got := checkpointNames(t, s, scopeA); !slices.Equal(got, []string{"t1", "t2"}) {
		t.Errorf("Checkpoints = %v; want [t1 t2]", got)
	}

	if err := s.RestoreCheckpoint(ctx, scopeA, "t1"); err != nil {
		t.Fatalf("RestoreCheckpoint t1: %v", err)
	}
	sameFiles(t, "restored to t1", files(t, s, scopeA), t1)
	if err := s.RestoreCheckpoint(ctx, scopeA, "t2"); err != nil {
		t.Fatalf("RestoreCheckpoint t2: %v", err)
	}
	sameFiles(t, "restored to t2 (a redo)", files(t, s, scopeA), t2)
	if err := s.DropCheckpoint(ctx, scopeA, "t2"); err != nil {
		t.Fatal(err)
	}
	if got := checkpointNames(t, s, scopeA); !slices.Equal(got, []string{"t1"}) {
		t.Errorf("Checkpoints after t2 was dropped = %v; want [t1]", got)
	}

	// A turn before the chat had files: the files go, the owner (with
	// its first createdAt) and the checkpoints stay.
	s.now = func() time.Time { return fixedNow.Add(time.Hour) }
	if err := s.RestoreCheckpoint(ctx, scopeA, "t0"); err != nil {
		t.Fatalf("RestoreCheckpoint to a name without a checkpoint: %v", err)
	}
	sameFiles(t, "restored to a name without a checkpoint", files(t, s, scopeA), map[string]string{"uploads": "<dir>", "intermediate": "<dir>"})
	dirs, err := s.Dirs(ctx)
	if err != nil || len(dirs) != 1 || dirs[0].Scope() != scopeA || !dirs[0].CreatedAt.Equal(fixedNow) {
		t.Errorf("Dirs after the files were emptied = %+v, %v; want the chat owned by %+v since %v", dirs, err, scopeA, fixedNow)
	}
	if got := checkpointNames(t, s, scopeA); !slices.Equal(got, []string{"t1"}) {
		t.Errorf("Checkpoints after the files were emptied = %v; want [t1]", got)
	}
	save(t, s, scopeA, "after.txt", "after")
	sameFiles(t, "an upload after the files were emptied", files(t, s, scopeA), map[string]string{"uploads": "<dir>", "uploads/after.txt": "after", "intermediate": "<dir>"})
	noLeftovers(t, s, scopeA)
	linksTo(t, s.chatDir(sid), pool.Dir(sid))
}

// TestPooledFork: a fork gives another chat a copy of a checkpoint's
// files, owned by that chat, without the uploads that were arriving and
// without checkpoints; the two chats' files go their own ways after. A
// fork onto a chat that has files, or of a checkpoint that does not
// exist, fails and leaves nothing.
func TestPooledFork(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{})
	save(t, s, scopeA, "data.csv", "1,2\n")
	put(t, s, scopeA, Intermediate, "plot.py", "print(1)")
	arriving := filepath.Join(s.chatDir(scopeA.SandboxID()), stagingDir, "upload.part")
	if err := os.WriteFile(arriving, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	t1 := files(t, s, scopeA)
	if _, err := s.Checkpoint(ctx, scopeA, "t1"); err != nil {
		t.Fatal(err)
	}
	save(t, s, scopeA, "later.csv", "3,4\n") // after the checkpoint: not forked
	if err := os.Remove(arriving); err != nil {
		t.Fatal(err)
	}

	if err := s.ForkCheckpoint(ctx, scopeA, "t1", scopeB); err != nil {
		t.Fatalf("ForkCheckpoint: %v", err)
	}
	linksTo(t, s.chatDir(scopeB.SandboxID()), pool.Dir(scopeB.SandboxID()))
	sameFiles(t, "the fork", files(t, s, scopeB), t1)
	noLeftovers(t, s, scopeB)
	if got := owners(t, s); len(got) != 2 || got[scopeA.SandboxID()] != scopeA || got[scopeB.SandboxID()] != scopeB {
		t.Errorf("Dirs after the fork = %v; want each chat owned by its scope", got)
	}
	if got := checkpointNames(t, s, scopeB); len(got) != 0 {
		t.Errorf("the fork's checkpoints = %v; want none", got)
	}

	put(t, s, scopeA, Intermediate, "plot.py", "print(2)")
	save(t, s, scopeB, "mine.txt", "b's")
	if b, _ := os.ReadFile(filepath.Join(areaDir(s, scopeB, Intermediate), "plot.py")); string(b) != "print(1)" {
		t.Errorf("the fork's plot.py after the first chat changed its own: %q", b)
	}
	if _, err := os.Stat(filepath.Join(areaDir(s, scopeA, Uploads), "mine.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the fork's upload in the first chat: %v", err)
	}

	before := files(t, s, scopeB)
	if err := s.ForkCheckpoint(ctx, scopeA, "t1", scopeB); err == nil {
		t.Error("ForkCheckpoint onto a chat that has files succeeded")
	}
	sameFiles(t, "after a fork onto it was refused", files(t, s, scopeB), before)
	if err := s.ForkCheckpoint(ctx, scopeA, "nope", scopeC); err == nil {
		t.Error("ForkCheckpoint of a checkpoint that does not exist succeeded")
	}
	gone(t, s.chatDir(scopeC.SandboxID()))
	if pool.Exists(scopeC.SandboxID()) {
		t.Error("a failed fork left files in the pool")
	}
}

// TestPooledErrors: a chat without files has no checkpoints
// (sandbox.ErrNotFound) and gets no files by being asked; a store
// without a pool, and a chat whose directory was made before the pool,
// keep files without checkpoints (sandbox.ErrUnsupported), and such a
// chat's files go on working where they are.
func TestPooledErrors(t *testing.T) {
	ctx := context.Background()
	plain := newStore(t, Config{})
	save(t, plain, scopeB, "old.txt", "old")
	s, pool := newPooledStore(t, Config{Root: plain.root})
	calls := map[string]func(*Store, sandbox.Scope) error{
		"Checkpoint": func(s *Store, sc sandbox.Scope) error {
			_, err := s.Checkpoint(ctx, sc, "t1")
			return err
		},
		"Checkpoints": func(s *Store, sc sandbox.Scope) error {
			_, err := s.Checkpoints(ctx, sc)
			return err
		},
		"RestoreCheckpoint": func(s *Store, sc sandbox.Scope) error { return s.RestoreCheckpoint(ctx, sc, "t1") },
		"ForkCheckpoint":    func(s *Store, sc sandbox.Scope) error { return s.ForkCheckpoint(ctx, sc, "t1", scopeC) },
		"DropCheckpoint":    func(s *Store, sc sandbox.Scope) error { return s.DropCheckpoint(ctx, sc, "t1") },
	}
	for name, call := range calls {
		if err := call(s, scopeA); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s of a chat without files: %v; want ErrNotFound", name, err)
		}
		for _, sc := range []sandbox.Scope{scopeA, scopeB} {
			if err := call(plain, sc); !errors.Is(err, sandbox.ErrUnsupported) {
				t.Errorf("%s by a store without a pool: %v; want ErrUnsupported", name, err)
			}
		}
		if err := call(s, scopeB); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Errorf("%s of a chat made before the pool: %v; want ErrUnsupported", name, err)
		}
	}
	for _, sc := range []sandbox.Scope{scopeA, scopeC} {
		gone(t, s.chatDir(sc.SandboxID()))
		if pool.Exists(sc.SandboxID()) {
			t.Errorf("a refused call gave chat %s files in the pool", sc.ChatID)
		}
	}

	sid := scopeB.SandboxID()
	save(t, s, scopeB, "new.txt", "new")
	if fi, err := os.Lstat(s.chatDir(sid)); err != nil || !fi.IsDir() {
		t.Errorf("the directory of a chat made before the pool: %v, %v; want it still a directory", fi, err)
	}
	sameFiles(t, "a chat made before the pool", files(t, s, scopeB), map[string]string{"uploads": "<dir>", "uploads/old.txt": "old", "uploads/new.txt": "new", "intermediate": "<dir>"})
	if pool.Exists(sid) || s.Adoptable(sid) {
		t.Errorf("a chat made before the pool: files in the pool %v, adoptable %v; want neither", pool.Exists(sid), s.Adoptable(sid))
	}
	if got := owners(t, s); len(got) != 1 || got[sid] != scopeB {
		t.Errorf("Dirs = %v; want the chat made before the pool", got)
	}
}

// TestPooledDeleteChat: deleting a chat removes its link, its files in
// the pool and their checkpoints; the chat starts afresh after.
func TestPooledDeleteChat(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{})
	sid := scopeA.SandboxID()
	save(t, s, scopeA, "data.csv", "1,2\n")
	for _, name := range []string{"t1", "t2"} {
		if _, err := s.Checkpoint(ctx, scopeA, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatalf("DeleteChat: %v", err)
	}
	gone(t, s.chatDir(sid))
	gone(t, pool.Dir(sid))
	if ids, err := pool.Sandboxes(); err != nil || slices.Contains(ids, sid) {
		t.Errorf("the pool's sandboxes after the chat's deletion: %v, %v; want %s gone", ids, err, sid)
	}
	if cps, err := pool.Checkpoints(sid); err != nil || len(cps) != 0 {
		t.Errorf("the pool's checkpoints of the deleted chat: %+v, %v; want none", cps, err)
	}
	if got := owners(t, s); len(got) != 0 {
		t.Errorf("Dirs after the chat's deletion = %v; want none", got)
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Errorf("DeleteChat of a chat without files: %v", err)
	}

	save(t, s, scopeA, "again.txt", "again")
	sameFiles(t, "the chat afresh", files(t, s, scopeA), map[string]string{"uploads": "<dir>", "uploads/again.txt": "again", "intermediate": "<dir>"})
	if got := checkpointNames(t, s, scopeA); len(got) != 0 {
		t.Errorf("the chat afresh has checkpoints %v; want none", got)
	}
}

// settle writes the pool's filesystem out, which brings its quota
// counts up to date.
func settle(t *testing.T, pool *checkpoint.Pool) {
	t.Helper()
	fd, err := unix.Open(pool.Root(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		t.Fatal(err)
	}
}

// saveOnceFreed uploads size bytes, trying again while the filesystem
// frees what was deleted (in the background) and refuses it meanwhile.
func saveOnceFreed(t *testing.T, s *Store, pool *checkpoint.Pool, name string, size int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		settle(t, pool)
		_, err := s.Save(context.Background(), scopeA, "", name, bytes.NewReader(make([]byte, size)))
		if err == nil {
			return
		}
		if !errors.Is(err, ErrQuota) || time.Now().After(deadline) {
			t.Fatalf("an upload of %d bytes once the room was freed: %v", size, err)
		}
	}
}

// TestPooledQuota: the chat's files in the pool stop at its quota
// whoever writes them: a sandbox's write fails with EDQUOT, and an
// upload meets it as a quota error. The checkpoints count too: an
// upload the chat's files alone would leave room for is refused while a
// checkpoint keeps the blocks of a file deleted since, and taken once it
// is dropped.
func TestPooledQuota(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{MaxChatBytes: 8 << 20})
	mustMounts(t, s, scopeA)
	big := filepath.Join(areaDir(s, scopeA, Intermediate), "big")
	err := os.WriteFile(big, make([]byte, 30<<20), 0o644)
	if err == nil {
		settle(t, pool) // the quota's count is brought up to date
		err = os.WriteFile(big+"2", make([]byte, 30<<20), 0o644)
	}
	if !errors.Is(err, syscall.EDQUOT) && !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("30 MiB written into a chat of 8 MiB: %v; want EDQUOT", err)
	}
	// Full, the chat has no room for even the upload's staging file.
	var qe *QuotaError
	if _, err := s.Save(ctx, scopeA, "", "more.bin", bytes.NewReader(make([]byte, 1<<20))); !errors.As(err, &qe) || qe.What != QuotaChat {
		t.Errorf("an upload into a full chat: %v; want a chat quota error", err)
	}
	noLeftovers(t, s, scopeA)
	for _, p := range []string{big, big + "2"} {
		_ = os.Remove(p)
	}
	saveOnceFreed(t, s, pool, "ok.bin", 1<<20)

	// 10 MiB kept by a checkpoint only: the chat's files take 1 MiB, the
	// quota's 13 MiB hold 11.
	put(t, s, scopeA, Intermediate, "held", string(make([]byte, 10<<20)))
	settle(t, pool)
	if _, err := s.Checkpoint(ctx, scopeA, "full"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(areaDir(s, scopeA, Intermediate), "held")); err != nil {
		t.Fatal(err)
	}
	settle(t, pool)
	qe = nil
	if _, err := s.Save(ctx, scopeA, "", "four.bin", bytes.NewReader(make([]byte, 4<<20))); !errors.As(err, &qe) || qe.What != QuotaChat {
		t.Errorf("an upload of 4 MiB beside a checkpoint of 10 MiB in 13: %v; want a chat quota error", err)
	}
	noLeftovers(t, s, scopeA)
	if err := s.DropCheckpoint(ctx, scopeA, "full"); err != nil {
		t.Fatal(err)
	}
	saveOnceFreed(t, s, pool, "four.bin", 4<<20)
}

// TestPooledWarmPool: a warm pool member's directory is a link to files
// of its own in the pool; a chat without files adopts them with what
// the member's sandbox wrote, and keeps them when the member is
// discarded; its deletion removes them, and Sweep the member's link
// after. A member nobody adopted is discarded with its files; a chat
// that has files adopts none, and loses nothing.
func TestPooledWarmPool(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{})
	sid := scopeA.SandboxID()
	mounts, err := s.MemberMounts(ctx, memberA)
	if err != nil {
		t.Fatal(err)
	}
	linksTo(t, s.memberDir(memberA), pool.Dir(memberA))
	want := []sandbox.Mount{
		{Source: filepath.Join(s.memberDir(memberA), "uploads"), Target: sandbox.UploadsDir},
		{Source: filepath.Join(s.memberDir(memberA), "intermediate"), Target: sandbox.IntermediateDir},
	}
	if !slices.Equal(mounts, want) {
		t.Fatalf("MemberMounts = %+v; want %+v", mounts, want)
	}
	if err := os.WriteFile(filepath.Join(mounts[0].Source, "warm.txt"), []byte("warm"), 0o644); err != nil {
		t.Fatal(err)
	}

	if !s.Adoptable(sid) {
		t.Error("a chat without files is not adoptable")
	}
	if err := s.Adopt(ctx, scopeA, memberA); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	linksTo(t, s.chatDir(sid), pool.Dir(memberA))
	if b, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "warm.txt")); err != nil || string(b) != "warm" {
		t.Errorf("the member's file in the chat's uploads: %q, %v", b, err)
	}
	if s.Adoptable(sid) {
		t.Error("a chat that has files is adoptable")
	}
	if got := owners(t, s); len(got) != 1 || got[sid] != scopeA {
		t.Errorf("Dirs after Adopt = %v; want the chat owned by %+v", got, scopeA)
	}
	save(t, s, scopeA, "up.txt", "up")
	if _, err := s.Checkpoint(ctx, scopeA, "t1"); err != nil {
		t.Fatalf("Checkpoint of an adopted chat: %v", err)
	}

	if err := s.Discard(ctx, memberA); err != nil {
		t.Errorf("Discard of an adopted member: %v", err)
	}
	// However old, an adopted member's files are the chat's.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(pool.Dir(memberA), old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, func(string) bool { return false }); err != nil || n != 0 {
		t.Errorf("Sweep with the adopting chat alive removed %d, %v; want 0", n, err)
	}
	sameFiles(t, "the adopted chat after Discard and Sweep", files(t, s, scopeA),
		map[string]string{"uploads": "<dir>", "uploads/warm.txt": "warm", "uploads/up.txt": "up", "intermediate": "<dir>"})
	linksTo(t, s.memberDir(memberA), pool.Dir(memberA))

	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	gone(t, s.chatDir(sid))
	if ids, err := pool.Sandboxes(); err != nil || len(ids) != 0 {
		t.Errorf("the pool after the adopting chat's deletion holds %v, %v; want nothing", ids, err)
	}
	if n, err := s.Sweep(ctx, func(string) bool { return false }); err != nil || n != 1 {
		t.Errorf("Sweep after the chat's deletion removed %d, %v; want the member's link", n, err)
	}
	gone(t, s.memberDir(memberA))

	if _, err := s.MemberMounts(ctx, memberB); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, memberB); err != nil {
		t.Fatalf("Discard of a member nobody adopted: %v", err)
	}
	gone(t, s.memberDir(memberB))
	gone(t, pool.Dir(memberB))

	save(t, s, scopeB, "own.txt", "own")
	own := files(t, s, scopeB)
	mounts, err = s.MemberMounts(ctx, memberC)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounts[1].Source, "warm.txt"), []byte("warm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s.Adoptable(scopeB.SandboxID()) {
		t.Error("a chat that has files is adoptable")
	}
	if err := s.Adopt(ctx, scopeB, memberC); err == nil {
		t.Error("Adopt into a chat that has files succeeded")
	}
	linksTo(t, s.chatDir(scopeB.SandboxID()), pool.Dir(scopeB.SandboxID()))
	sameFiles(t, "the chat a member was refused to", files(t, s, scopeB), own)
	if b, err := os.ReadFile(filepath.Join(mounts[1].Source, "warm.txt")); err != nil || string(b) != "warm" {
		t.Errorf("the refused member's file: %q, %v", b, err)
	}
	if got := owners(t, s); len(got) != 1 || got[scopeB.SandboxID()] != scopeB {
		t.Errorf("Dirs after a refused adoption = %v; want the chat's own only", got)
	}
}

// TestPooledSweep: Sweep deletes files in the pool that no link leads
// to once they are ten minutes old, with their checkpoints, and a
// member's files that nobody adopted or keeps once that old; it keeps
// fresh ones, chats' files and the members it is told to keep.
func TestPooledSweep(t *testing.T) {
	ctx := context.Background()
	s, pool := newPooledStore(t, Config{Now: time.Now})
	later := newStore(t, Config{Root: s.root, Pool: pool, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	const orphan = "d00000000000000d"
	if err := pool.Create(orphan, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Checkpoint(orphan, "t1"); err != nil {
		t.Fatal(err)
	}
	save(t, s, scopeA, "data.csv", "1,2\n")
	if _, err := s.Checkpoint(ctx, scopeA, "t1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{memberA, memberB} {
		if _, err := s.MemberMounts(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(id string) bool { return id == memberA }

	if n, err := s.Sweep(ctx, keep); err != nil || n != 0 {
		t.Errorf("Sweep of fresh files removed %d, %v; want 0", n, err)
	}
	if !pool.Exists(orphan) {
		t.Error("Sweep deleted fresh files no link leads to")
	}
	if n, err := later.Sweep(ctx, keep); err != nil || n != 1 {
		t.Errorf("Sweep an hour later removed %d, %v; want the files no link leads to", n, err)
	}
	if ids, err := pool.Sandboxes(); err != nil || slices.Contains(ids, orphan) {
		t.Errorf("the pool after the sweep: %v, %v; want %s gone, with its checkpoint", ids, err, orphan)
	}

	old := time.Now().Add(-time.Hour)
	for _, id := range []string{memberA, memberB} {
		if err := os.Chtimes(pool.Dir(id), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Sweep(ctx, keep); err != nil || n != 1 {
		t.Errorf("Sweep of an old member removed %d, %v; want the one not kept", n, err)
	}
	gone(t, s.memberDir(memberB))
	gone(t, pool.Dir(memberB))
	linksTo(t, s.memberDir(memberA), pool.Dir(memberA))
	if !pool.Exists(memberA) {
		t.Error("Sweep deleted the files of a member it was told to keep")
	}
	if got := checkpointNames(t, s, scopeA); !slices.Equal(got, []string{"t1"}) {
		t.Errorf("the chat's checkpoints after the sweeps = %v; want [t1]", got)
	}
	sameFiles(t, "after the sweeps", files(t, s, scopeA), map[string]string{"uploads": "<dir>", "uploads/data.csv": "1,2\n", "intermediate": "<dir>"})
}

// TestPooledWithoutPool: an engine started with checkpoints off finds a
// chat's directory that links into the pool; it neither replaces nor
// lists it as a directory nobody owns, and says how to reach its files.
func TestPooledWithoutPool(t *testing.T) {
	s, _ := newPooledStore(t, Config{})
	save(t, s, scopeA, "kept.txt", "kept")
	off := newStore(t, Config{Root: s.root})
	if _, err := off.Mounts(context.Background(), scopeA); err == nil || !strings.Contains(err.Error(), "FLOWBOX_CHECKPOINTS=on") {
		t.Errorf("mounts of a pooled chat without the pool: %v; want the setting that reaches its files", err)
	}
	if dirs, err := off.Dirs(context.Background()); err != nil || len(dirs) != 0 {
		t.Errorf("Dirs without the pool: %v, %v; want the pooled chat left alone", dirs, err)
	}
	if got := files(t, s, scopeA); got["uploads/kept.txt"] != "kept" {
		t.Errorf("the chat's files after: %v", got)
	}
}

// TestPooledRestoreBesideUpload: a restore of the chat's files is
// refused while an upload to it is received (it would land in the files
// set aside), and an upload that begins during a restore waits for it,
// then lands in the restored files.
func TestPooledRestoreBesideUpload(t *testing.T) {
	s, _ := newPooledStore(t, Config{})
	ctx := context.Background()
	save(t, s, scopeA, "first.txt", "1")
	if _, err := s.Checkpoint(ctx, scopeA, "t1"); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	saved := make(chan error, 1)
	go func() {
		_, err := s.Save(ctx, scopeA, "", "slow.txt", pr)
		saved <- err
	}()
	pw.Write([]byte("half")) // returns once the upload reads it: in flight
	if err := s.RestoreCheckpoint(ctx, scopeA, "t1"); !errors.Is(err, sandbox.ErrRewindBusy) {
		t.Errorf("a restore beside an upload in flight: %v, want ErrRewindBusy", err)
	}
	pw.Close()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}

	// A restore in progress: the upload that begins waits for its end.
	done, err := s.restoreAlone(scopeA.SandboxID())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := s.Save(ctx, scopeA, "", "after.txt", strings.NewReader("2"))
		saved <- err
	}()
	select {
	case err := <-saved:
		t.Fatalf("an upload during a restore did not wait for it: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	done()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if got := files(t, s, scopeA); got["uploads/after.txt"] != "2" || got["uploads/slow.txt"] != "half" {
		t.Errorf("the chat's files: %v", got)
	}
}

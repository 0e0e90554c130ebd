//go:build linux

package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// newDiskStore is a Store whose chats get disks of 8 MiB, or a skip
// where disks cannot be made.
func newDiskStore(t *testing.T) *Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a chat's disk is a loop mount: it needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("a chat's disk needs mkfs.ext4 (e2fsprogs)")
	}
	s := newStore(t, Config{ChatDisk: true, MaxChatBytes: 8 << 20})
	t.Cleanup(func() {
		// Whatever a failure left mounted under the test's directory.
		b, _ := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], s.root+"/") {
				_ = diskimage.Unmount(f[4])
			}
		}
	})
	return s
}

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	m, err := diskimage.IsMountPoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChatDiskBoundsEveryWriter: a new chat's directory is a disk of its
// quota: a write by anyone (here: straight into the directory, as a
// sandbox does) stops at it with ENOSPC, an upload meets it as a quota
// error, and deleting the chat leaves no mount or image behind.
func TestChatDiskBoundsEveryWriter(t *testing.T) {
	ctx := context.Background()
	s := newDiskStore(t)
	if _, err := s.Mounts(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	chat := s.chatDir(scopeA.SandboxID())
	if !mounted(t, chat) {
		t.Fatal("a new chat's directory is not its disk")
	}
	err := os.WriteFile(filepath.Join(areaDir(s, scopeA, Intermediate), "big"), make([]byte, 30<<20), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("30 MiB written into an 8 MiB chat: %v, want ENOSPC", err)
	}
	if _, err := s.Save(ctx, scopeA, "", "more.bin", bytes.NewReader(make([]byte, 1<<20))); !errors.Is(err, ErrQuota) {
		t.Errorf("an upload into a full chat disk: %v, want a quota error", err)
	}
	os.Remove(filepath.Join(areaDir(s, scopeA, Intermediate), "big"))
	if _, err := s.Save(ctx, scopeA, "", "ok.bin", bytes.NewReader(make([]byte, 1<<20))); err != nil {
		t.Errorf("an upload under the quota: %v", err)
	}
	// Another process (an engine restart) finds the owner on the disk.
	again := newStore(t, Config{Root: s.root, ChatDisk: true, MaxChatBytes: 8 << 20})
	if dirs, err := again.Dirs(ctx); err != nil || len(dirs) != 1 || !dirs[0].Known() {
		t.Errorf("the chats another Store finds: %+v, %v", dirs, err)
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	if mounted(t, chat) {
		t.Error("the chat's disk is still mounted after its deletion")
	}
	if _, err := os.Stat(s.diskImage(scopeA.SandboxID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the chat's image after its deletion: %v", err)
	}
}

// TestChatDiskBeforeKeepsHostDirectory: a chat whose directory existed
// before disks were turned on keeps it: no image is put over its files.
func TestChatDiskBeforeKeepsHostDirectory(t *testing.T) {
	ctx := context.Background()
	before := newStore(t, Config{})
	if _, err := before.Save(ctx, scopeA, "", "old.txt", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	newDiskStore(t) // skips where disks cannot be made
	s := newStore(t, Config{Root: before.root, ChatDisk: true, MaxChatBytes: 8 << 20})
	if _, err := s.Mounts(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	if mounted(t, s.chatDir(scopeA.SandboxID())) {
		t.Error("a chat of before was given a disk over its files")
	}
	if b, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "old.txt")); err != nil || string(b) != "old" {
		t.Errorf("a chat of before's file: %q, %v", b, err)
	}
}

// TestChatDiskPoolAdopt: a warm pool member gets its disk when it is
// made; the chat that adopts it takes the disk over, with what the
// member's sandbox wrote, and the quota still holds there. A member with a
// disk is not adopted by a chat that has files already.
func TestChatDiskPoolAdopt(t *testing.T) {
	ctx := context.Background()
	s := newDiskStore(t)
	mounts, err := s.MemberMounts(ctx, poolA)
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(t, s.memberDir(poolA)) {
		t.Fatal("a member's directory is not its disk")
	}
	if err := os.WriteFile(filepath.Join(mounts[1].Source, "warm"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeA, poolA); err != nil {
		t.Fatal(err)
	}
	chat := s.chatDir(scopeA.SandboxID())
	if !mounted(t, chat) || mounted(t, s.memberDir(poolA)) {
		t.Errorf("after adoption: the chat's directory mounted %v, the member's %v; want the chat's only", mounted(t, chat), mounted(t, s.memberDir(poolA)))
	}
	if b, err := os.ReadFile(filepath.Join(mounts[1].Source, "warm")); err != nil || string(b) != "w" {
		t.Errorf("the member's file through its old path: %q, %v", b, err)
	}
	if dirs, err := s.Dirs(ctx); err != nil || len(dirs) != 1 || dirs[0].Scope() != scopeA {
		t.Errorf("the chats after adoption: %+v, %v", dirs, err)
	}
	if err := os.WriteFile(filepath.Join(areaDir(s, scopeA, Uploads), "big"), make([]byte, 30<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("30 MiB into the adopted chat's 8 MiB disk: %v, want ENOSPC", err)
	}

	// A chat with files before its first command keeps its disk; the
	// member's goes, and its path leads to the chat.
	if _, err := s.Save(ctx, scopeB, "", "early.txt", strings.NewReader("early")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MemberMounts(ctx, poolB); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeB, poolB); err != nil {
		t.Fatal(err)
	}
	if mounted(t, s.memberDir(poolB)) || !mounted(t, s.chatDir(scopeB.SandboxID())) {
		t.Error("after adopting a member with a disk into a chat with files: want the chat's disk only")
	}
	if b, err := os.ReadFile(filepath.Join(areaDir(s, scopeB, Uploads), "early.txt")); err != nil || string(b) != "early" {
		t.Errorf("the chat's file after adoption: %q, %v", b, err)
	}
	if _, err := os.Lstat(s.memberDir(poolB)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the member's path after adoption: %v, want it gone (so that the provider binds the chat's)", err)
	}
	if _, err := os.Stat(s.memberImage(poolB)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the member's image after adoption: %v", err)
	}
	if err := s.DeleteChat(ctx, scopeB); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

const poolA, poolB = "00000000000000aa", "00000000000000bb"

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestPoolAdopt: the chat takes the member's very directories (which a
// running sandbox has mounted), with the files uploaded before, and the
// member's path leads to the chat's directory.
func TestPoolAdopt(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mounts, err := s.MemberMounts(ctx, poolA)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 2 || mounts[0].Target != sandbox.UploadsDir || mounts[1].Target != sandbox.IntermediateDir {
		t.Fatalf("MemberMounts = %+v; want uploads and intermediate", mounts)
	}
	upIno, midIno := inode(t, mounts[0].Source), inode(t, mounts[1].Source)

	// Uploaded before the chat's first command.
	if _, err := s.Save(ctx, scopeA, "", "early.txt", strings.NewReader("early\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(areaDir(s, scopeA, Intermediate), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeA, poolA); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if got := inode(t, areaDir(s, scopeA, Uploads)); got != upIno {
		t.Errorf("the chat's uploads is inode %d; want the member's %d, which its sandbox mounts", got, upIno)
	}
	if got := inode(t, areaDir(s, scopeA, Intermediate)); got != midIno {
		t.Errorf("the chat's intermediate is inode %d; want the member's %d", got, midIno)
	}
	if data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "early.txt")); err != nil || string(data) != "early\n" {
		t.Errorf("the early upload after Adopt: %q, %v", data, err)
	}
	if fi, err := os.Stat(filepath.Join(areaDir(s, scopeA, Intermediate), "sub")); err != nil || !fi.IsDir() {
		t.Errorf("the chat's intermediate directory after Adopt: %v", err)
	}
	// The member's old source path still leads there.
	if got := inode(t, mounts[0].Source); got != upIno {
		t.Errorf("the member's old uploads path leads to inode %d; want %d", got, upIno)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(areaDir(s, scopeA, Uploads)), adoptingFile)); !os.IsNotExist(err) {
		t.Errorf("the adoption's mark is left: %v", err)
	}
	// The listing and uploads see the files as before.
	entries, err := s.List(ctx, scopeA, Uploads, "")
	if err != nil || len(entries) != 1 || entries[0].Name != "early.txt" {
		t.Errorf("List after Adopt = %+v, %v", entries, err)
	}

	// A second adoption of the same member, through its link, is refused
	// and leaves both chats' directories alone.
	if _, err := s.Save(ctx, scopeB, "", "b.txt", strings.NewReader("b\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeB, poolA); err == nil {
		t.Errorf("Adopt of an adopted member succeeded")
	}
	if got := inode(t, areaDir(s, scopeA, Uploads)); got != upIno {
		t.Errorf("the first chat's uploads changed after a refused adoption")
	}
	if _, err := os.Stat(filepath.Join(areaDir(s, scopeB, Uploads), "b.txt")); err != nil {
		t.Errorf("the second chat's upload after a refused adoption: %v", err)
	}

	if err := s.Discard(ctx, poolA); err != nil {
		t.Errorf("Discard of an adopted member: %v", err)
	}
	if got := inode(t, mounts[0].Source); got != upIno {
		t.Errorf("Discard of an adopted member broke its link")
	}

	// Sweep keeps the link while the chat's directory exists.
	if n, err := s.Sweep(ctx, func(string) bool { return false }); err != nil || n != 0 {
		t.Errorf("Sweep with the chat alive removed %d, %v; want 0", n, err)
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(ctx, func(string) bool { return false }); err != nil || n != 1 {
		t.Errorf("Sweep after the chat's deletion removed %d, %v; want the link", n, err)
	}
	if _, err := os.Lstat(s.memberDir(poolA)); !os.IsNotExist(err) {
		t.Errorf("the member's link after Sweep: %v", err)
	}
}

// TestPoolAdoptNewChat: a chat without a directory takes the member's
// whole directory, which then holds what a chat's directory holds; a
// second member adopted into that chat goes the long way, keeping its
// files.
func TestPoolAdoptNewChat(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mounts, err := s.MemberMounts(ctx, poolA)
	if err != nil {
		t.Fatal(err)
	}
	memberIno, upIno, midIno := inode(t, s.memberDir(poolA)), inode(t, mounts[0].Source), inode(t, mounts[1].Source)
	if err := s.Adopt(ctx, scopeA, poolA); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	chat := s.chatDir(scopeA.SandboxID())
	if got := inode(t, chat); got != memberIno {
		t.Errorf("the chat's directory is inode %d; want the member's %d, renamed", got, memberIno)
	}
	if inode(t, areaDir(s, scopeA, Uploads)) != upIno || inode(t, areaDir(s, scopeA, Intermediate)) != midIno {
		t.Errorf("the chat's uploads and intermediate are not the member's, which its sandbox mounts")
	}
	if fi, err := os.Stat(filepath.Join(chat, stagingDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the chat's staging directory: %v, %v; want mode 0700", fi, err)
	}
	owners, err := s.Dirs(ctx)
	if err != nil || len(owners) != 1 || owners[0].Scope() != scopeA {
		t.Errorf("Dirs after Adopt = %+v, %v; want the chat's directory, owned by %+v", owners, err, scopeA)
	}
	if fi, err := os.Lstat(s.memberDir(poolA)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the member's path after Adopt: %v, %v; want a link", fi, err)
	}
	if got := inode(t, mounts[0].Source); got != upIno {
		t.Errorf("the member's old uploads path leads to inode %d; want %d", got, upIno)
	}
	if _, err := s.Save(ctx, scopeA, "", "after.txt", strings.NewReader("after\n")); err != nil {
		t.Fatalf("an upload after Adopt: %v", err)
	}

	// The chat has a directory now: the next member's are exchanged in,
	// the chat's files moved into them.
	mountsB, err := s.MemberMounts(ctx, poolB)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeA, poolB); err != nil {
		t.Fatalf("Adopt into a chat with a directory: %v", err)
	}
	if got := inode(t, areaDir(s, scopeA, Uploads)); got != inode(t, mountsB[0].Source) {
		t.Errorf("the chat's uploads after the second adoption are not the second member's")
	}
	if data, err := os.ReadFile(filepath.Join(areaDir(s, scopeA, Uploads), "after.txt")); err != nil || string(data) != "after\n" {
		t.Errorf("the chat's upload after the second adoption: %q, %v", data, err)
	}
}

// TestOwnerDurableFirst: a new chat's owner.json reaches the disk in the
// background, after the adoption or creation returned, and the chat's
// first upload is not made durable before it; an owner.json left in a
// member by an adoption that crashed does not name the next chat's owner.
func TestOwnerDurableFirst(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	release := make(chan struct{})
	var synced sync.Map // names synced
	s.syncFile = func(name string) error {
		if filepath.Base(name) == ownerFile {
			<-release
		}
		synced.Store(name, true)
		return syncFileAt(name)
	}

	if _, err := s.MemberMounts(ctx, poolA); err != nil {
		t.Fatal(err)
	}
	stale, _ := json.Marshal(ownerDoc{AppID: scopeB.AppID, UserID: scopeB.UserID, ChatID: scopeB.ChatID})
	if err := os.WriteFile(filepath.Join(s.memberDir(poolA), ownerFile), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	adopted := make(chan error, 1)
	go func() { adopted <- s.Adopt(ctx, scopeA, poolA) }()
	select {
	case err := <-adopted:
		if err != nil {
			t.Fatalf("Adopt: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Adopt waits for owner.json to reach the disk")
	}
	if owners, err := s.Dirs(ctx); err != nil || len(owners) != 1 || owners[0].Scope() != scopeA {
		t.Fatalf("Dirs after Adopt = %+v, %v; want the chat's directory, owned by %+v", owners, err, scopeA)
	}
	saved := make(chan error, 1)
	go func() {
		_, err := s.Save(ctx, scopeA, "", "first.txt", strings.NewReader("first\n"))
		saved <- err
	}()
	select {
	case err := <-saved:
		t.Fatalf("the first upload was made durable (%v) before the chat's owner.json", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-saved; err != nil {
		t.Fatalf("the first upload: %v", err)
	}
	if _, ok := synced.Load(filepath.Join(s.chatDir(scopeA.SandboxID()), ownerFile)); !ok {
		t.Error("the chat's owner.json was not synced where it stays")
	}
	// A chat created without the pool: the same.
	if _, err := s.Mounts(ctx, scopeC); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, scopeC, "", "x.txt", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok := synced.Load(filepath.Join(s.chatDir(scopeC.SandboxID()), ownerFile)); !ok {
		t.Error("a new chat's owner.json was not synced")
	}
}

// TestOwnerSyncedLater: a new chat's owner.json reaches the disk by
// itself, a moment after the chat's directory was made, with no upload
// asking for it.
func TestOwnerSyncedLater(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	synced := make(chan string, 4)
	s.syncFile = func(name string) error {
		synced <- name
		return syncFileAt(name)
	}
	if _, err := s.Mounts(ctx, scopeC); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(s.chatDir(scopeC.SandboxID()), ownerFile)
	select {
	case name := <-synced:
		if name != want {
			t.Errorf("synced %s, want %s", name, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the chat's owner.json was never synced")
	}
	// Untracked once done: the next upload does not wait.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := s.ownerSyncs.Load(scopeC.SandboxID()); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the finished sync is still tracked")
		}
	}
}

// TestPoolDiscard: a member that was not adopted is discarded without
// its files; a chat being adopted refuses a second adoption.
func TestPoolDiscard(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	for _, id := range []string{poolA, poolB} {
		if _, err := s.MemberMounts(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Discard(ctx, poolB); err != nil {
		t.Fatalf("Discard of an unused member: %v", err)
	}
	if _, err := os.Lstat(s.memberDir(poolB)); !os.IsNotExist(err) {
		t.Errorf("the discarded member's directory: %v", err)
	}
	// A member directory with a file in it (never so in use) is kept.
	mounts, _ := s.MemberMounts(ctx, poolB)
	if err := os.WriteFile(filepath.Join(mounts[0].Source, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, poolB); err == nil {
		t.Errorf("Discard of a member directory holding a file succeeded")
	}
	if _, err := os.Stat(filepath.Join(mounts[0].Source, "x")); err != nil {
		t.Errorf("Discard deleted a file: %v", err)
	}

	if _, err := s.Mounts(ctx, scopeB); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(filepath.Dir(areaDir(s, scopeB, Uploads)), adoptingFile)
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Adopt(ctx, scopeB, poolA); err == nil {
		t.Errorf("Adopt of a chat another adoption is moving succeeded")
	}
	if fi, err := os.Lstat(s.memberDir(poolA)); err != nil || !fi.IsDir() {
		t.Errorf("the refused member's directory: %v", err)
	}
	if err := s.Adopt(ctx, scopeB, "../x"); err == nil {
		t.Errorf("Adopt of a malformed pool id succeeded")
	}
	// Sweep leaves members it is told to keep, and young ones.
	if n, err := s.Sweep(ctx, func(id string) bool { return id == poolA }); err != nil || n != 0 {
		t.Errorf("Sweep removed %d, %v; want 0 (one kept, one young)", n, err)
	}
}

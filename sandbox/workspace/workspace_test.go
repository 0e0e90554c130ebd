package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

var (
	scopeA = sandbox.Scope{AppID: "app1", UserID: "u1", ChatID: "c1"}
	scopeB = sandbox.Scope{AppID: "app1", UserID: "u2", ChatID: "c2"}
	scopeC = sandbox.Scope{AppID: "app2", UserID: "u1", ChatID: "c3"}
)

var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return fixedNow }
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// areaDir is the host directory of scope's area, as the sandbox would
// write into it.
func areaDir(s *Store, scope sandbox.Scope, area Area) string {
	return filepath.Join(s.chatDir(scope.SandboxID()), string(area))
}

func mustMounts(t *testing.T, s *Store, scope sandbox.Scope) []sandbox.Mount {
	t.Helper()
	m, err := s.Mounts(context.Background(), scope)
	if err != nil {
		t.Fatalf("Mounts(%v): %v", scope, err)
	}
	return m
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestNewNeedsRoot(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New with no Root: got no error")
	}
	s := newStore(t, Config{})
	if f, c := s.Limits(); f != DefaultMaxFileBytes || c != DefaultMaxChatBytes {
		t.Errorf("Limits() = %d, %d; want %d, %d", f, c, DefaultMaxFileBytes, DefaultMaxChatBytes)
	}
}

func TestMountsLayout(t *testing.T) {
	s := newStore(t, Config{})
	mounts := mustMounts(t, s, scopeA)
	dir := filepath.Join(s.root, "chats", sandbox.IDFor("app1", "u1", "c1"))
	want := []sandbox.Mount{
		{Source: filepath.Join(dir, "uploads"), Target: "/workspace/uploads"},
		{Source: filepath.Join(dir, "intermediate"), Target: "/workspace/intermediate"},
	}
	if len(mounts) != 2 || mounts[0] != want[0] || mounts[1] != want[1] {
		t.Fatalf("Mounts = %+v, want %+v", mounts, want)
	}
	for _, p := range []string{dir, want[0].Source, want[1].Source} {
		if got := mode(t, p); got != 0o755 {
			t.Errorf("mode of %s = %v, want 0755", p, got)
		}
	}
	if got := mode(t, filepath.Join(dir, "staging")); got != 0o700 {
		t.Errorf("mode of staging = %v, want 0700", got)
	}
	data, err := os.ReadFile(filepath.Join(dir, "owner.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	wantDoc := map[string]any{"appId": "app1", "userId": "u1", "chatId": "c1", "createdAt": "2026-03-01T12:00:00Z"}
	for k, v := range wantDoc {
		if doc[k] != v {
			t.Errorf("owner.json %s = %v, want %v (file: %s)", k, doc[k], v, data)
		}
	}
	// Idempotent: the first createdAt stays.
	s.now = func() time.Time { return fixedNow.Add(time.Hour) }
	mustMounts(t, s, scopeA)
	again, _ := os.ReadFile(filepath.Join(dir, "owner.json"))
	if string(again) != string(data) {
		t.Errorf("owner.json changed on the second Mounts: got %s, want %s", again, data)
	}
}

func TestMountsRefusesIncompleteScope(t *testing.T) {
	s := newStore(t, Config{})
	for _, sc := range []sandbox.Scope{{}, {AppID: "a", UserID: "u"}, {UserID: "u", ChatID: "c"}} {
		if _, err := s.Mounts(context.Background(), sc); err == nil {
			t.Errorf("Mounts(%+v): got no error", sc)
		}
	}
	if entries, _ := os.ReadDir(s.root); len(entries) != 0 {
		t.Errorf("Mounts with a bad scope created %d entries in the root", len(entries))
	}
}

func TestMountsConcurrent(t *testing.T) {
	s := newStore(t, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Mounts(context.Background(), scopeA)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Mounts: %v", err)
		}
	}
	entries, err := os.ReadDir(s.chatDir(scopeA.SandboxID()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, ","), "intermediate,owner.json,staging,uploads"; got != want {
		t.Errorf("chat directory holds %s, want %s (no leftover temporary files)", got, want)
	}
}

// The modes hold whatever the process's umask. The umask is process-wide,
// so this test does not run in parallel with others.
func TestModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	f, err := s.Save(context.Background(), scopeA, "sub/dir", "a.txt", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	up := areaDir(s, scopeA, Uploads)
	checks := map[string]fs.FileMode{
		up:                               0o755,
		areaDir(s, scopeA, Intermediate): 0o755,
		filepath.Join(up, "sub"):         0o755,
		filepath.Join(up, "sub/dir"):     0o755,
		filepath.Join(up, filepath.FromSlash(f.Path)): 0o644,
	}
	for p, want := range checks {
		if got := mode(t, p); got != want {
			t.Errorf("mode of %s = %v, want %v", p, got, want)
		}
	}
}

func TestWorldWritable(t *testing.T) {
	s := newStore(t, Config{WorldWritable: true})
	mustMounts(t, s, scopeA)
	f, err := s.Save(context.Background(), scopeA, "sub", "a.txt", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	up := areaDir(s, scopeA, Uploads)
	checks := map[string]fs.FileMode{
		filepath.Join(s.root, "chats"):   0o700,
		up:                               0o777,
		areaDir(s, scopeA, Intermediate): 0o777,
		filepath.Join(up, "sub"):         0o777,
		filepath.Join(up, filepath.FromSlash(f.Path)): 0o666,
	}
	for p, want := range checks {
		if got := mode(t, p); got != want {
			t.Errorf("mode of %s = %v, want %v", p, got, want)
		}
	}
}

func ownersByID(t *testing.T, s *Store) map[string]Owner {
	t.Helper()
	dirs, err := s.Dirs(context.Background())
	if err != nil {
		t.Fatalf("Dirs: %v", err)
	}
	out := map[string]Owner{}
	for _, o := range dirs {
		out[o.SandboxID] = o
	}
	return out
}

func TestDirsAndDeletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	if dirs, err := s.Dirs(ctx); err != nil || len(dirs) != 0 {
		t.Fatalf("Dirs before anything exists = %v, %v; want none", dirs, err)
	}
	for _, sc := range []sandbox.Scope{scopeA, scopeB, scopeC} {
		if _, err := s.Save(ctx, sc, "", "f.txt", strings.NewReader("data")); err != nil {
			t.Fatal(err)
		}
	}
	chats := filepath.Join(s.root, "chats")
	// A creation that crashed before owner.json, a forged owner.json, and
	// entries that are not chat directories.
	crashed := "00000000000000aa"
	if err := os.MkdirAll(filepath.Join(chats, crashed, "uploads"), 0o755); err != nil {
		t.Fatal(err)
	}
	forged := "00000000000000bb"
	if err := os.MkdirAll(filepath.Join(chats, forged), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chats, forged, "owner.json"), []byte(`{"appId":"app1","userId":"x","chatId":"y"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(chats, "not-a-chat"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chats, "0000000000000ccc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	got := ownersByID(t, s)
	if len(got) != 5 {
		t.Fatalf("Dirs found %d directories, want 5: %+v", len(got), got)
	}
	for _, sc := range []sandbox.Scope{scopeA, scopeB, scopeC} {
		o := got[sc.SandboxID()]
		if !o.Known() || o.Scope() != sc || !o.CreatedAt.Equal(fixedNow) {
			t.Errorf("Dirs[%s] = %+v, want owner %+v created %v", sc.SandboxID(), o, sc, fixedNow)
		}
	}
	for _, id := range []string{crashed, forged} {
		if o := got[id]; o.Known() || o.CreatedAt.IsZero() {
			t.Errorf("Dirs[%s] = %+v, want an unknown owner with the directory's time", id, o)
		}
	}

	if err := s.DeleteApp(ctx, "app1"); err != nil {
		t.Fatalf("DeleteApp: %v", err)
	}
	got = ownersByID(t, s)
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	wantIDs := []string{crashed, forged, scopeC.SandboxID()}
	sort.Strings(wantIDs)
	if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("after DeleteApp(app1) Dirs = %v, want %v (a forged owner.json is not trusted)", ids, wantIDs)
	}

	if err := s.DeleteChat(ctx, scopeC); err != nil {
		t.Fatalf("DeleteChat: %v", err)
	}
	if err := s.DeleteChat(ctx, scopeC); err != nil {
		t.Fatalf("DeleteChat again: %v", err)
	}
	if _, err := os.Lstat(s.chatDir(scopeC.SandboxID())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after DeleteChat the directory is still there: %v", err)
	}
	for _, id := range []string{crashed, forged} {
		if err := s.DeleteID(ctx, id); err != nil {
			t.Fatalf("DeleteID(%s): %v", id, err)
		}
	}
	if got := ownersByID(t, s); len(got) != 0 {
		t.Errorf("after deleting everything Dirs = %+v, want none", got)
	}
	if _, err := os.Lstat(filepath.Join(chats, "not-a-chat")); err != nil {
		t.Errorf("a directory that is not a chat's was touched: %v", err)
	}
	if err := s.DeleteID(ctx, "../../etc"); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("DeleteID(../../etc) = %v, want ErrInvalidPath", err)
	}
	if err := s.DeleteApp(ctx, ""); err == nil {
		t.Error("DeleteApp(\"\"): got no error")
	}
}

// DeleteChat removes what the sandbox planted without following it.
func TestDeleteChatDoesNotFollowLinks(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := areaDir(s, scopeA, Uploads)
	if err := os.Symlink(outside, filepath.Join(up, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(up, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(up, "d", "link")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat(ctx, scopeA); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(secret); err != nil || string(data) != "keep" {
		t.Errorf("the file behind a link was touched: %q, %v", data, err)
	}
}

package workspace

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// planted is a chat whose sandbox planted links in both areas: to /etc,
// to another chat's uploads (relative and absolute), and to a decoy
// directory outside the root, standing in for any host directory so that
// writes and deletions through a bug would hit nothing that matters.
type planted struct {
	s      *Store
	decoy  string // outside the root; holds secret.txt
	victim string // scopeB's uploads; holds secret.txt
}

func plant(t *testing.T) planted {
	t.Helper()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	mustMounts(t, s, scopeB)
	p := planted{s: s, decoy: t.TempDir(), victim: areaDir(s, scopeB, Uploads)}
	for _, d := range []string{p.decoy, p.victim} {
		if err := os.WriteFile(filepath.Join(d, "secret.txt"), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, area := range []Area{Uploads, Intermediate} {
		dir := areaDir(s, scopeA, area)
		relDecoy, err := filepath.Rel(dir, p.decoy)
		if err != nil {
			t.Fatal(err)
		}
		links := map[string]string{
			"etc":          "/etc",
			"passwd":       "/etc/passwd",
			"other":        "../../" + scopeB.SandboxID() + "/uploads",
			"other-abs":    p.victim,
			"other-secret": "../../" + scopeB.SandboxID() + "/uploads/secret.txt",
			"decoy":        relDecoy,
			"decoy-secret": filepath.Join(relDecoy, "secret.txt"),
			"data.csv":     filepath.Join(relDecoy, "secret.txt"),
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

// intact fails when anything outside the chat changed.
func (p planted) intact(t *testing.T) {
	t.Helper()
	for _, d := range []string{p.decoy, p.victim} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Name() != "secret.txt" {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s now holds %v, want only secret.txt", d, names)
		}
		if data, err := os.ReadFile(filepath.Join(d, "secret.txt")); err != nil || string(data) != "secret" {
			t.Errorf("%s/secret.txt = %q, %v; want it untouched", d, data, err)
		}
	}
}

func TestLinksOutAreRefused(t *testing.T) {
	ctx := context.Background()
	p := plant(t)
	s := p.s
	through := []string{"etc", "etc/passwd", "passwd", "other", "other/secret.txt", "other-abs", "other-abs/secret.txt", "other-secret", "decoy", "decoy/secret.txt", "decoy-secret", "data.csv"}
	dirs := []string{"etc", "etc/sub", "other", "other/sub", "other-abs", "decoy", "decoy/sub"}

	for _, area := range []Area{Uploads, Intermediate} {
		t.Run(string(area), func(t *testing.T) {
			for _, path := range through {
				f, _, err := s.Open(ctx, scopeA, area, path)
				if err == nil {
					data, _ := io.ReadAll(f)
					f.Close()
					t.Errorf("Open(%s) read %q, want a refusal", path, data)
				} else if !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Errorf("Open(%s) = %v, want ErrInvalidPath", path, err)
				}
			}
			for _, dir := range append(dirs[:len(dirs):len(dirs)], "passwd", "data.csv") {
				if entries, err := s.List(ctx, scopeA, area, dir); !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Errorf("List(%s) = %d entries, %v; want ErrInvalidPath", dir, len(entries), err)
				}
			}
			for _, path := range []string{"other/secret.txt", "other-abs/secret.txt", "decoy/secret.txt", "etc/passwd"} {
				if err := s.Delete(ctx, scopeA, area, path); !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Errorf("Delete(%s) = %v, want ErrInvalidPath", path, err)
				}
			}
		})
	}
	for _, dir := range dirs {
		if f, err := s.Save(ctx, scopeA, dir, "new.txt", strings.NewReader("x")); !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Save into %s = %+v, %v; want ErrInvalidPath", dir, f, err)
		}
	}
	// A link holding the name is a collision, never written through.
	f, err := s.Save(ctx, scopeA, "", "data.csv", strings.NewReader("overwrite?"))
	if err != nil || f.Name != "data (1).csv" {
		t.Errorf("Save over a planted link = %+v, %v; want data (1).csv", f, err)
	}
	p.intact(t)

	// Deleting the links removes the links only.
	for _, area := range []Area{Uploads, Intermediate} {
		for _, name := range []string{"decoy", "decoy-secret", "other", "other-secret", "data.csv"} {
			if err := s.Delete(ctx, scopeA, area, name); err != nil {
				t.Errorf("Delete(%s %s) = %v, want the link removed", area, name, err)
			}
		}
	}
	p.intact(t)
}

// Walks never descend through links: the summary lists them as links and
// the usage does not count what they point at.
func TestWalksDoNotFollowLinks(t *testing.T) {
	ctx := context.Background()
	p := plant(t)
	if err := os.Truncate(filepath.Join(p.decoy, "secret.txt"), 50<<20); err != nil {
		t.Fatal(err)
	}
	used, err := p.s.Usage(ctx, scopeA)
	if err != nil || used != 0 {
		t.Errorf("Usage = %d, %v; want 0 (links are not followed)", used, err)
	}
	sum, err := p.s.Summary(ctx, scopeA, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sum.Files {
		if !f.Link {
			t.Errorf("summary lists %+v, want only the planted links", f)
		}
	}
	if len(sum.Files) != 16 {
		t.Errorf("summary lists %d entries, want the 16 links", len(sum.Files))
	}
}

func TestLinksInsideWork(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	if _, err := s.Save(ctx, scopeA, "run3", "result.txt", strings.NewReader("ok")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run3", filepath.Join(areaDir(s, scopeA, Uploads), "latest")); err != nil {
		t.Fatal(err)
	}
	f, fi, err := s.Open(ctx, scopeA, Uploads, "latest/result.txt")
	if err != nil {
		t.Fatalf("Open through a link that stays inside: %v", err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "ok" || fi.Size() != 2 {
		t.Errorf("read %q (%d bytes), want \"ok\"", data, fi.Size())
	}
	saved, err := s.Save(ctx, scopeA, "latest", "more.txt", strings.NewReader("x"))
	if err != nil || saved.Path != "latest/more.txt" {
		t.Fatalf("Save through a link that stays inside = %+v, %v", saved, err)
	}
	if _, err := os.Stat(filepath.Join(areaDir(s, scopeA, Uploads), "run3", "more.txt")); err != nil {
		t.Errorf("the file is not in the linked directory: %v", err)
	}
}

// FIFOs are refused without blocking the engine.
func TestFIFOsDoNotBlock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	fifo := filepath.Join(areaDir(s, scopeA, Uploads), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	if _, _, err := s.Open(ctx, scopeA, Uploads, "pipe"); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("Open(fifo) = %v, want ErrInvalidPath", err)
	}
	if _, err := s.List(ctx, scopeA, Uploads, "pipe"); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("List(fifo) = %v, want ErrInvalidPath", err)
	}
	if _, err := s.Save(ctx, scopeA, "pipe", "x.txt", strings.NewReader("x")); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("Save into a fifo = %v, want ErrInvalidPath", err)
	}
	sum, err := s.Summary(ctx, scopeA, 10)
	if err != nil || !sum.Empty() {
		t.Errorf("Summary with only a FIFO = %+v, %v; want empty", sum, err)
	}
	if _, err := s.Usage(ctx, scopeA); err != nil {
		t.Errorf("Usage with a FIFO: %v", err)
	}
}

package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

func writeFile(t *testing.T, p string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	// A chat without a workspace has empty areas, and List creates none.
	for _, area := range []Area{Uploads, Intermediate} {
		entries, err := s.List(ctx, scopeA, area, "")
		if err != nil || entries == nil || len(entries) != 0 {
			t.Errorf("List(%s) of a new chat = %v, %v; want an empty list", area, entries, err)
		}
	}
	if _, err := os.Lstat(s.chatDir(scopeA.SandboxID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("List created the chat's directory: %v", err)
	}
	if _, err := s.List(ctx, scopeA, Uploads, "sub"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("List(sub) of a new chat = %v, want ErrNotFound", err)
	}

	mustMounts(t, s, scopeA)
	in := areaDir(s, scopeA, Intermediate)
	writeFile(t, filepath.Join(in, "b.txt"), 3)
	writeFile(t, filepath.Join(in, "a.txt"), 1)
	writeFile(t, filepath.Join(in, "z", "deep.txt"), 5)
	if err := os.Symlink("a.txt", filepath.Join(in, "link")); err != nil {
		t.Fatal(err)
	}
	entries, err := s.List(ctx, scopeA, Intermediate, "/workspace/intermediate")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s %s %s %d dir=%v link=%v", e.Name, e.Path, e.SandboxPath, e.Size, e.IsDir, e.Link))
		if e.ModTime.IsZero() {
			t.Errorf("%s has no modification time", e.Name)
		}
	}
	want := []string{
		"z z /workspace/intermediate/z " + fmt.Sprint(entries[0].Size) + " dir=true link=false",
		"a.txt a.txt /workspace/intermediate/a.txt 1 dir=false link=false",
		"b.txt b.txt /workspace/intermediate/b.txt 3 dir=false link=false",
		"link link /workspace/intermediate/link 5 dir=false link=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("List =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	sub, err := s.List(ctx, scopeA, Intermediate, "z")
	if err != nil || len(sub) != 1 || sub[0].Path != "z/deep.txt" || sub[0].SandboxPath != "/workspace/intermediate/z/deep.txt" {
		t.Errorf("List(z) = %+v, %v; want z/deep.txt", sub, err)
	}
	if _, err := s.List(ctx, scopeA, Intermediate, "a.txt"); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("List of a file = %v, want ErrInvalidPath", err)
	}
	if _, err := s.List(ctx, scopeA, "skills", ""); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("List of an unknown area = %v, want ErrInvalidPath", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	if _, _, err := s.Open(ctx, scopeA, Uploads, "x.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Open in a new chat = %v, want ErrNotFound", err)
	}
	if _, err := s.Save(ctx, scopeA, "d", "x.txt", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	f, fi, err := s.Open(ctx, scopeA, Uploads, "/workspace/uploads/d/x.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "hello" || fi.Size() != 5 || fi.Name() != "x.txt" {
		t.Errorf("Open = %q, %d bytes, name %q; want hello, 5, x.txt", data, fi.Size(), fi.Name())
	}
	tests := []struct {
		path string
		want error
	}{
		{"d", sandbox.ErrInvalidPath},
		{"", sandbox.ErrInvalidPath},
		{"d/missing", sandbox.ErrNotFound},
		{"d/x.txt/more", sandbox.ErrInvalidPath},
		{"../intermediate/x", sandbox.ErrInvalidPath},
	}
	for _, tt := range tests {
		if _, _, err := s.Open(ctx, scopeA, Uploads, tt.path); !errors.Is(err, tt.want) {
			t.Errorf("Open(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Config{})
	mustMounts(t, s, scopeA)
	in := areaDir(s, scopeA, Intermediate)
	writeFile(t, filepath.Join(in, "a.txt"), 1)
	writeFile(t, filepath.Join(in, "out", "x", "y.txt"), 1)
	if err := os.Mkdir(filepath.Join(in, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a.txt", "out", "/workspace/intermediate/empty"} {
		if err := s.Delete(ctx, scopeA, Intermediate, p); err != nil {
			t.Errorf("Delete(%s): %v", p, err)
		}
	}
	if entries, _ := os.ReadDir(in); len(entries) != 0 {
		t.Errorf("intermediate holds %d entries after deleting them all", len(entries))
	}
	tests := []struct {
		path string
		want error
	}{
		{"a.txt", sandbox.ErrNotFound},
		{"", sandbox.ErrInvalidPath},
		{"/workspace/intermediate", sandbox.ErrInvalidPath},
		{"..", sandbox.ErrInvalidPath},
		{"/workspace/uploads/x", sandbox.ErrInvalidPath},
	}
	for _, tt := range tests {
		if err := s.Delete(ctx, scopeA, Intermediate, tt.path); !errors.Is(err, tt.want) {
			t.Errorf("Delete(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
	if _, err := os.Stat(in); err != nil {
		t.Errorf("the area itself is gone: %v", err)
	}
}

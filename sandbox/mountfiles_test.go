package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// TestMountFiles: the file operations on a chat's mounts are served from
// their host directories, through the chain, without creating the
// sandbox; a read-only mount refuses writes; links planted in a mount
// lead nowhere outside it; a listing of /workspace shows the mounts.
func TestMountFiles(t *testing.T) {
	ctx := context.Background()
	uploads, skills := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(uploads, "data.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(skills, "csv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skills, "csv", "SKILL.md"), []byte("---\nname: csv\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(uploads, "etc")); err != nil {
		t.Fatal(err)
	}
	p := newScripted(t, func(context.Context, sandbox.ExecRequest, *sandbox.Collector) int { return 0 })
	var calls atomic.Int32
	counter := sandbox.Middleware{File: func(next sandbox.FileFunc) sandbox.FileFunc {
		return func(ctx context.Context, call *sandbox.FileCall) (sandbox.FileResult, error) {
			calls.Add(1)
			return next(ctx, call)
		}
	}}
	m := newManager(t, sandbox.Config{Provider: p, Middleware: []sandbox.Middleware{counter},
		MountsFor: func(context.Context, sandbox.Scope) ([]sandbox.Mount, error) {
			return []sandbox.Mount{{Source: uploads, Target: sandbox.UploadsDir}, {Source: skills, Target: sandbox.SkillsDir, ReadOnly: true}}, nil
		}})
	scope := sandbox.Scope{AppID: "app", UserID: "u", ChatID: "mounts"}
	files, err := m.Files(ctx, scope, sandbox.Actor{UserID: "u", Kind: sandbox.ActorFiles})
	if err != nil {
		t.Fatal(err)
	}

	list, err := files.List(ctx, "/workspace/uploads")
	var paths []string
	for _, e := range list {
		paths = append(paths, e.Path)
	}
	if err != nil || !slices.Equal(paths, []string{"/workspace/uploads/data.csv", "/workspace/uploads/etc"}) {
		t.Errorf("list uploads = %v, %v", paths, err)
	}
	if data, err := files.ReadFile(ctx, "uploads/data.csv", 1<<20); err != nil || string(data) != "a,b\n1,2\n" {
		t.Errorf("read uploads/data.csv = %q, %v", data, err)
	}
	if err := files.WriteFile(ctx, "/workspace/uploads/out/result.txt", []byte("done")); err != nil {
		t.Errorf("write into uploads: %v", err)
	} else if b, _ := os.ReadFile(filepath.Join(uploads, "out", "result.txt")); string(b) != "done" {
		t.Errorf("the write did not reach the host directory: %q", b)
	}
	if _, err := files.ReadFile(ctx, "/workspace/uploads/etc/passwd", 1<<20); !errors.Is(err, sandbox.ErrInvalidPath) {
		t.Errorf("read through a link out of the mount: %v, want ErrInvalidPath", err)
	}
	if st, err := files.Stat(ctx, "/workspace/skills/csv/SKILL.md"); err != nil || st.Path != "/workspace/skills/csv/SKILL.md" {
		t.Errorf("stat a skill file = %+v, %v", st, err)
	}
	if err := files.WriteFile(ctx, "/workspace/skills/csv/SKILL.md", []byte("x")); !errors.Is(err, sandbox.ErrReadOnly) {
		t.Errorf("write into the read-only skills: %v, want ErrReadOnly", err)
	}
	if _, err := m.Lookup(ctx, scope); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the mounts' files created the sandbox: Lookup = %v", err)
	}
	if calls.Load() != 6 {
		t.Errorf("%d file calls went through the chain, want all 6", calls.Load())
	}

	// Listing /workspace itself needs the sandbox, and shows the mounts.
	root, err := files.List(ctx, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range root {
		names = append(names, e.Name+":"+e.Type)
	}
	if !slices.Contains(names, "uploads:directory") || !slices.Contains(names, "skills:directory") {
		t.Errorf("list /workspace = %v, want the mounts among them", names)
	}
}

package sandboxtest

// The engine's directories mounted into a sandbox: the uploads, the
// intermediate files and the read-only skills.

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// mountDirs are a chat's host directories as the engine makes them: the
// uploads with a file the user sent, the intermediate files, and the
// skills with one skill.
type mountDirs struct{ uploads, intermediate, skills string }

func newMountDirs(t *testing.T) mountDirs {
	t.Helper()
	root := t.TempDir()
	d := mountDirs{filepath.Join(root, "uploads"), filepath.Join(root, "intermediate"), filepath.Join(root, "skills")}
	for _, dir := range []string{d.uploads, d.intermediate, d.skills} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(d.uploads, "report.csv"), "a,b\n1,2\n")
	writeFile(t, filepath.Join(d.skills, "summarise.md"), "# Summarise\n")
	return d
}

func (d mountDirs) mounts() []sandbox.Mount {
	return []sandbox.Mount{
		{Source: d.uploads, Target: sandbox.UploadsDir},
		{Source: d.intermediate, Target: sandbox.IntermediateDir},
		{Source: d.skills, Target: sandbox.SkillsDir, ReadOnly: true},
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantFile fails the test unless the host file at path holds want.
func wantFile(t *testing.T, path, want, why string) {
	t.Helper()
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Errorf("%s: host file %s = %q, %v; want %q", why, path, got, err, want)
	}
}

// testMounts holds a provider to the spec's mounts: the sandbox sees the
// engine's directories where the spec says, writes through the writable
// ones, cannot write through a read-only one, keeps them across a
// restart, and leaves them to the engine when it is deleted.
func testMounts(t *testing.T, h Harness) {
	p := h.New(t)
	ctx := ctxFor(t)
	dirs := newMountDirs(t)
	id := NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Mounts: dirs.mounts()}); err != nil {
		t.Fatalf("Ensure with mounts: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	isolated := p.Capabilities().FilesystemIsolation
	// in is a mount's path as commands name it. Without filesystem
	// isolation there is no /workspace: the workspace is HOME.
	in := func(target, name string) string {
		if !isolated {
			target = "$HOME" + strings.TrimPrefix(target, sandbox.WorkspaceDir)
		}
		return `"` + target + "/" + name + `"`
	}

	check := func(t *testing.T, when string) {
		if res := run(t, p, id, "cat "+in(sandbox.UploadsDir, "report.csv"), 10*time.Second); res.Stdout != "a,b\n1,2\n" || res.ExitCode != 0 {
			t.Errorf("%s: an upload the engine wrote before the sandbox existed: %+v, want its content", when, res)
		}
		// Written between commands: the sandbox sees the directory, not a
		// copy of it.
		late := "late-" + strings.ReplaceAll(when, " ", "-") + ".txt"
		writeFile(t, filepath.Join(dirs.uploads, late), when+"\n")
		if res := run(t, p, id, "cat "+in(sandbox.UploadsDir, late), 10*time.Second); res.Stdout != when+"\n" {
			t.Errorf("%s: an upload the engine wrote after the sandbox started: %+v, want %q", when, res, when+"\n")
		}
		out := "out-" + strings.ReplaceAll(when, " ", "-") + ".txt"
		if res := run(t, p, id, "echo made > "+in(sandbox.IntermediateDir, out), 10*time.Second); res.ExitCode != 0 {
			t.Errorf("%s: write into %s: %+v", when, sandbox.IntermediateDir, res)
		}
		wantFile(t, filepath.Join(dirs.intermediate, out), "made\n", when+": a file the sandbox wrote into "+sandbox.IntermediateDir)
		if res := run(t, p, id, "ls "+in(sandbox.SkillsDir, ""), 10*time.Second); res.Stdout != "summarise.md\n" {
			t.Errorf("%s: ls %s: %+v, want the skill's file", when, sandbox.SkillsDir, res)
		}
		t.Run("SkillsReadOnly "+when, func(t *testing.T) {
			needs(t, p, isolated, "filesystem isolation, which read-only mounts need")
			for _, command := range []string{
				"echo planted > " + in(sandbox.SkillsDir, "planted.md"),
				"echo changed >> " + in(sandbox.SkillsDir, "summarise.md"),
				"rm " + in(sandbox.SkillsDir, "summarise.md"),
				"mkdir " + in(sandbox.SkillsDir, "new"),
			} {
				res := run(t, p, id, command, 10*time.Second)
				if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only file system") {
					t.Errorf("%s: %q in a read-only mount: exit %d, stderr %q; want a failure for a read-only file system", when, command, res.ExitCode, res.Stderr)
				}
			}
			entries, err := os.ReadDir(dirs.skills)
			if err != nil || len(entries) != 1 {
				t.Errorf("%s: the skills on the host after the sandbox's writes: %v, %v; want summarise.md alone", when, entries, err)
			}
			wantFile(t, filepath.Join(dirs.skills, "summarise.md"), "# Summarise\n", when+": a skill the sandbox tried to change")
		})
	}
	check(t, "first start")

	// A ZIP of /workspace holds the writable mounts' files (E4).
	t.Run("ZipHoldsMounts", func(t *testing.T) {
		needs(t, p, isolated, "filesystem isolation, which gives the mounts a place in /workspace")
		files, err := p.Files(ctx, id)
		if err != nil {
			t.Fatalf("Files: %v", err)
		}
		var buf bytes.Buffer
		if err := files.Zip(ctx, sandbox.WorkspaceDir, &buf); err != nil {
			t.Fatalf("Zip: %v", err)
		}
		zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("zip is not readable: %v", err)
		}
		names := map[string]bool{}
		for _, f := range zr.File {
			names[f.Name] = true
		}
		for _, want := range []string{"workspace/uploads/report.csv", "workspace/intermediate/out-first-start.txt"} {
			if !names[want] {
				t.Errorf("the ZIP of /workspace lacks %s; has %v", want, names)
			}
		}
	})

	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// No mounts in this spec: the sandbox keeps those it was created with.
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure after Stop: %v", err)
	}
	check(t, "after restart")

	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := h.Leftovers(t, p, id); len(left) > 0 {
		t.Errorf("Delete left behind: %q", left)
	}
	// The directories are the engine's: deleting the sandbox leaves them.
	wantFile(t, filepath.Join(dirs.uploads, "report.csv"), "a,b\n1,2\n", "after Delete")
	wantFile(t, filepath.Join(dirs.intermediate, "out-after-restart.txt"), "made\n", "after Delete")
	wantFile(t, filepath.Join(dirs.skills, "summarise.md"), "# Summarise\n", "after Delete")
}

// testMountsRefused: a spec with a bad mount is refused before anything
// is created, with an error that names the mount.
func testMountsRefused(t *testing.T, h Harness) {
	p := h.New(t)
	dirs := newMountDirs(t)
	file := filepath.Join(dirs.uploads, "report.csv")
	tests := []struct {
		name   string
		mounts []sandbox.Mount
		names  string // what the error must mention
	}{
		{"relative source", []sandbox.Mount{{Source: "uploads", Target: sandbox.UploadsDir}}, `"uploads"`},
		{"missing source", []sandbox.Mount{{Source: filepath.Join(dirs.uploads, "missing"), Target: sandbox.UploadsDir}}, "missing"},
		{"source is a file", []sandbox.Mount{{Source: file, Target: sandbox.UploadsDir}}, "report.csv"},
		{"target outside the workspace", []sandbox.Mount{{Source: dirs.skills, Target: "/etc/skills"}}, "/etc/skills"},
		{"target beside the workspace", []sandbox.Mount{{Source: dirs.skills, Target: "/workspace2/skills"}}, "/workspace2/skills"},
		{"target is the workspace", []sandbox.Mount{{Source: dirs.skills, Target: sandbox.WorkspaceDir}}, sandbox.WorkspaceDir},
		{"target leaves the workspace", []sandbox.Mount{{Source: dirs.skills, Target: "/workspace/../etc"}}, "/workspace/../etc"},
		{"relative target", []sandbox.Mount{{Source: dirs.skills, Target: "skills"}}, `"skills"`},
		{"two mounts at one target", []sandbox.Mount{{Source: dirs.uploads, Target: sandbox.UploadsDir}, {Source: dirs.intermediate, Target: sandbox.UploadsDir}}, dirs.intermediate},
		{"a mount inside another", []sandbox.Mount{{Source: dirs.skills, Target: sandbox.SkillsDir}, {Source: dirs.uploads, Target: sandbox.SkillsDir + "/uploads"}}, sandbox.SkillsDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			id := NewID(t)
			t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
			err := p.Ensure(ctx, sandbox.Spec{ID: id, Mounts: tc.mounts})
			if err == nil || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("Ensure with %+v: err = %v; want an error that names %s", tc.mounts, err, tc.names)
			}
			if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusMissing {
				t.Errorf("Status after a refused Ensure = %q, %v; want %q", st, err, sandbox.StatusMissing)
			}
		})
	}
}

package sandbox_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
)

// zipOnly hides every method of a provider's Files but the interface's,
// as an older Kubernetes agent would: it archives the mounts it sees in
// the sandbox, and ignores which ones to skip.
type zipOnly struct{ sandbox.Files }

type zipOnlyProvider struct{ *scripted }

func (p zipOnlyProvider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	f, err := p.scripted.Files(ctx, id)
	if err != nil {
		return nil, err
	}
	return zipOnly{f}, nil
}

// skipper is a provider's Files as the Kubernetes agent's: it archives
// in the sandbox, leaving out what it is asked to.
type skipper struct {
	sandbox.Files
	z sandbox.ZipSkipper
}

func (s skipper) ZipSkipping(ctx context.Context, p string, w io.Writer, skip []string) error {
	return s.z.ZipSkipping(ctx, p, w, skip)
}

type skipperProvider struct{ *scripted }

func (p skipperProvider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	f, err := p.scripted.Files(ctx, id)
	if err != nil {
		return nil, err
	}
	return skipper{zipOnly{f}, f.(sandbox.ZipSkipper)}, nil
}

// zipEntries reads an archive into its entries' names (directories end
// in "/") and contents.
func zipEntries(t *testing.T, b []byte) ([]string, map[string]string) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a ZIP: %v", err)
	}
	var names []string
	got := map[string]string{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatalf("open %s: %v", f.Name, err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		got[f.Name] = string(data)
	}
	sort.Strings(names)
	return names, got
}

// TestZipAboveMounts (E4): a ZIP of /workspace, or of a directory above a
// mount, holds the writable mounts' files from their host directories at
// their paths, and not the skills, whether the provider streams its part
// or sends a whole archive that still holds the mounts (an older agent);
// links planted in the mounts lead nowhere, to /etc, up with "..", or to
// another chat's directory; listings show the mounts as they are, the
// skills read-only.
func TestZipAboveMounts(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(*scripted) sandbox.Provider
	}{
		{"streamed", func(p *scripted) sandbox.Provider { return p }},
		{"spooled from an archive with the mounts", func(p *scripted) sandbox.Provider { return zipOnlyProvider{p} }},
		{"spooled from an archive without them", func(p *scripted) sandbox.Provider { return skipperProvider{p} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			chats := t.TempDir()
			uploads, inter := filepath.Join(chats, "c1", "uploads"), filepath.Join(chats, "c1", "intermediate")
			other := filepath.Join(chats, "c2", "uploads")
			skills := t.TempDir()
			for _, f := range []struct{ path, content string }{
				{filepath.Join(uploads, "data.csv"), "a,b\n1,2\n"},
				{filepath.Join(inter, "run", "result.txt"), "42\n"},
				{filepath.Join(other, "secret.txt"), "another chat's"},
				{filepath.Join(skills, "csv", "SKILL.md"), "---\nname: csv\n---\n"},
			} {
				if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for link, to := range map[string]string{
				filepath.Join(uploads, "etc"):     "/etc",
				filepath.Join(uploads, "up"):      "../..",
				filepath.Join(inter, "neighbour"): other,
				filepath.Join(inter, "sibling"):   "../../c2/uploads",
				filepath.Join(inter, "passwd"):    "/etc/passwd",
			} {
				if err := os.Symlink(to, link); err != nil {
					t.Fatal(err)
				}
			}
			p := newScripted(t, func(context.Context, sandbox.ExecRequest, *sandbox.Collector) int { return 0 })
			m := newManager(t, sandbox.Config{Provider: tc.wrap(p),
				MountsFor: func(context.Context, sandbox.Scope) ([]sandbox.Mount, error) {
					return []sandbox.Mount{
						{Source: uploads, Target: sandbox.UploadsDir},
						{Source: inter, Target: sandbox.IntermediateDir},
						{Source: skills, Target: sandbox.SkillsDir, ReadOnly: true},
					}, nil
				}})
			scope := sandbox.Scope{AppID: "app", UserID: "u", ChatID: "zip"}
			files, err := m.Files(ctx, scope, sandbox.Actor{UserID: "u", Kind: sandbox.ActorFiles})
			if err != nil {
				t.Fatal(err)
			}
			if err := files.WriteFile(ctx, "notes/todo.md", []byte("- ship\n")); err != nil {
				t.Fatal(err)
			}
			// What a provider shows at the mount points: empty directories,
			// or (an agent in the sandbox) the mounts' own files.
			ws := filepath.Join(p.root, scope.SandboxID())
			for _, f := range []string{"uploads/data.csv", "skills/csv/SKILL.md", "intermediate/stale.txt"} {
				os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755)
				if err := os.WriteFile(filepath.Join(ws, f), []byte("the sandbox's view"), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			var buf bytes.Buffer
			if err := files.Zip(ctx, "/workspace", &buf); err != nil {
				t.Fatalf("zip /workspace: %v", err)
			}
			names, got := zipEntries(t, buf.Bytes())
			want := []string{"workspace/", "workspace/intermediate/", "workspace/intermediate/run/", "workspace/intermediate/run/result.txt",
				"workspace/notes/", "workspace/notes/todo.md", "workspace/uploads/", "workspace/uploads/data.csv"}
			if !slices.Equal(names, want) {
				t.Errorf("entries of the ZIP of /workspace:\n got %v\nwant %v", names, want)
			}
			if got["workspace/uploads/data.csv"] != "a,b\n1,2\n" || got["workspace/intermediate/run/result.txt"] != "42\n" || got["workspace/notes/todo.md"] != "- ship\n" {
				t.Errorf("contents %q", got)
			}
			for name, content := range got {
				if strings.Contains(content, "root:") || strings.Contains(content, "another chat's") {
					t.Errorf("%s holds what a link outside leads to: %q", name, content)
				}
			}

			// The mount itself, and a directory in it, archive the same way.
			buf.Reset()
			if err := files.Zip(ctx, "/workspace/intermediate", &buf); err != nil {
				t.Fatalf("zip intermediate: %v", err)
			}
			if names, _ := zipEntries(t, buf.Bytes()); !slices.Equal(names, []string{"intermediate/", "intermediate/run/", "intermediate/run/result.txt"}) {
				t.Errorf("entries of the ZIP of intermediate: %v", names)
			}

			// Listings: the mounts as they are, the skills read-only; the
			// links lead nowhere.
			root, err := files.List(ctx, "/workspace")
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, e := range root {
				listed = append(listed, e.Name+":"+e.Type+":"+map[bool]string{true: "ro", false: "rw"}[e.ReadOnly])
			}
			if want := []string{"intermediate:directory:rw", "notes:directory:rw", "skills:directory:ro", "uploads:directory:rw"}; !slices.Equal(listed, want) {
				t.Errorf("list /workspace = %v, want %v", listed, want)
			}
			skill, err := files.List(ctx, "/workspace/skills/csv")
			if err != nil || len(skill) != 1 || !skill[0].ReadOnly {
				t.Errorf("list a skill = %+v, %v; want SKILL.md read-only", skill, err)
			}
			if st, err := files.Stat(ctx, "/workspace/skills/csv/SKILL.md"); err != nil || !st.ReadOnly {
				t.Errorf("stat a skill's file = %+v, %v; want read-only", st, err)
			}
			if st, err := files.Stat(ctx, "/workspace/uploads/data.csv"); err != nil || st.ReadOnly {
				t.Errorf("stat an upload = %+v, %v; want writable", st, err)
			}
			for _, at := range []string{"uploads/etc", "uploads/up", "intermediate/neighbour", "intermediate/sibling"} {
				if l, err := files.List(ctx, at); !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Errorf("list %s (a link outside) = %v, %v; want ErrInvalidPath", at, l, err)
				}
			}
			if _, err := files.ReadFile(ctx, "intermediate/passwd", 1<<20); !errors.Is(err, sandbox.ErrInvalidPath) {
				t.Errorf("read intermediate/passwd (a link to /etc/passwd) = %v; want ErrInvalidPath", err)
			}
		})
	}
}

package skills_test

import (
	"archive/zip"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox/skills"
)

func newCatalog(t *testing.T, cfg skills.Config) *skills.Catalog {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	c, err := skills.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// skillMD is a valid SKILL.md for name, with body after the front matter.
func skillMD(name, body string) string {
	return "---\nname: " + name + "\ndescription: Test skill " + name + ".\n---\n" + body
}

// zfile is one entry of a test archive.
type zfile struct {
	name string
	body string
	mode fs.FileMode // 0: a regular 0644 file, or a directory when name ends with /
}

func zipOf(t *testing.T, files ...zfile) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate}
		switch {
		case f.mode != 0:
			h.SetMode(f.mode)
		case strings.HasSuffix(f.name, "/"):
			h.SetMode(fs.ModeDir | 0o755)
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatalf("zip %s: %v", f.name, err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func install(c *skills.Catalog, data []byte, by string) (skills.Skill, error) {
	return c.Install(context.Background(), bytes.NewReader(data), int64(len(data)), by)
}

func mustInstall(t *testing.T, c *skills.Catalog, data []byte) skills.Skill {
	t.Helper()
	s, err := install(c, data, "admin")
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	return s
}

// writeTree writes files (path → content) under dir, as an admin placing a
// skill by hand would.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// dirNames lists a directory's entry names, nil when it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

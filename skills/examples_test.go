package skills_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"testing"

	catalog "github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/skills"
)

// TestEveryExampleIsEmbedded: each folder here is offered, described by
// its SKILL.md, and packs as the folder itself does, scripts executable.
func TestEveryExampleIsEmbedded(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	examples, err := skills.Examples()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range examples {
		names = append(names, e.Name)
		if e.Description == "" {
			t.Errorf("%s has no description", e.Name)
		}
	}
	if !slices.Equal(names, dirs) {
		t.Fatalf("embedded %v, folders %v: embed every example (examples.go)", names, dirs)
	}
	for _, name := range dirs {
		embedded, err := skills.Zip(name)
		if err != nil {
			t.Fatal(err)
		}
		fromDisk, err := catalog.ZipDir(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := entriesOf(t, embedded), entriesOf(t, fromDisk); !slices.Equal(got, want) {
			t.Errorf("%s: embedded archive %v, the folder's %v", name, got, want)
		}
	}
	if _, err := skills.Zip("no-such-example"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Zip(no-such-example) = %v, want fs.ErrNotExist", err)
	}
	if _, err := skills.Zip("../skills"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Zip(../skills) = %v, want fs.ErrNotExist", err)
	}
}

// entriesOf lists an archive's entries with their executable bit and size.
func entriesOf(t *testing.T, archive []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range zr.File {
		mode := "-"
		if f.Mode()&0o111 != 0 && !f.Mode().IsDir() {
			mode = "x"
		}
		out = append(out, f.Name+" "+mode+" "+strconv.FormatUint(f.UncompressedSize64, 10))
	}
	slices.Sort(out)
	return out
}

package skills_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox/skills"
)

// versionZip is skill s whose description and references/version.txt
// both say label.
func versionZip(t *testing.T, label string) []byte {
	t.Helper()
	return zipOf(t,
		zfile{name: "s/SKILL.md", body: "---\nname: s\ndescription: Version " + label + ".\n---\nBody " + label + "\n"},
		zfile{name: "s/references/version.txt", body: label},
	)
}

func versionNumbers(vs []skills.Version) (numbers []int, current int) {
	for _, v := range vs {
		numbers = append(numbers, v.Number)
		if v.Current {
			current = v.Number
		}
	}
	return numbers, current
}

func TestVersionsKeptAndPruned(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newCatalog(t, skills.Config{Root: root, KeepVersions: 2, Now: func() time.Time { return now }})
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		now = now.Add(time.Minute)
		s, err := install(c, versionZip(t, strconv.Itoa(i)), fmt.Sprintf("admin%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if s.Version != i || s.InstalledBy != fmt.Sprintf("admin%d", i) || !s.InstalledAt.Equal(now) {
			t.Fatalf("install %d returned version %d by %q at %v", i, s.Version, s.InstalledBy, s.InstalledAt)
		}
	}
	vs, err := c.Versions(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if numbers, current := versionNumbers(vs); !reflect.DeepEqual(numbers, []int{3, 4, 5}) || current != 5 {
		t.Errorf("Versions = %+v, want 3 and 4 kept and 5 current", vs)
	}
	if vs[0].InstalledBy != "admin3" || vs[0].Size != int64(len("---\nname: s\ndescription: Version 3.\n---\nBody 3\n")+1) {
		t.Errorf("version 3's record = %+v", vs[0])
	}
	if got := dirNames(t, filepath.Join(root, "skill-versions", "s")); !reflect.DeepEqual(got, []string{"3", "4", "manifest.json"}) {
		t.Errorf("R/skill-versions/s holds %v, want 3, 4 and manifest.json", got)
	}
	for n, want := range map[string]string{"3": "3", "4": "4"} {
		if data, err := os.ReadFile(filepath.Join(root, "skill-versions", "s", n, "references", "version.txt")); err != nil || string(data) != want {
			t.Errorf("kept version %s holds %q, %v", n, data, err)
		}
	}
	s, err := c.Get(ctx, "s")
	if err != nil || s.Version != 5 || s.Description != "Version 5." || s.InstalledBy != "admin5" || !s.InstalledAt.Equal(now) {
		t.Errorf("Get = %+v, %v; want version 5 by admin5", s, err)
	}
	if names := dirNames(t, filepath.Join(root, ".staging")); len(names) != 0 {
		t.Errorf("R/.staging holds %v", names)
	}

	if err := c.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "s"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := c.Versions(ctx, "s"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("Versions after Delete: %v, want ErrNotFound", err)
	}
	if got := dirNames(t, filepath.Join(root, "skill-versions")); len(got) != 0 {
		t.Errorf("R/skill-versions holds %v after Delete", got)
	}
	if err := c.Delete(ctx, "s"); !errors.Is(err, skills.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if s := mustInstall(t, c, versionZip(t, "again")); s.Version != 1 {
		t.Errorf("reinstall after Delete has version %d, want 1", s.Version)
	}
}

func TestKeepNoVersions(t *testing.T) {
	root := t.TempDir()
	c := newCatalog(t, skills.Config{Root: root, KeepVersions: -1})
	for i := 1; i <= 3; i++ {
		mustInstall(t, c, versionZip(t, strconv.Itoa(i)))
	}
	if got := dirNames(t, filepath.Join(root, "skill-versions", "s")); !reflect.DeepEqual(got, []string{"manifest.json"}) {
		t.Errorf("R/skill-versions/s holds %v, want only the manifest", got)
	}
}

func TestReplaceHandPlacedSkill(t *testing.T) {
	root := t.TempDir()
	c := newCatalog(t, skills.Config{Root: root})
	ctx := context.Background()
	writeTree(t, filepath.Join(c.Dir(), "s"), map[string]string{"SKILL.md": skillMD("s", "by hand"), "references/version.txt": "hand"})
	s, err := c.Get(ctx, "s")
	if err != nil || s.Version != 0 || s.InstalledBy != "" {
		t.Fatalf("Get of a hand-placed skill = %+v, %v; want version 0 and no installer", s, err)
	}
	if s := mustInstall(t, c, versionZip(t, "zip")); s.Version != 2 {
		t.Errorf("installed version %d, want 2 (the hand-placed tree is 1)", s.Version)
	}
	vs, err := c.Versions(ctx, "s")
	if numbers, current := versionNumbers(vs); err != nil || !reflect.DeepEqual(numbers, []int{1, 2}) || current != 2 || vs[0].InstalledBy != "" {
		t.Errorf("Versions = %+v, %v; want hand-placed 1 kept and 2 current", vs, err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "skill-versions", "s", "1", "references", "version.txt")); err != nil || string(data) != "hand" {
		t.Errorf("kept hand-placed version holds %q, %v", data, err)
	}

	// A broken tree under a malformed name can be deleted too.
	writeTree(t, filepath.Join(c.Dir(), "Broken_One"), map[string]string{"notes.txt": "x"})
	if err := c.Delete(ctx, "Broken_One"); err != nil {
		t.Errorf("Delete of an invalid hand-placed directory: %v", err)
	}
	for _, bad := range []string{"../s", "..", "", "a/b"} {
		if err := c.Delete(ctx, bad); !errors.Is(err, skills.ErrInvalid) {
			t.Errorf("Delete(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := c.Get(ctx, "s"); err != nil {
		t.Errorf("s after refused deletions: %v", err)
	}
}

// TestReplaceWhileReading: an open file of the old version keeps its
// content, new readers see the new version, and at no moment of repeated
// installs is the skill missing, invalid or paired with another version's
// record.
func TestReplaceWhileReading(t *testing.T) {
	c := newCatalog(t, skills.Config{KeepVersions: 1})
	ctx := context.Background()
	mustInstall(t, c, versionZip(t, "1"))

	old, err := os.Open(filepath.Join(c.Dir(), "s", "references", "version.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// Enough installs that the version the open file belongs to is pruned.
	mustInstall(t, c, versionZip(t, "2"))
	mustInstall(t, c, versionZip(t, "3"))
	if data, err := os.ReadFile(old.Name()); err != nil || string(data) != "3" {
		t.Errorf("a new reader of the path gets %q, %v; want 3", data, err)
	}
	buf := make([]byte, 10)
	if n, err := old.ReadAt(buf, 0); string(buf[:n]) != "1" {
		t.Errorf("the file opened before the replacements reads %q (%v), want 1", buf[:n], err)
	}

	const installs = 20
	stop := make(chan struct{})
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := c.Get(ctx, "s")
				if err != nil {
					report(fmt.Errorf("Get during installs: %w", err))
					return
				}
				// One Get sees one tree and that tree's own record.
				if want := fmt.Sprintf("Version %d.", s.Version); s.Description != want {
					report(fmt.Errorf("Get returned version %d with the description %q", s.Version, s.Description))
				}
				data, err := c.ReadResource(ctx, "s", "references/version.txt")
				if err != nil {
					report(fmt.Errorf("ReadResource during installs: %w", err))
					return
				}
				n, _ := strconv.Atoi(string(data))
				if n < last || n < s.Version {
					report(fmt.Errorf("read version %d after %d (Get said %d)", n, last, s.Version))
				}
				last = n
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			list, invalid, err := c.List(ctx)
			if err != nil || len(invalid) != 0 || len(list) != 1 || list[0].Name != "s" {
				report(fmt.Errorf("List during installs = %+v, invalid %+v, %v", list, invalid, err))
				return
			}
		}
	}()
	for i := 4; i < 4+installs; i++ {
		if s, err := install(c, versionZip(t, strconv.Itoa(i)), "admin"); err != nil || s.Version != i {
			t.Errorf("install %d: version %d, %v", i, s.Version, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestConcurrentInstallsAreSerialized: installs of one skill from many
// goroutines each get their own version number and the last one is live.
func TestConcurrentInstallsAreSerialized(t *testing.T) {
	root := t.TempDir()
	c := newCatalog(t, skills.Config{Root: root})
	// A second Catalog on the same root stands for another process: only
	// the lock file serializes the two.
	other := newCatalog(t, skills.Config{Root: root})
	ctx := context.Background()
	const workers, each = 4, 3
	var mu sync.Mutex
	byVersion := map[int]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cat := c
			if w%2 == 1 {
				cat = other
			}
			for i := range each {
				label := fmt.Sprintf("w%d-%d", w, i)
				s, err := install(cat, versionZip(t, label), label)
				if err != nil {
					t.Errorf("install %s: %v", label, err)
					return
				}
				mu.Lock()
				if prev, dup := byVersion[s.Version]; dup {
					t.Errorf("installs %s and %s both got version %d", prev, label, s.Version)
				}
				byVersion[s.Version] = label
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(byVersion) != workers*each {
		t.Fatalf("got %d distinct versions, want %d", len(byVersion), workers*each)
	}
	s, err := c.Get(ctx, "s")
	if err != nil || s.Version != workers*each || s.InstalledBy != byVersion[workers*each] || s.Description != "Version "+byVersion[workers*each]+"." {
		t.Errorf("live skill = %+v, %v; want version %d installed by %s", s, err, workers*each, byVersion[workers*each])
	}
	vs, err := c.Versions(ctx, "s")
	if numbers, _ := versionNumbers(vs); err != nil || !reflect.DeepEqual(numbers, []int{9, 10, 11, 12}) {
		t.Errorf("Versions = %v, %v; want 9 to 12", numbers, err)
	}
	for _, v := range vs[:3] {
		data, err := os.ReadFile(filepath.Join(root, "skill-versions", "s", strconv.Itoa(v.Number), "references", "version.txt"))
		if err != nil || string(data) != byVersion[v.Number] {
			t.Errorf("kept version %d holds %q (%v), want the content of install %s", v.Number, data, err, byVersion[v.Number])
		}
	}
	if names := dirNames(t, filepath.Join(root, ".staging")); len(names) != 0 {
		t.Errorf("R/.staging holds %v", names)
	}
}

func TestNewChecksRoot(t *testing.T) {
	if _, err := skills.New(skills.Config{}); err == nil || !strings.Contains(err.Error(), "Root is empty") {
		t.Errorf("New without a root: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeTree(t, filepath.Dir(file), map[string]string{"file": "x"})
	if _, err := skills.New(skills.Config{Root: file}); err == nil {
		t.Errorf("New on a regular file succeeded")
	}
	// What an interrupted install left behind long ago is removed.
	root := t.TempDir()
	newCatalog(t, skills.Config{Root: root})
	stale := filepath.Join(root, ".staging", "s-123")
	writeTree(t, stale, map[string]string{"SKILL.md": "x"})
	fresh := filepath.Join(root, ".staging", "s-456")
	writeTree(t, fresh, map[string]string{"SKILL.md": "x"})
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stale, old, old)
	newCatalog(t, skills.Config{Root: root})
	if got := dirNames(t, filepath.Join(root, ".staging")); !reflect.DeepEqual(got, []string{"s-456"}) {
		t.Errorf("R/.staging holds %v, want only the recent s-456", got)
	}
}

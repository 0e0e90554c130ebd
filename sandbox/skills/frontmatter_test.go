package skills_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/flowbox/flowbox/sandbox/skills"
)

func TestFrontMatter(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name    string
		dir     string
		skillMD string
		// wantField and wantRule are in the error when one is expected.
		wantField string
		wantRule  string
		check     func(t *testing.T, s skills.Skill)
	}{
		{name: "minimal", dir: "pdf", skillMD: "---\nname: pdf\ndescription: Work with PDF files.\n---\nBody.\n",
			check: func(t *testing.T, s skills.Skill) {
				if s.Description != "Work with PDF files." || s.License != "" || s.Metadata != nil || s.AllowedTools != nil {
					t.Errorf("got %+v", s)
				}
			}},
		{name: "every field", dir: "data-tool-2",
			skillMD: "---\nname: data-tool-2\ndescription: >\n  Folded\n  text.\nlicense: MIT\ncompatibility: python3\n" +
				"metadata:\n  author: someone\n  version: 1.0\nallowed-tools: Bash(git:*) Read\n---\n",
			check: func(t *testing.T, s skills.Skill) {
				want := skills.Skill{Name: "data-tool-2", Description: "Folded text.\n", License: "MIT", Compatibility: "python3",
					Metadata: map[string]string{"author": "someone", "version": "1.0"}, AllowedTools: []string{"Bash(git:*)", "Read"}}
				got := s
				got.Files, got.Size, got.InstalledAt, got.Version, got.InstalledBy = nil, 0, want.InstalledAt, 0, ""
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
				}
			}},
		{name: "CRLF and BOM", dir: "win", skillMD: "\ufeff---\r\nname: win\r\ndescription: Made on Windows.\r\n---\r\nBody\r\n"},
		{name: "description of 1024 characters", dir: "d", skillMD: "---\nname: d\ndescription: " + strings.Repeat("é", 1024) + "\n---\n"},
		{name: "name of 64 characters", dir: long(64), skillMD: "---\nname: " + long(64) + "\ndescription: d\n---\n"},

		{name: "no front matter", dir: "a", skillMD: "# Just markdown\n", wantField: "front matter", wantRule: "must begin with a line"},
		{name: "unterminated", dir: "a", skillMD: "---\nname: a\ndescription: d\n", wantField: "front matter", wantRule: "must begin with a line"},
		{name: "empty front matter", dir: "a", skillMD: "---\n---\nbody", wantField: "front matter", wantRule: "is empty"},
		{name: "not a mapping", dir: "a", skillMD: "---\n- name\n- description\n---\n", wantField: "front matter", wantRule: "must be a YAML mapping"},
		{name: "YAML syntax error", dir: "a", skillMD: "---\nname: [a\ndescription: d\n---\n", wantField: "front matter", wantRule: "not valid YAML"},
		{name: "duplicate key", dir: "a", skillMD: "---\nname: a\nname: a\ndescription: d\n---\n", wantField: "front matter", wantRule: "already defined"},
		{name: "alias", dir: "a", skillMD: "---\nname: &n a\ndescription: *n\n---\n", wantField: "front matter", wantRule: "anchor or alias"},
		{name: "name missing", dir: "a", skillMD: "---\ndescription: d\n---\n", wantField: "name", wantRule: "is required"},
		{name: "name uppercase", dir: "Pdf", skillMD: "---\nname: Pdf\ndescription: d\n---\n", wantField: "name", wantRule: "only lowercase letters"},
		{name: "name underscore", dir: "my_skill", skillMD: "---\nname: my_skill\ndescription: d\n---\n", wantField: "name", wantRule: "only lowercase letters"},
		{name: "name leading hyphen", dir: "-pdf", skillMD: "---\nname: -pdf\ndescription: d\n---\n", wantField: "name", wantRule: "begin or end with a hyphen"},
		{name: "name trailing hyphen", dir: "pdf-", skillMD: "---\nname: pdf-\ndescription: d\n---\n", wantField: "name", wantRule: "begin or end with a hyphen"},
		{name: "name double hyphen", dir: "pdf--x", skillMD: "---\nname: pdf--x\ndescription: d\n---\n", wantField: "name", wantRule: "two hyphens"},
		{name: "name of 65 characters", dir: long(65), skillMD: "---\nname: " + long(65) + "\ndescription: d\n---\n", wantField: "name", wantRule: "1 to 64"},
		{name: "name differs from directory", dir: "pdf", skillMD: "---\nname: pdf-tools\ndescription: d\n---\n", wantField: "name", wantRule: "they must be equal"},
		{name: "name is a list", dir: "a", skillMD: "---\nname: [a]\ndescription: d\n---\n", wantField: "name", wantRule: "must be a string"},
		{name: "description missing", dir: "a", skillMD: "---\nname: a\n---\n", wantField: "description", wantRule: "is required"},
		{name: "description blank", dir: "a", skillMD: "---\nname: a\ndescription: \"  \"\n---\n", wantField: "description", wantRule: "is required"},
		{name: "description too long", dir: "a", skillMD: "---\nname: a\ndescription: " + long(1025) + "\n---\n", wantField: "description", wantRule: "1025 characters, over the limit of 1024"},
		{name: "compatibility too long", dir: "a", skillMD: "---\nname: a\ndescription: d\ncompatibility: " + long(501) + "\n---\n", wantField: "compatibility", wantRule: "over the limit of 500"},
		{name: "unknown key", dir: "a", skillMD: "---\nname: a\ndescription: d\nversion: 2\n---\n", wantField: "version", wantRule: "not a front matter key"},
		{name: "metadata not a mapping", dir: "a", skillMD: "---\nname: a\ndescription: d\nmetadata: text\n---\n", wantField: "metadata", wantRule: "mapping of string keys"},
		{name: "metadata value is a list", dir: "a", skillMD: "---\nname: a\ndescription: d\nmetadata:\n  tags: [x, y]\n---\n", wantField: "metadata", wantRule: "values must be strings"},
		{name: "allowed-tools is a list", dir: "a", skillMD: "---\nname: a\ndescription: d\nallowed-tools: [Read]\n---\n", wantField: "allowed-tools", wantRule: "must be a string"},
		{name: "not UTF-8", dir: "a", skillMD: "---\nname: a\ndescription: \xff\n---\n", wantField: "SKILL.md", wantRule: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(t, skills.Config{})
			writeTree(t, filepath.Join(c.Dir(), tt.dir), map[string]string{"SKILL.md": tt.skillMD})
			s, err := c.Get(context.Background(), tt.dir)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Get: %v, want a valid skill", err)
				}
				if s.Name != tt.dir {
					t.Errorf("Name = %q, want %q", s.Name, tt.dir)
				}
				if tt.check != nil {
					tt.check(t, s)
				}
				return
			}
			if err == nil {
				t.Fatalf("Get succeeded (%+v), want an error on %s", s, tt.wantField)
			}
			if !errors.Is(err, skills.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			var ve *skills.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v holds no ValidationError", err)
			}
			if ve.Field != tt.wantField || ve.Skill != tt.dir {
				t.Errorf("got skill %q field %q, want skill %q field %q (%v)", ve.Skill, ve.Field, tt.dir, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantRule) || !strings.Contains(err.Error(), `"`+tt.dir+`"`) {
				t.Errorf("error %q does not name the skill %q and say %q", err, tt.dir, tt.wantRule)
			}
			// List reports the same directory with the same reason.
			_, invalid, err2 := c.List(context.Background())
			if err2 != nil || len(invalid) != 1 || invalid[0].Dir != tt.dir || invalid[0].Reason != err.Error() {
				t.Errorf("List: invalid %+v, %v; want %s: %v", invalid, err2, tt.dir, err)
			}
		})
	}
}

func TestFrontMatterReportsEveryRule(t *testing.T) {
	c := newCatalog(t, skills.Config{})
	writeTree(t, filepath.Join(c.Dir(), "x"), map[string]string{"SKILL.md": "---\nname: X\ncompatibility: " + strings.Repeat("c", 600) + "\n---\n"})
	_, err := c.Get(context.Background(), "x")
	for _, field := range []string{"name", "description", "compatibility"} {
		if err == nil || !strings.Contains(err.Error(), `skill "x": `+field+":") {
			t.Errorf("error %v does not report field %s", err, field)
		}
	}
}

func TestBody(t *testing.T) {
	c := newCatalog(t, skills.Config{})
	writeTree(t, filepath.Join(c.Dir(), "b"), map[string]string{"SKILL.md": skillMD("b", "\n# Steps\n\n1. Do it.\n")})
	body, err := c.Body(context.Background(), "b")
	if want := "# Steps\n\n1. Do it.\n"; err != nil || body != want {
		t.Errorf("Body = %q, %v; want %q", body, err, want)
	}
}

func TestListReportsInvalidDirectories(t *testing.T) {
	c := newCatalog(t, skills.Config{MaxEntries: 5})
	ctx := context.Background()
	writeTree(t, filepath.Join(c.Dir(), "good"), map[string]string{"SKILL.md": skillMD("good", ""), "references/a.md": "a"})
	writeTree(t, filepath.Join(c.Dir(), "empty-skill"), map[string]string{"README.md": "no SKILL.md here"})
	writeTree(t, filepath.Join(c.Dir(), "Bad_Name"), map[string]string{"SKILL.md": skillMD("Bad_Name", "")})
	writeTree(t, filepath.Join(c.Dir(), "crowded"), map[string]string{"SKILL.md": skillMD("crowded", ""),
		"1": "", "2": "", "3": "", "4": "", "5": ""})
	writeTree(t, c.Dir(), map[string]string{"stray.txt": "a file"})
	writeTree(t, filepath.Join(c.Dir(), "piped"), map[string]string{"SKILL.md": skillMD("piped", "")})
	if err := syscall.Mkfifo(filepath.Join(c.Dir(), "piped", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("good", filepath.Join(c.Dir(), "alias")); err != nil {
		t.Fatal(err)
	}

	got, invalid, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "good" || !reflect.DeepEqual(got[0].Files, []string{"SKILL.md", "references/a.md"}) {
		t.Errorf("valid skills = %+v, want only good with SKILL.md and references/a.md", got)
	}
	wantReasons := map[string]string{
		"Bad_Name":    "only lowercase letters",
		"alias":       "is a symlink, not a directory",
		"crowded":     "more than 5 files and directories",
		"empty-skill": "SKILL.md: is missing",
		"piped":       "fifo is a named pipe",
		"stray.txt":   "is a regular file, not a directory",
	}
	if len(invalid) != len(wantReasons) {
		t.Errorf("invalid = %+v, want %d entries", invalid, len(wantReasons))
	}
	for _, inv := range invalid {
		if want, ok := wantReasons[inv.Dir]; !ok || !strings.Contains(inv.Reason, want) {
			t.Errorf("invalid %s: reason %q, want it to say %q", inv.Dir, inv.Reason, want)
		}
	}
	sums, err := c.Summaries(ctx)
	if want := []skills.Summary{{Name: "good", Description: "Test skill good."}}; err != nil || !reflect.DeepEqual(sums, want) {
		t.Errorf("Summaries = %+v, %v; want %+v", sums, err, want)
	}
}

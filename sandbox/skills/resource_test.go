package skills_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/skills"
)

// handSkill places skill x by hand, with links of every kind, next to a
// skill "other" and a secret file outside R/skills.
func handSkill(t *testing.T, c *skills.Catalog) (secret string) {
	t.Helper()
	writeTree(t, filepath.Join(c.Dir(), "x"), map[string]string{
		"SKILL.md":           skillMD("x", "Body"),
		"references/a.md":    "alpha",
		"references/big.txt": strings.Repeat("b", 2000),
		"scripts/run.py":     "print('hi')",
		"scripts/tool":       "#!/bin/sh\n",
		"scripts/exe":        "#!/bin/sh\n",
	})
	if err := os.Chmod(filepath.Join(c.Dir(), "x", "scripts", "exe"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, filepath.Join(c.Dir(), "other"), map[string]string{"SKILL.md": skillMD("other", ""), "private.md": "other's"})
	secret = filepath.Join(filepath.Dir(c.Dir()), "secret.txt")
	writeTree(t, filepath.Dir(c.Dir()), map[string]string{"secret.txt": "secret"})
	links := map[string]string{
		"etc":                 "/etc",
		"passwd":              "/etc/passwd",
		"up":                  "../other/private.md",
		"secret":              "../../secret.txt",
		"references/inside":   "a.md",
		"references/indirect": "../references/inside",
		"references/sneaky":   "../references/../../other/private.md",
		"loop":                "loop",
		"scripts/escape.py":   "../../other/private.md",
		"scripts/linked.py":   "run.py",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(c.Dir(), "x", name)); err != nil {
			t.Fatal(err)
		}
	}
	return secret
}

func TestReadResource(t *testing.T) {
	c := newCatalog(t, skills.Config{MaxFileBytes: 1024})
	handSkill(t, c)
	ctx := context.Background()

	s, err := c.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"etc", "passwd", "references/inside", "scripts/escape.py"} {
		if !contains(s.Files, f) {
			t.Errorf("Files %v lacks the symlink %s", s.Files, f)
		}
	}

	tests := []struct {
		name, skill, path string
		want              string // content, when no error is expected
		wantErr           error
		wantMsg           string
	}{
		{name: "file", skill: "x", path: "references/a.md", want: "alpha"},
		{name: "dot segments are cleaned", skill: "x", path: "./references//a.md", want: "alpha"},
		{name: "link inside the skill", skill: "x", path: "references/inside", want: "alpha"},
		{name: "chain of links inside", skill: "x", path: "references/indirect", want: "alpha"},
		{name: "SKILL.md", skill: "x", path: "SKILL.md", want: skillMD("x", "Body")},

		{name: "traversal as skill name", skill: "../../etc/passwd", path: "SKILL.md", wantErr: skills.ErrInvalid, wantMsg: "the name"},
		{name: "traversal as skill name to a real skill", skill: "../skills/x", path: "SKILL.md", wantErr: skills.ErrInvalid},
		{name: "dot-dot skill", skill: "..", path: "skills/x/SKILL.md", wantErr: skills.ErrInvalid},
		{name: "empty skill", skill: "", path: "SKILL.md", wantErr: skills.ErrInvalid},
		{name: "unknown skill", skill: "nope", path: "SKILL.md", wantErr: skills.ErrNotFound, wantMsg: "not installed"},
		{name: "traversal as resource", skill: "x", path: "../../etc/passwd", wantErr: skills.ErrInvalidPath, wantMsg: `contains ".."`},
		{name: "traversal to a sibling skill", skill: "x", path: "../other/private.md", wantErr: skills.ErrInvalidPath},
		{name: "traversal that cleans inside", skill: "x", path: "references/../SKILL.md", wantErr: skills.ErrInvalidPath},
		{name: "absolute path", skill: "x", path: "/etc/passwd", wantErr: skills.ErrInvalidPath, wantMsg: "is absolute"},
		{name: "absolute path into the skill", skill: "x", path: filepath.Join(c.Dir(), "x", "SKILL.md"), wantErr: skills.ErrInvalidPath},
		{name: "backslash traversal", skill: "x", path: `..\..\etc\passwd`, wantErr: skills.ErrInvalidPath, wantMsg: "backslash"},
		{name: "NUL byte", skill: "x", path: "SKILL.md\x00.txt", wantErr: skills.ErrInvalidPath},
		{name: "empty path", skill: "x", path: "", wantErr: skills.ErrInvalidPath},
		{name: "the directory itself", skill: "x", path: ".", wantErr: skills.ErrInvalidPath},
		{name: "a directory", skill: "x", path: "references", wantErr: skills.ErrNotFound},
		{name: "not a file of the skill", skill: "x", path: "references/none.md", wantErr: skills.ErrNotFound, wantMsg: "not one of the skill's files"},
		{name: "through a link to /etc", skill: "x", path: "etc/passwd", wantErr: skills.ErrNotFound},
		{name: "link to /etc", skill: "x", path: "etc", wantErr: skills.ErrInvalidPath, wantMsg: "symlink to /etc, outside the skill"},
		{name: "link to /etc/passwd", skill: "x", path: "passwd", wantErr: skills.ErrInvalidPath, wantMsg: "symlink to /etc/passwd"},
		{name: "link to a sibling skill", skill: "x", path: "up", wantErr: skills.ErrInvalidPath, wantMsg: "outside the skill"},
		{name: "link out of the root", skill: "x", path: "secret", wantErr: skills.ErrInvalidPath},
		{name: "link that climbs and comes back elsewhere", skill: "x", path: "references/sneaky", wantErr: skills.ErrInvalidPath},
		{name: "link loop", skill: "x", path: "loop", wantErr: skills.ErrInvalidPath, wantMsg: "symlinks in a row"},
		{name: "too large", skill: "x", path: "references/big.txt", wantErr: skills.ErrTooLarge,
			wantMsg: "2000 bytes, over the limit of 1024; work on it in the sandbox, where it is /workspace/skills/x/references/big.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.ReadResource(ctx, tt.skill, tt.path)
			if tt.wantErr == nil {
				if err != nil || string(got) != tt.want {
					t.Fatalf("ReadResource = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Fatalf("ReadResource = %q, %v; want %v saying %q", got, err, tt.wantErr, tt.wantMsg)
			}
			if strings.Contains(string(got), "root:") || strings.Contains(string(got), "other's") || strings.Contains(string(got), "secret") {
				t.Fatalf("leaked %q", got)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestScriptPathAndArgv(t *testing.T) {
	if skills.MountDir != sandbox.SkillsDir {
		t.Fatalf("MountDir = %q, sandbox.SkillsDir = %q: the paths given to sandboxes would be wrong", skills.MountDir, sandbox.SkillsDir)
	}
	c := newCatalog(t, skills.Config{})
	handSkill(t, c)
	ctx := context.Background()
	tests := []struct {
		script   string
		args     []string
		wantArgv []string
		wantErr  error
		wantMsg  string
	}{
		{script: "run.py", args: []string{"a b", "; rm -rf /", "$(x)"},
			wantArgv: []string{"python3", "/workspace/skills/x/scripts/run.py", "a b", "; rm -rf /", "$(x)"}},
		{script: "scripts/run.py", wantArgv: []string{"python3", "/workspace/skills/x/scripts/run.py"}},
		{script: "linked.py", wantArgv: []string{"python3", "/workspace/skills/x/scripts/linked.py"}},
		{script: "exe", args: []string{"-v"}, wantArgv: []string{"/workspace/skills/x/scripts/exe", "-v"}},
		{script: "tool", wantErr: skills.ErrInvalid, wantMsg: "not executable"},
		{script: "run.py", args: []string{"a\x00b"}, wantErr: skills.ErrInvalid, wantMsg: "NUL"},
		{script: "../SKILL.md", wantErr: skills.ErrInvalidPath},
		{script: "/workspace/skills/x/scripts/run.py", wantErr: skills.ErrInvalidPath},
		{script: "references/a.md", wantErr: skills.ErrNotFound, wantMsg: "scripts are scripts/escape.py, scripts/exe"},
		{script: "missing.py", wantErr: skills.ErrNotFound},
		{script: "escape.py", wantErr: skills.ErrInvalidPath, wantMsg: "outside the skill"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			argv, err := c.ScriptArgv(ctx, "x", tt.script, tt.args)
			if tt.wantErr == nil {
				if err != nil || !reflect.DeepEqual(argv, tt.wantArgv) {
					t.Fatalf("ScriptArgv = %q, %v; want %q", argv, err, tt.wantArgv)
				}
				p, err := c.ScriptPath(ctx, "x", tt.script)
				if err != nil || p != tt.wantArgv[len(tt.wantArgv)-len(tt.args)-1] {
					t.Errorf("ScriptPath = %q, %v", p, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Fatalf("ScriptArgv = %q, %v; want %v saying %q", argv, err, tt.wantErr, tt.wantMsg)
			}
		})
	}
	if _, err := c.ScriptPath(ctx, "../x", "run.py"); !errors.Is(err, skills.ErrInvalid) {
		t.Errorf("ScriptPath with a traversal as skill name: %v, want ErrInvalid", err)
	}
}

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// weirdValues are values every shell must give back as they were.
var weirdValues = map[string]string{
	"PLAIN":   "hello world",
	"QUOTES":  `it's "q"`,
	"DOLLAR":  "$HOME $(id) `id` ${X}",
	"BACKSL":  `a\b\\c\`,
	"NEWLINE": "one\ntwo\n",
	"CTRL":    "tab\there\x01\x1b[0m\r",
	"UTF8":    "中文 é",
	"EMPTY":   "",
}

// TestParseExportsOfRealShells has bash, dash and BusyBox print their
// exported variables and reads them back: what each shell prints is what
// the state holds.
func TestParseExportsOfRealShells(t *testing.T) {
	shells := [][]string{{"bash"}, {"dash"}, {"busybox", "sh"}, {"bash", "--posix"}}
	ran := 0
	for _, sh := range shells {
		path, err := exec.LookPath(sh[0])
		if err != nil {
			continue
		}
		ran++
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			cmd := exec.Command(path, append(sh[1:], "-c", "export NOVALUE; export -p; echo return; echo 'export AFTER=1'")...)
			cmd.Env = nil
			for k, v := range weirdValues {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %v", sh, err)
			}
			got := map[string]ShellVar{}
			for _, v := range ParseExports(out) {
				got[v.Name] = v
			}
			for k, want := range weirdValues {
				if v, ok := got[k]; !ok || !v.Set || v.Value != want {
					t.Errorf("%s = %+v (present %v), want %q; the shell printed:\n%s", k, v, ok, want, out)
				}
			}
			if v, ok := got["NOVALUE"]; !ok || v.Set {
				t.Errorf("NOVALUE = %+v (present %v), want exported without a value", v, ok)
			}
			if _, ok := got["AFTER"]; ok {
				t.Error("a line after `return` was read")
			}
		})
	}
	if ran == 0 {
		t.Skip("no shell here")
	}
}

// TestShellStateRoundTrip renders a parsed state as the prelude and has a
// shell evaluate it: every value comes back, and nothing in them runs.
func TestShellStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := ShellState{Dir: "/it's a dir", File: "env.b"}
	for k, v := range weirdValues {
		st.Env = append(st.Env, ShellVar{Name: k, Value: v, Set: true})
	}
	script := st.Prelude() + `printf '%s\0' "$__fb_e" "$__fb_l"; for n in ` + names(st.Env) + `; do eval "printf '%s\0' \"\$$n\""; done`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	want := []string{"env.b", "/it's a dir"}
	for _, v := range st.Env {
		want = append(want, v.Value)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("evaluated prelude gave %q, want %q", got, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("evaluating the prelude made files: %v", entries)
	}
}

func names(vars []ShellVar) string {
	var n []string
	for _, v := range vars {
		n = append(n, v.Name)
	}
	return strings.Join(n, " ")
}

func TestParseExportsRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // NAME=value of what is kept
	}{
		{"code line", "rm -rf /\nexport A='1'\n", nil},
		{"stops at code", "export A='1'\ntouch pwned\nexport B='2'\n", []string{"A=1"}},
		{"command substitution", "declare -x A=\"$(touch x)\"\nexport B='2'\n", nil},
		{"backtick", "declare -x A=\"`touch x`\"\n", nil},
		{"unquoted", "export A=$(touch x)\n", nil},
		{"trailing code", "export A='1'; touch x\n", nil},
		{"bad name", "export A-B='1'\nexport C='2'\n", nil},
		{"unterminated", "export A='1\n", nil},
		{"startup variables", "export BASH_ENV='/x'\nexport ENV='/x'\nexport SHELLOPTS='xtrace'\nexport PS4='$(x)'\nexport LD_PRELOAD='/x.so'\nexport PROMPT_COMMAND='x'\nexport __fb_c='x'\nexport OK='1'\n", []string{"OK=1"}},
		{"duplicate keeps the last", "export A='1'\nexport A='2'\n", []string{"A=2"}},
		{"NUL escape", "declare -x A=$'a\\0b'\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range ParseExports([]byte(tc.in)) {
				got = append(got, v.Name+"="+v.Value)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ParseExports(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestReadShellStateConfined: the state files are the sandbox's; a link
// out of the directory or a FIFO in it is not followed or waited on.
func TestReadShellStateConfined(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("export SECRET='host'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "env.a")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env.now"), []byte("env.a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "cwd"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := ReadShellState(dir)
	if len(st.Env) != 0 || st.Dir != "" {
		t.Fatalf("ReadShellState followed a link out of its directory or read a FIFO: %+v", st)
	}
	if err := os.Remove(filepath.Join(dir, "env.a")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "env.a"), []byte("export A='1'\nreturn\nexport B='2'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st := ReadShellState(dir); len(st.Env) != 1 || st.Env[0].Value != "1" || st.File != "env.a" {
		t.Fatalf("ReadShellState = %+v, want A=1 from env.a", st)
	}
}

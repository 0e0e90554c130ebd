package policy

import (
	"path"
	"strings"
)

// Allowlist mode also judges where a command writes: an allowlist that
// allows echo must not let `echo x > ~/.bashrc` plant a command the next
// shell runs. A write target outside the workspace passes only when an
// allow rule names it (its redirect globs); /tmp and the standard
// streams always pass. The targets modelled are the shell's output
// redirections (>, >>, >|, &>, <>), tee's files, cp/mv/install's
// destination and dd's of=. Paths are resolved as the shell would: ~ and
// $HOME stay "~" (the home directory is outside the workspace), relative
// paths against the working directory the judge followed (cd in the
// command and in the chat's History), and .. cleaned. A symbolic link in
// the workspace that points elsewhere is not seen: the sandbox's own
// filesystem is the boundary for that.

// RuleWriteOutside is the verdict's rule when an allowlist refuses a write
// outside the workspace.
const RuleWriteOutside = "write-outside-workspace"

// workDir is where a chat's shell starts.
const workDir = "/workspace"

// target is a place a command writes: raw as written, abs resolved ("" when
// it cannot be known before the command runs).
type target struct{ raw, abs string }

// resolve makes a written path absolute against the working directory the
// judge knows ("" for unknown).
func resolve(p, cwd string) string {
	switch {
	case p == "":
		return ""
	case p == "~" || strings.HasPrefix(p, "~/"):
		return path.Clean(p)
	case strings.HasPrefix(p, "~"):
		return "~" // another user's home: outside the workspace all the same
	case strings.HasPrefix(p, "/"):
		return path.Clean(p)
	case cwd == "":
		return ""
	}
	return path.Clean(cwd + "/" + p)
}

// writeOK are targets every command may write.
func writeOK(abs string) bool {
	switch {
	case abs == workDir || strings.HasPrefix(abs, workDir+"/"):
		return true
	case abs == "/tmp" || strings.HasPrefix(abs, "/tmp/") || strings.HasPrefix(abs, "/var/tmp/"):
		return true
	case abs == "/dev/null" || abs == "/dev/stdout" || abs == "/dev/stderr" || abs == "/dev/tty":
		return true
	case strings.HasPrefix(abs, "/dev/fd/") || strings.HasPrefix(abs, "/proc/self/fd/"):
		return true
	}
	return false
}

// redirTarget is the target of an output redirection, resolved now: the
// redirection happens where the statement runs.
func (j *judge) redirTarget(t string, known bool) target {
	if !known {
		return target{raw: t}
	}
	return target{raw: t, abs: resolve(t, j.sc.cwd)}
}

// argTargets are the files a command writes through its arguments.
func (j *judge) argTargets(base string, argv []field) []target {
	var out []target
	add := func(f field) {
		if f.known {
			out = append(out, target{raw: f.s, abs: resolve(f.s, j.sc.cwd)})
		} else {
			out = append(out, target{raw: f.src})
		}
	}
	var operands []field
	dir := -1 // cp -t DIR
	for i := 1; i < len(argv); i++ {
		f := argv[i]
		switch {
		case f.known && f.s == "--":
			operands = append(operands, argv[i+1:]...)
			i = len(argv)
		case f.known && (f.s == "-t" || f.s == "--target-directory") && i+1 < len(argv):
			dir = i + 1
			i++
		case f.known && strings.HasPrefix(f.s, "--target-directory="):
			add(field{s: strings.TrimPrefix(f.s, "--target-directory="), known: true})
		case f.known && strings.HasPrefix(f.s, "-") && f.s != "-":
		default:
			operands = append(operands, f)
		}
	}
	switch base {
	case "tee":
		for _, f := range operands {
			add(f)
		}
	case "cp", "mv", "install", "ln":
		if dir >= 0 {
			add(argv[dir])
		} else if len(operands) >= 2 {
			add(operands[len(operands)-1])
		}
	case "dd":
		for _, f := range argv[1:] {
			if f.known && strings.HasPrefix(f.s, "of=") {
				add(field{s: strings.TrimPrefix(f.s, "of="), known: true})
			} else if !f.known {
				add(f)
			}
		}
	}
	return out
}

// checkWrites refuses, in allowlist mode, a write outside the workspace
// that no allow rule names.
func (j *judge) checkWrites(prog program, argv []field, fl flow, text string) {
	if j.mode != Allowlist {
		return
	}
	targets := append(fl.writes[:len(fl.writes):len(fl.writes)], j.argTargets(prog.base, argv)...)
	for _, t := range targets {
		switch {
		case t.abs == "":
			j.decide(Forbid, RuleWriteOutside, "It writes to "+t.raw+", a path not known before the command runs; in allowlist mode a command writes under "+workDir+" and /tmp only, unless a rule allows the path. Write to a literal path under "+workDir+".", text)
		case writeOK(t.abs) || j.writeAllowed(prog, t):
		default:
			j.decide(Forbid, RuleWriteOutside, "It writes to "+t.abs+", outside "+workDir+"; in allowlist mode a command writes under "+workDir+" and /tmp only, unless a rule allows the path (an allow rule with \"redirect\"). Write under "+workDir+" instead.", text)
		}
	}
}

// writeAllowed: an allow rule for this program names the target in its
// redirect globs.
func (j *judge) writeAllowed(prog program, t target) bool {
	for i := range j.rules {
		r := &j.rules[i]
		if r.Decision != Allow || len(r.Redirect) == 0 || !r.matchesProgram(prog) {
			continue
		}
		for _, g := range r.Redirect {
			if glob(g, t.abs) || glob(g, t.raw) {
				return true
			}
		}
	}
	return false
}

// chdir follows cd, pushd and popd: the directory becomes known when the
// argument is, unknown otherwise.
func (j *judge) chdir(name string, argv []field) {
	var args []field
	for _, f := range argv[1:] {
		if f.known && strings.HasPrefix(f.s, "-") && f.s != "-" {
			continue // -P, -L
		}
		args = append(args, f)
	}
	switch {
	case name == "popd", len(args) > 1, len(args) == 1 && (!args[0].known || args[0].s == "-"):
		j.sc.cwd = ""
	case len(args) == 0:
		if name == "cd" {
			j.sc.cwd = "~"
		}
	default:
		if strings.HasPrefix(j.sc.cwd, "~") && !strings.HasPrefix(args[0].s, "/") && !strings.HasPrefix(args[0].s, "~") {
			j.sc.cwd = path.Clean(j.sc.cwd + "/" + args[0].s)
			return
		}
		j.sc.cwd = resolve(args[0].s, j.sc.cwd)
	}
}

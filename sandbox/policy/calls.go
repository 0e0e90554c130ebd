package policy

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func (j *judge) call(c *syntax.CallExpr, fl flow) {
	var sub []string
	for _, a := range c.Assigns {
		sub = append(sub, j.substs(a, fl)...)
	}
	for _, w := range c.Args {
		sub = append(sub, j.substs(w, fl)...)
	}
	if len(c.Args) == 0 {
		for _, a := range c.Assigns {
			j.assign(a)
		}
		return
	}
	argv := j.fields(c.Args)
	for _, a := range c.Assigns {
		if a.Name != nil {
			j.checkEnvName(a.Name.Value, display(argv))
		}
	}
	if len(sub) > 0 {
		fl.feeders = append(append([]string(nil), fl.feeders...), sub...)
	}
	aliasable := false
	if l := c.Args[0].Lit(); l != "" && !strings.Contains(l, `\`) {
		aliasable = true
	}
	j.simple(argv, fl, aliasable)
}

// simple judges one simple command given its expanded words.
func (j *judge) simple(argv []field, fl flow, aliasable bool) {
	if len(argv) == 0 || j.over() {
		return
	}
	text := display(argv)
	if !argv[0].known {
		j.unresolvedName(argv, fl, text, "the command name "+argv[0].src+" comes from an expansion whose value is not known before the command runs")
		return
	}
	name := argv[0].s
	prog := newProgram(name)
	j.names = append(j.names, prog.base)

	if aliasable && !strings.Contains(name, "/") && !j.aliasing[name] {
		if a, ok := j.sc.aliases[name]; ok {
			j.expandAlias(name, a, argv, fl)
			// Aliases are off in a non-interactive shell unless enabled:
			// the plain command may run instead.
		}
	}
	if f, ok := j.sc.funcs[name]; ok && !strings.Contains(name, "/") {
		if !j.calling[name] {
			j.callFunction(name, f, argv, fl)
		}
		if f.certain {
			return
		}
	}
	j.applyRules(prog, argv, fl, text)
	j.semantics(prog, argv, fl, text)
}

func (j *judge) expandAlias(name, value string, argv []field, fl flow) {
	f, err := parse(value)
	if err != nil || len(f.Stmts) == 0 {
		j.script(value, fl)
		return
	}
	j.aliasing[name] = true
	defer delete(j.aliasing, name)
	saved := j.src
	j.src = value
	last := f.Stmts[len(f.Stmts)-1]
	j.stmts(f.Stmts[:len(f.Stmts)-1], fl)
	if ce, ok := last.Cmd.(*syntax.CallExpr); ok && len(ce.Args) > 0 && len(last.Redirs) == 0 {
		for _, w := range ce.Args {
			j.substs(w, fl)
		}
		words := j.fields(ce.Args)
		j.simple(append(words, argv[1:]...), fl, false)
	} else {
		j.stmt(last, fl)
	}
	j.src = saved
}

func (j *judge) callFunction(name string, f *funcDef, argv []field, fl flow) {
	if j.depth >= maxDepth {
		j.decide(Forbid, RuleTooComplex, "Functions nested this deep cannot be checked.", display(argv))
		return
	}
	f.called = true
	j.depth++
	j.calling[name] = true
	saved := map[string]string{}
	for i := 1; i <= 9; i++ {
		k := strconv.Itoa(i)
		if v, ok := j.sc.vars[k]; ok {
			saved[k] = v
		}
		delete(j.sc.vars, k)
		if i < len(argv) && argv[i].known {
			j.sc.vars[k] = argv[i].s
		}
	}
	savedSrc := j.src
	j.src = f.src
	j.stmt(f.body, fl)
	j.src = savedSrc
	for i := 1; i <= 9; i++ {
		k := strconv.Itoa(i)
		delete(j.sc.vars, k)
		if v, ok := saved[k]; ok {
			j.sc.vars[k] = v
		}
	}
	delete(j.calling, name)
	j.depth--
}

// safeBuiltins are shell builtins an allowlist need not name: they act
// on the shell itself, and what they run (trap) is judged on its own.
var safeBuiltins = map[string]bool{
	"cd": true, "pwd": true, "echo": true, "printf": true, "true": true, "false": true, ":": true,
	"test": true, "[": true, "export": true, "unset": true, "local": true, "declare": true,
	"readonly": true, "typeset": true, "alias": true, "unalias": true, "shift": true, "return": true,
	"exit": true, "set": true, "read": true, "break": true, "continue": true, "wait": true, "let": true,
	"trap": true, "umask": true, "type": true, "getopts": true, "mapfile": true, "readarray": true,
	"shopt": true, "pushd": true, "popd": true, "dirs": true, "jobs": true,
}

// transparent programs run the command they are given without changing
// what it may do; an allowlist judges that command instead.
var transparent = map[string]bool{
	"env": true, "command": true, "builtin": true, "exec": true, "nice": true, "nohup": true,
	"timeout": true, "setsid": true, "stdbuf": true, "time": true, "ionice": true,
}

func (j *judge) applyRules(prog program, argv []field, fl flow, text string) {
	allowed := false
	for i := range j.rules {
		r := &j.rules[i]
		if r.Check != "" || (r.WhenMode != "" && r.WhenMode != j.mode) {
			continue
		}
		if r.Decision == Allow && prog.file {
			// A file the sandbox's user may have written is allowed by its
			// path only, never by its base name.
			if !r.matchesPath(prog) {
				continue
			}
		} else if !r.matchesProgram(prog) {
			continue
		}
		if !r.matchesArgs(argv) || !r.matchesFlow(fl) {
			continue
		}
		if r.Decision == Allow {
			allowed = true
			continue
		}
		j.decide(r.Decision, r.ID, r.Justification, text)
	}
	j.checkWrites(prog, argv, fl, text)
	if j.mode != Allowlist || allowed {
		return
	}
	switch {
	case prog.file:
		j.decide(Forbid, RuleUnresolvable, "It runs the file "+prog.raw+", whose content is not known here; in allowlist mode only the programs the policy names run.", text)
	case transparent[prog.base] || (safeBuiltins[prog.raw]):
	case prog.base == "eval" || prog.base == "source" || prog.base == ".":
		// semantics refuses them with the reason
	default:
		j.decide(Forbid, RuleNotAllowlisted, prog.base+" is not among the commands this policy allows.", text)
	}
}

func (r *Rule) matchesPath(p program) bool {
	for _, g := range r.Command {
		if strings.Contains(g, "/") && p.full != "" && glob(g, p.full) {
			return true
		}
	}
	return false
}

func (r *Rule) matchesFlow(fl flow) bool {
	if len(r.Redirect) > 0 && !anyGlob(r.Redirect, fl.redirs) {
		return false
	}
	if len(r.FedBy) > 0 && !anyGlob(r.FedBy, fl.feeders) {
		return false
	}
	return true
}

// unknownCommand refuses, in allowlist mode, what cannot be known before
// it runs.
func (j *judge) unknownCommand(why, text string) {
	if j.mode == Allowlist {
		j.decide(Forbid, RuleUnresolvable, strings.ToUpper(why[:1])+why[1:]+"; in allowlist mode every command must be named literally.", text)
	}
}

// unresolvedName judges a command whose name is not known: an allowlist
// refuses it; a denylist judges its arguments by the rules that have
// some, and the words after the name as a command of their own (the name
// may expand to nothing).
func (j *judge) unresolvedName(argv []field, fl flow, text, why string) {
	if j.mode == Allowlist {
		j.unknownCommand(why, text)
		return
	}
	for i := range j.rules {
		r := &j.rules[i]
		if r.Decision == Allow || r.Check != "" || (r.WhenMode != "" && r.WhenMode != j.mode) {
			continue
		}
		any := len(r.Command) == 1 && r.Command[0] == "*"
		if (len(r.Args) == 0 && !any) || !r.matchesArgs(argv) || !r.matchesFlow(fl) {
			continue
		}
		j.decide(r.Decision, r.ID, r.Justification, text)
	}
	for i := 1; i < len(argv); i++ {
		if argv[i].known {
			j.simple(argv[i:], fl, false)
			return
		}
	}
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "ash": true, "rbash": true}

// semantics follows what a program does with its arguments: runs
// another command (wrappers, shells, eval), or changes the shell's state
// (alias, read, unset).
func (j *judge) semantics(prog program, argv []field, fl flow, text string) {
	name := prog.base
	if shells[name] {
		j.shell(argv, fl, text)
		return
	}
	switch name {
	case "cd", "pushd", "popd":
		j.chdir(name, argv)
	case "eval":
		if j.mode == Allowlist {
			j.unknownCommand("eval runs a string as a command", text)
			return
		}
		words := make([]string, 0, len(argv))
		for _, f := range argv[1:] {
			if !f.known {
				j.simple(argv[1:], fl, false)
				return
			}
			words = append(words, f.s)
		}
		j.nested(strings.Join(words, " "), fl, false, nil)
	case "source", ".":
		what := "a file"
		if len(argv) > 1 {
			what = display(argv[1:2])
		}
		j.unknownCommand(name+" runs the commands in "+what+", whose content is not known here", text)
	case "trap":
		if len(argv) > 2 && argv[1].known && argv[1].s != "-" && !strings.HasPrefix(argv[1].s, "-") {
			j.nested(argv[1].s, flow{}, false, nil)
		} else if len(argv) > 2 && !argv[1].known {
			j.unknownCommand("the command trap would run is not known here", text)
		}
	case "alias":
		for _, f := range argv[1:] {
			if k, v, ok := strings.Cut(f.s, "="); ok && f.known {
				j.sc.aliases[k] = v
			} else if !f.known && j.mode == Allowlist {
				j.unknownCommand("the alias defined is not known here", text)
			}
		}
	case "unalias":
		for _, f := range argv[1:] {
			if f.s == "-a" {
				clear(j.sc.aliases)
			}
			delete(j.sc.aliases, f.s)
		}
	case "unset":
		fn := false
		for _, f := range argv[1:] {
			switch {
			case f.s == "-f":
				fn = true
			case strings.HasPrefix(f.s, "-"):
			case fn:
				delete(j.sc.funcs, f.s)
			default:
				delete(j.sc.vars, f.s)
			}
		}
	case "read", "mapfile", "readarray", "getopts", "printf":
		for i := 1; i < len(argv); i++ {
			f := argv[i]
			if name == "printf" {
				if f.s == "-v" && i+1 < len(argv) {
					j.setVar(argv[i+1].s, field{}, text)
				}
				continue
			}
			if f.known && !strings.HasPrefix(f.s, "-") {
				j.setVar(f.s, field{}, text)
			}
		}
	case "export", "declare", "typeset", "local", "readonly":
		for _, f := range argv[1:] {
			if k, v, ok := strings.Cut(f.s, "="); ok && f.known {
				j.setVar(k, field{s: v, known: true}, text)
			}
		}
	case "su":
		for i := 1; i < len(argv)-1; i++ {
			if argv[i].s == "-c" || argv[i].s == "--command" {
				if argv[i+1].known {
					j.nested(argv[i+1].s, fl, true, nil)
				} else {
					j.unknownCommand("the command su -c would run is not known here", text)
				}
			}
		}
	case "find":
		j.findExec(argv, fl)
	default:
		if inner, extra, ok := unwrap(name, argv); ok {
			if extra {
				inner = append(inner[:len(inner):len(inner)], field{src: "…"})
			}
			j.simple(inner, fl, false)
		}
	}
}

func (j *judge) shell(argv []field, fl flow, text string) {
	cflag := false
	i := 1
	for ; i < len(argv); i++ {
		f := argv[i]
		if !f.known {
			j.unknownCommand("the arguments given to "+argv[0].s+" are not known here", text)
			return
		}
		s := f.s
		if s == "--" || s == "-" {
			i++
			break
		}
		if strings.HasPrefix(s, "--") {
			if s == "--rcfile" || s == "--init-file" {
				i++
			}
			continue
		}
		if len(s) > 1 && (s[0] == '-' || s[0] == '+') {
			if s[0] == '-' && strings.Contains(s[1:], "c") {
				cflag = true
			}
			if strings.ContainsAny(s[1:], "oO") {
				i++
			}
			continue
		}
		break
	}
	switch {
	case cflag:
		if i >= len(argv) {
			return
		}
		if !argv[i].known {
			j.unknownCommand("the script given to "+argv[0].s+" -c ("+argv[i].src+") is not known here", text)
			return
		}
		j.nested(argv[i].s, fl, true, argv[i+1:])
	case i < len(argv):
		j.unknownCommand(argv[0].s+" runs the script file "+display(argv[i:i+1])+", whose content is not known here", text)
	case fl.stdin == stdinText:
		j.nested(fl.text, flow{}, true, nil)
	case fl.stdin == stdinUnknown:
		j.unknownCommand(argv[0].s+" runs the commands on its input, which is not known here", text)
	}
}

func (j *judge) findExec(argv []field, fl flow) {
	for i := 1; i < len(argv); i++ {
		switch argv[i].s {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		var inner []field
		k := i + 1
		for ; k < len(argv); k++ {
			if argv[k].known && (argv[k].s == ";" || argv[k].s == "+") {
				break
			}
			f := argv[k]
			if f.known && strings.Contains(f.s, "{}") {
				f = field{src: f.s}
			}
			inner = append(inner, f)
		}
		j.simple(inner, fl, false)
		i = k
	}
}

// unwrap returns the command a wrapper runs. extra: the wrapper adds
// arguments of its own that are not known here (xargs).
func unwrap(name string, argv []field) (inner []field, extra, ok bool) {
	rest := func(i int) ([]field, bool, bool) {
		if i >= len(argv) {
			return nil, false, false
		}
		return argv[i:], false, true
	}
	// skip walks options; withArg says which take the next word (or the
	// rest of their word) as their value.
	skip := func(start int, withArg string, longWithArg ...string) int {
		i := start
		for ; i < len(argv); i++ {
			f := argv[i]
			if !f.known {
				return i
			}
			s := f.s
			if s == "--" {
				return i + 1
			}
			if len(s) < 2 || s[0] != '-' {
				return i
			}
			if strings.HasPrefix(s, "--") {
				if !strings.Contains(s, "=") {
					for _, l := range longWithArg {
						if s == l {
							i++
						}
					}
				}
				continue
			}
			for k := 1; k < len(s); k++ {
				if strings.IndexByte(withArg, s[k]) >= 0 {
					if k == len(s)-1 {
						i++
					}
					break
				}
			}
		}
		return i
	}
	switch name {
	case "env":
		for i := 1; i < len(argv); i++ {
			f := argv[i]
			if !f.known {
				return rest(i)
			}
			s := f.s
			switch {
			case s == "--":
				return rest(i + 1)
			case s == "-S" || s == "--split-string":
				if i+1 < len(argv) && argv[i+1].known {
					return append(splitFields(argv[i+1].s), argv[i+2:]...), false, true
				}
				return rest(i + 1)
			case strings.HasPrefix(s, "-S"):
				return append(splitFields(s[2:]), argv[i+1:]...), false, true
			case strings.HasPrefix(s, "--split-string="):
				return append(splitFields(strings.TrimPrefix(s, "--split-string=")), argv[i+1:]...), false, true
			case s == "-u" || s == "-C" || s == "--unset" || s == "--chdir":
				i++
			case strings.HasPrefix(s, "-"):
			case strings.Contains(s, "="):
			default:
				return rest(i)
			}
		}
		return nil, false, false
	case "command":
		for i := 1; i < len(argv); i++ {
			s := argv[i].s
			if s == "-v" || s == "-V" {
				return nil, false, false
			}
			if s != "-p" && s != "--" {
				return rest(i)
			}
		}
		return nil, false, false
	case "builtin", "nohup", "busybox":
		i := 1
		if i < len(argv) && argv[i].s == "--" {
			i++
		}
		if name == "busybox" && i < len(argv) && strings.HasPrefix(argv[i].s, "-") {
			return nil, false, false
		}
		return rest(i)
	case "exec":
		return rest(skip(1, "a"))
	case "nice":
		i := 1
		for ; i < len(argv) && argv[i].known && strings.HasPrefix(argv[i].s, "-"); i++ {
			if argv[i].s == "--" {
				i++
				break
			}
			if argv[i].s == "-n" || argv[i].s == "--adjustment" {
				i++
			}
		}
		return rest(i)
	case "timeout":
		i := skip(1, "sk", "--signal", "--kill-after")
		return rest(i + 1) // the duration
	case "sudo":
		return rest(skip(1, "ugCDhprtUTR", "--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--command-timeout", "--chroot"))
	case "doas":
		return rest(skip(1, "uC"))
	case "setsid":
		return rest(skip(1, ""))
	case "stdbuf":
		return rest(skip(1, "ioe", "--input", "--output", "--error"))
	case "time":
		return rest(skip(1, "fo", "--format", "--output"))
	case "ionice":
		for _, f := range argv[1:] {
			if f.s == "-p" || f.s == "-P" || f.s == "-u" {
				return nil, false, false
			}
		}
		return rest(skip(1, "cnt", "--class", "--classdata"))
	case "chroot":
		i := skip(1, "", "--userspec", "--groups")
		return rest(i + 1)
	case "xargs":
		i := skip(1, "adEILnPs", "--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var")
		if i >= len(argv) {
			return []field{{s: "echo", known: true}}, true, true
		}
		return argv[i:], true, true
	}
	return nil, false, false
}

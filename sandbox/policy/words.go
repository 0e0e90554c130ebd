package policy

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// plainWord is a word made of literals and quotes only, unquoted.
func plainWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch t := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(t.Value))
		case *syntax.SglQuoted:
			if t.Dollar {
				return "", false
			}
			b.WriteString(t.Value)
		case *syntax.DblQuoted:
			for _, q := range t.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (j *judge) text(n syntax.Node) string {
	a, b := int(n.Pos().Offset()), int(n.End().Offset())
	if a < 0 || b > len(j.src) || a > b {
		return ""
	}
	return j.src[a:b]
}

// substs judges the commands that substitutions inside n run ($(...),
// `...`, <(...)), and returns their programs' names.
func (j *judge) substs(n syntax.Node, fl flow) []string {
	if n == nil {
		return nil
	}
	start := len(j.names)
	syntax.Walk(n, func(x syntax.Node) bool {
		switch t := x.(type) {
		case *syntax.CmdSubst:
			j.isolated(func() { j.stmts(t.Stmts, flow{}) })
			return false
		case *syntax.ProcSubst:
			j.isolated(func() { j.stmts(t.Stmts, flow{}) })
			return false
		}
		return true
	})
	return j.names[start:]
}

// envView shows the judge's known variables to package expand; an
// unknown one reads as unset, and resolvable has made sure none is read.
type envView struct{ j *judge }

func (e envView) Get(name string) expand.Variable {
	if v, ok := e.j.sc.vars[name]; ok {
		return expand.Variable{Set: true, Kind: expand.String, Str: v}
	}
	return expand.Variable{}
}

func (e envView) Each(fn func(string, expand.Variable) bool) {
	for k, v := range e.j.sc.vars {
		if !fn(k, expand.Variable{Set: true, Kind: expand.String, Str: v}) {
			return
		}
	}
}

var errUnknown = errors.New("not known before the command runs")

// resolvable reports whether every parameter n reads is known.
func (j *judge) resolvable(n syntax.Node) bool {
	ok := true
	syntax.Walk(n, func(x syntax.Node) bool {
		switch t := x.(type) {
		case *syntax.ParamExp:
			if t.Param == nil || t.Excl || t.NestedParam != nil || t.Names != 0 {
				ok = false
			} else if _, known := j.sc.vars[t.Param.Value]; !known && t.Param.Value != "LINENO" {
				ok = false
			}
		case *syntax.ExtGlob:
			ok = false
		}
		return ok
	})
	return ok
}

// cmdSubstOutput is what a substitution prints, when that is known
// without running anything: echo, printf of literals.
func (j *judge) cmdSubstOutput(w io.Writer, cs *syntax.CmdSubst) error {
	if len(cs.Stmts) != 1 {
		return errUnknown
	}
	out, ok := j.output(cs.Stmts[0], flow{})
	if !ok {
		return errUnknown
	}
	_, err := io.WriteString(w, out)
	return err
}

// output is what s prints, when it is echo or printf of known words or
// cat of known input.
func (j *judge) output(s *syntax.Stmt, fl flow) (string, bool) {
	ce, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 || s.Background || s.Negated {
		return "", false
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			t, ok := j.heredoc(r)
			if !ok {
				return "", false
			}
			fl.stdin, fl.text = stdinText, t
		case syntax.WordHdoc:
			t, ok := j.literal(r.Word)
			if !ok {
				return "", false
			}
			fl.stdin, fl.text = stdinText, t+"\n"
		default:
			return "", false
		}
	}
	argv := j.fields(ce.Args)
	for _, f := range argv {
		if !f.known {
			return "", false
		}
	}
	args := make([]string, 0, len(argv))
	for _, f := range argv[1:] {
		args = append(args, f.s)
	}
	switch argv[0].s {
	case "echo":
		nl := "\n"
		if len(args) > 0 && args[0] == "-n" {
			nl, args = "", args[1:]
		}
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			return "", false
		}
		return strings.Join(args, " ") + nl, true
	case "printf":
		if len(args) == 0 {
			return "", false
		}
		switch format := args[0]; {
		case format == "%s":
			return strings.Join(args[1:], ""), true
		case format == `%s\n`:
			return strings.Join(args[1:], "\n") + "\n", true
		case len(args) == 1 && !strings.ContainsAny(format, `%\`):
			return format, true
		}
	case "cat":
		if len(args) == 0 && fl.stdin == stdinText {
			return fl.text, true
		}
	}
	return "", false
}

// literal is a word's single value, when known.
func (j *judge) literal(w *syntax.Word) (string, bool) {
	if w == nil || !j.resolvable(w) {
		return "", false
	}
	cfg := j.cfg()
	defer j.release(cfg)
	s, err := expand.Literal(cfg, w)
	if err != nil || len(s) > maxVarLen*4 {
		return "", false
	}
	return s, true
}

// fields expands words as the shell would (quote removal, ${IFS}
// splitting, brace expansion, known variables, echo substitutions); a
// word that cannot be known becomes one unknown field.
func (j *judge) fields(words []*syntax.Word) []field {
	out := make([]field, 0, len(words))
	for _, w := range words {
		if !j.resolvable(w) {
			out = append(out, field{src: j.text(w)})
			continue
		}
		n := 0
		var got []field
		var err error
		cfg := j.cfg()
		for s, e := range expand.FieldsSeq(cfg, w) {
			if e != nil {
				err = e
				break
			}
			if n++; n > maxFields || len(s) > maxVarLen*4 {
				err = errUnknown
				break
			}
			got = append(got, field{s: s, known: true})
		}
		j.release(cfg)
		if err != nil {
			out = append(out, field{src: j.text(w)})
			continue
		}
		out = append(out, got...)
	}
	return out
}

func display(argv []field) string {
	parts := make([]string, len(argv))
	for i, f := range argv {
		switch {
		case !f.known && f.src != "":
			parts[i] = f.src
		case !f.known:
			parts[i] = "…"
		case f.s == "" || strings.ContainsAny(f.s, " \t\n'\"$`\\|&;<>()"):
			parts[i] = strconv.Quote(f.s)
		default:
			parts[i] = f.s
		}
	}
	return strings.Join(parts, " ")
}

// hijackVars change which program an allowed name runs, or run code of
// their own, so an allowlist refuses to set them.
var hijackVars = map[string]bool{
	"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"BASH_ENV": true, "ENV": true, "PROMPT_COMMAND": true, "SHELLOPTS": true, "BASHOPTS": true,
	"GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_EXTERNAL_DIFF": true, "GIT_PAGER": true,
	"GIT_EDITOR": true, "GIT_EXEC_PATH": true, "GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true,
	"GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true, "PAGER": true, "EDITOR": true, "VISUAL": true,
	"PYTHONSTARTUP": true, "PYTHONPATH": true, "PERL5OPT": true, "NODE_OPTIONS": true,
}

func (j *judge) checkEnvName(name, command string) {
	if j.mode != Allowlist {
		return
	}
	if hijackVars[name] || strings.HasPrefix(name, "BASH_FUNC_") || strings.HasPrefix(name, "GIT_CONFIG_") {
		j.decide(Forbid, RuleEnvHijack, "Setting "+name+" changes what allowed commands run, which an allowlist cannot check. Run the command without it.", command)
	}
}

// setVar records an assignment: a known value, or (f not known) an
// unknown one.
func (j *judge) setVar(name string, f field, command string) {
	j.checkEnvName(name, command)
	if f.known && len(f.s) <= maxVarLen {
		j.sc.vars[name] = f.s
	} else {
		delete(j.sc.vars, name)
	}
}

func (j *judge) assign(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	name := a.Name.Value
	cmd := strings.TrimSpace(j.text(a))
	if a.Array != nil || a.Index != nil {
		j.setVar(name, field{}, cmd)
		return
	}
	var f field
	if a.Value == nil {
		f = field{known: true}
	} else if s, ok := j.literal(a.Value); ok {
		f = field{s: s, known: true}
	}
	if a.Append {
		old, ok := j.sc.vars[name]
		f = field{s: old + f.s, known: ok && f.known}
	}
	j.setVar(name, f, cmd)
}

func (j *judge) decl(c *syntax.DeclClause, fl flow) {
	j.substs(c, fl)
	variant := c.Variant.Value
	argv := []field{{s: variant, known: true}}
	opaque := false // -n, -a, -A: names, arrays
	export := variant == "export"
	for _, a := range c.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			s, ok := j.literal(a.Value)
			switch {
			case !ok:
				argv = append(argv, field{src: j.text(a.Value)})
				if j.mode == Allowlist {
					j.decide(Forbid, RuleUnresolvable, "The name assigned by "+variant+" is not known before the command runs; in allowlist mode assignments must be written literally.", j.text(c))
				}
			case strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+"):
				argv = append(argv, field{s: s, known: true})
				opaque = opaque || strings.ContainsAny(s, "naA")
				export = export || (s[0] == '-' && strings.Contains(s, "x"))
			default:
				argv = append(argv, field{s: s, known: true})
			}
		}
	}
	for _, a := range c.Args {
		if a.Name == nil {
			continue
		}
		if export {
			j.exported[a.Name.Value] = true
		}
		if a.Naked {
			j.checkEnvName(a.Name.Value, j.text(c))
			argv = append(argv, field{s: a.Name.Value, known: true})
			continue
		}
		if opaque {
			j.setVar(a.Name.Value, field{}, j.text(c))
		} else {
			j.assign(a)
		}
		v, ok := j.sc.vars[a.Name.Value]
		argv = append(argv, field{s: a.Name.Value + "=" + v, known: ok, src: j.text(a)})
	}
	j.names = append(j.names, variant)
	j.applyRules(newProgram(variant), argv, fl, display(argv))
}

func splitFields(s string) []field {
	var out []field
	for _, w := range strings.Fields(s) {
		out = append(out, field{s: w, known: true})
	}
	return out
}

func (f field) String() string {
	if f.known {
		return f.s
	}
	return fmt.Sprintf("<%s>", f.src)
}

package policy

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Verdict is the judgment of one command line: the strictest decision
// any of its simple commands got, and which rule gave it.
type Verdict struct {
	Decision Decision `json:"decision"`
	// Rule is the id of the deciding rule: a policy's own, a built-in
	// one, or one of unresolvable, not-allowlisted, env-hijack,
	// unparsable, too-complex. Empty when everything is allowed.
	Rule          string `json:"rule,omitempty"`
	Justification string `json:"justification,omitempty"`
	// Command is the simple command that decided, its words resolved as
	// far as they could be (after unwrapping env, sudo, xargs, ...).
	Command string `json:"command,omitempty"`
	// Hint says what is allowed; in allowlist mode, the allowed commands.
	Hint string `json:"hint,omitempty"`
}

// Bounds on the work one command line may cost, whatever it contains.
const (
	maxDepth  = 4     // nested shells: bash -c, eval, sh <<EOF, function calls
	maxVarLen = 1024  // longer values are treated as unknown
	maxFields = 1024  // fields one word may expand to (brace expansion)
	maxSteps  = 20000 // statements walked per judgment
)

// Rule ids the judge gives when no policy rule decides.
const (
	RuleUnresolvable   = "unresolvable"
	RuleNotAllowlisted = "not-allowlisted"
	RuleEnvHijack      = "env-hijack"
	RuleUnparsable     = "unparsable"
	RuleTooComplex     = "too-complex"
)

type field struct {
	s     string
	known bool
	src   string // the word as written, when not known
}

type funcDef struct {
	body *syntax.Stmt
	src  string
	// certain: the definition ran for sure before the call. Otherwise
	// the call may reach a program of the same name, judged as well.
	certain bool
	called  bool
}

// scope is what the shell knows at a point of the command line.
type scope struct {
	vars    map[string]string // known values; a missing name is unknown
	funcs   map[string]*funcDef
	aliases map[string]string
	cwd     string // the working directory, "" when not known
}

func newScope() *scope {
	return &scope{
		// HOME stands for itself, so that ~ and $HOME reach rules as "~".
		vars:    map[string]string{"IFS": " \t\n", "HOME": "~"},
		funcs:   map[string]*funcDef{},
		aliases: map[string]string{},
		cwd:     workDir,
	}
}

func (s *scope) clone() *scope {
	c := &scope{vars: maps.Clone(s.vars), funcs: make(map[string]*funcDef, len(s.funcs)), aliases: maps.Clone(s.aliases), cwd: s.cwd}
	for k, f := range s.funcs {
		cp := *f
		c.funcs[k] = &cp
	}
	return c
}

// mergeMaybe folds in what a branch that may or may not have run did:
// a variable it changed becomes unknown; a function or alias it defined
// becomes possible.
func (s *scope) mergeMaybe(b *scope) {
	if b.cwd != s.cwd {
		s.cwd = ""
	}
	for k, v := range s.vars {
		if bv, ok := b.vars[k]; !ok || bv != v {
			delete(s.vars, k)
		}
	}
	for k, f := range b.funcs {
		if old, ok := s.funcs[k]; !ok || old.body != f.body {
			cp := *f
			cp.certain = false
			s.funcs[k] = &cp
		} else if f.called {
			old.called = true
		}
	}
	maps.Copy(s.aliases, b.aliases)
}

type stdinKind int

const (
	stdinNone    stdinKind = iota // the caller's input (empty in a sandbox)
	stdinText                     // known text: a here-document, echo ... |
	stdinUnknown                  // a pipe or file whose content is not known
)

// flow is what surrounds a simple command: where its input comes from,
// where its output goes, and which commands feed it.
type flow struct {
	feeders []string
	redirs  []string
	writes  []target // the output redirections' targets, resolved
	stdin   stdinKind
	text    string
}

type judge struct {
	mode     Mode
	rules    []Rule
	v        Verdict
	sc       *scope
	src      string
	depth    int
	steps    int
	names    []string // base names of the programs judged, in order
	calling  map[string]bool
	aliasing map[string]bool
	exported map[string]bool
	record   bool // History.Add: learn definitions, decide nothing
	env      envView
	free     []*expand.Config
}

// cfg lends an expansion config; release gives it back. Expansions
// nest (an echo substitution is expanded inside another word) and a
// config holds buffers, so each level has its own.
func (j *judge) cfg() *expand.Config {
	if n := len(j.free); n > 0 {
		c := j.free[n-1]
		j.free = j.free[:n-1]
		return c
	}
	return &expand.Config{
		Env:       j.env,
		NoUnset:   true,
		CmdSubst:  j.cmdSubstOutput,
		ProcSubst: procSubstPath,
	}
}

func (j *judge) release(c *expand.Config) { j.free = append(j.free, c) }

func procSubstPath(*syntax.ProcSubst) (string, error) { return "/dev/fd/63", nil }

var builtinRules = sync.OnceValue(func() []Rule {
	p, err := Parse(builtinJSON)
	if err != nil {
		panic("policy: built-in denylist: " + err.Error())
	}
	return p.Rules
})

// Builtin returns the built-in denylist's rules (a copy).
func Builtin() []Rule { return append([]Rule(nil), builtinRules()...) }

var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

func parse(src string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	return p.Parse(strings.NewReader(src), "")
}

// Judge decides whether command may run under the policy. h, when not
// nil, holds the chat's earlier commands: the aliases, functions and
// exported variables they defined count. Judge does not add command to
// h (see History.Add). The result is deterministic: the strictest
// decision wins, and between equals the first in the command line.
func (p Policy) Judge(command string, h *History) Verdict {
	rules := p.Rules
	if p.builtin() {
		rules = append(append([]Rule(nil), p.Rules...), builtinRules()...)
	}
	j := newJudge(p.mode(), rules, h)
	j.src = command
	j.script(command, flow{})
	j.uncalled()
	v := j.v
	if v.Decision == "" {
		v.Decision = Allow
	}
	if v.Decision != Allow && p.mode() == Allowlist {
		if names := p.AllowedCommands(); len(names) > 0 {
			v.Hint = "allowed commands: " + strings.Join(names, ", ")
		} else {
			v.Hint = "this policy allows no command"
		}
	}
	return v
}

func newJudge(mode Mode, rules []Rule, h *History) *judge {
	j := &judge{mode: mode, rules: rules, sc: newScope(), calling: map[string]bool{}, aliasing: map[string]bool{}, exported: map[string]bool{}}
	if h != nil {
		h.mu.RLock()
		maps.Copy(j.sc.vars, h.vars)
		for k, f := range h.funcs {
			cp := *f
			j.sc.funcs[k] = &cp
		}
		maps.Copy(j.sc.aliases, h.aliases)
		j.sc.cwd = h.cwd
		h.mu.RUnlock()
	}
	j.env = envView{j}
	return j
}

func (j *judge) decide(d Decision, rule, justification, command string) {
	if j.record {
		return
	}
	if j.v.Decision == "" || d.rank() > j.v.Decision.rank() {
		j.v = Verdict{Decision: d, Rule: rule, Justification: justification, Command: command}
	}
}

func (j *judge) over() bool {
	j.steps++
	if j.steps > maxSteps {
		j.decide(Forbid, RuleTooComplex, "The command line is too complex to check. Split it into smaller commands.", "")
		return true
	}
	return false
}

// script judges a command line written in shell syntax.
func (j *judge) script(src string, fl flow) {
	f, err := parse(src)
	if err != nil {
		j.decide(Forbid, RuleUnparsable, "The command could not be parsed as a shell command line ("+err.Error()+"). Write it in plain bash syntax.", src)
		return
	}
	saved := j.src
	j.src = src
	j.stmts(f.Stmts, fl)
	j.src = saved
}

// nested judges a script another shell runs (bash -c, eval, sh <<EOF).
// fresh: a new process, which sees no unexported variable of ours.
func (j *judge) nested(src string, fl flow, fresh bool, positional []field) {
	if j.depth >= maxDepth {
		j.decide(Forbid, RuleTooComplex, "Shells nested this deep cannot be checked. Run the inner command directly.", src)
		return
	}
	j.depth++
	defer func() { j.depth-- }()
	if !fresh {
		j.script(src, fl)
		return
	}
	saved := j.sc
	j.sc = saved.clone()
	j.sc.vars = map[string]string{"IFS": " \t\n", "HOME": "~"}
	for i, f := range positional {
		if f.known {
			j.sc.vars[strconv.Itoa(i)] = f.s
		}
	}
	j.script(src, fl)
	j.sc = saved
}

func (j *judge) stmts(ss []*syntax.Stmt, fl flow) {
	for _, s := range ss {
		j.stmt(s, fl)
	}
}

func (j *judge) stmt(s *syntax.Stmt, fl flow) {
	if s == nil || j.over() {
		return
	}
	for _, r := range s.Redirs {
		if r.Word != nil {
			j.substs(r.Word, fl)
		}
		if r.Hdoc != nil {
			j.substs(r.Hdoc, fl)
		}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll, syntax.AppAll, syntax.RdrInOut:
			t, ok := j.literal(r.Word)
			if ok {
				fl.redirs = append(fl.redirs[:len(fl.redirs):len(fl.redirs)], cleanArg(t))
			} else {
				t = j.text(r.Word)
			}
			fl.writes = append(fl.writes[:len(fl.writes):len(fl.writes)], j.redirTarget(t, ok))
		case syntax.Hdoc, syntax.DashHdoc:
			fl.stdin, fl.text = stdinUnknown, ""
			if t, ok := j.heredoc(r); ok {
				fl.stdin, fl.text = stdinText, t
			}
		case syntax.WordHdoc:
			fl.stdin, fl.text = stdinUnknown, ""
			if t, ok := j.literal(r.Word); ok {
				fl.stdin, fl.text = stdinText, t+"\n"
			}
		case syntax.RdrIn:
			fl.stdin, fl.text = stdinUnknown, ""
		}
	}
	j.command(s.Cmd, fl)
}

func (j *judge) heredoc(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	quoted := false
	for _, p := range r.Word.Parts {
		if _, ok := p.(*syntax.Lit); !ok {
			quoted = true
		} else if strings.Contains(p.(*syntax.Lit).Value, `\`) {
			quoted = true
		}
	}
	if quoted {
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			l, ok := p.(*syntax.Lit)
			if !ok {
				return "", false
			}
			b.WriteString(l.Value)
		}
		return b.String(), true
	}
	if !j.resolvable(r.Hdoc) {
		return "", false
	}
	cfg := j.cfg()
	defer j.release(cfg)
	s, err := expand.Document(cfg, r.Hdoc)
	return s, err == nil
}

func (j *judge) command(cmd syntax.Command, fl flow) {
	switch c := cmd.(type) {
	case nil:
		// A bare redirection (> /etc/passwd) truncates its target as
		// ':' would: judge it so, or its target escapes every rule.
		if len(fl.redirs) > 0 {
			j.simple([]field{{s: ":", src: ":", known: true}}, fl, false)
		}
	case *syntax.CallExpr:
		j.call(c, fl)
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt:
			j.andChain(c, fl)
		case syntax.OrStmt:
			j.stmt(c.X, fl)
			j.maybe(func() { j.stmt(c.Y, fl) })
		default: // | and |&: every stage is a subshell (but lastpipe)
			start := len(j.names)
			out, known := j.output(c.X, fl)
			j.maybe(func() { j.stmt(c.X, fl) })
			fy := fl
			fy.feeders = append(append([]string(nil), fl.feeders...), j.names[start:]...)
			fy.stdin, fy.text = stdinUnknown, ""
			if known {
				fy.stdin, fy.text = stdinText, out
			}
			j.maybe(func() { j.stmt(c.Y, fy) })
		}
	case *syntax.Subshell:
		j.isolated(func() { j.stmts(c.Stmts, fl) })
	case *syntax.Block:
		j.stmts(c.Stmts, fl)
	case *syntax.IfClause:
		j.stmts(c.Cond, fl)
		j.maybe(func() { j.stmts(c.Then, fl) })
		if c.Else != nil {
			j.maybe(func() { j.command(c.Else, fl) })
		}
	case *syntax.WhileClause:
		j.loop(func() { j.stmts(c.Cond, fl); j.stmts(c.Do, fl) })
	case *syntax.ForClause:
		j.forClause(c, fl)
	case *syntax.CaseClause:
		j.substs(c.Word, fl)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				j.substs(p, fl)
			}
			j.maybe(func() { j.stmts(it.Stmts, fl) })
		}
	case *syntax.FuncDecl:
		j.funcDecl(c)
	case *syntax.DeclClause:
		j.decl(c, fl)
	case *syntax.TimeClause:
		j.stmt(c.Stmt, fl)
	case *syntax.CoprocClause:
		j.maybe(func() { j.stmt(c.Stmt, fl) })
	case *syntax.TestDecl:
		j.stmt(c.Body, fl)
	default: // (( )), [[ ]], let: only substitutions run commands
		j.substs(c, fl)
	}
}

// andChain judges a && b && c: each runs only when all before it
// succeeded, so each sees what those did (cd /etc && echo x > f writes
// /etc/f); afterwards the shell may be in the state after any of them.
func (j *judge) andChain(c *syntax.BinaryCmd, fl flow) {
	var chain []*syntax.Stmt
	for x := c; ; {
		chain = append(chain, x.Y)
		b, ok := x.X.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.AndStmt || len(x.X.Redirs) > 0 || x.X.Negated || x.X.Background {
			chain = append(chain, x.X)
			break
		}
		x = b
	}
	slices.Reverse(chain)
	j.stmt(chain[0], fl)
	saved := j.sc
	merged := saved.clone()
	j.sc = saved.clone()
	for _, st := range chain[1:] {
		j.stmt(st, fl)
		merged.mergeMaybe(j.sc)
	}
	j.sc = merged
}

// maybe runs fn on a copy of the scope and folds back what it may have
// changed.
func (j *judge) maybe(fn func()) {
	saved := j.sc
	j.sc = saved.clone()
	fn()
	saved.mergeMaybe(j.sc)
	j.sc = saved
}

// isolated runs fn in a subshell: nothing it defines is seen after it.
func (j *judge) isolated(fn func()) {
	saved := j.sc
	j.sc = saved.clone()
	fn()
	j.sc = saved
}

// loop judges a loop body twice: the second time with what the first
// iteration may have changed.
func (j *judge) loop(body func()) {
	j.maybe(body)
	j.maybe(body)
}

func (j *judge) forClause(c *syntax.ForClause, fl flow) {
	wi, ok := c.Loop.(*syntax.WordIter)
	if !ok {
		j.substs(c.Loop, fl)
		j.loop(func() { j.stmts(c.Do, fl) })
		return
	}
	for _, w := range wi.Items {
		j.substs(w, fl)
	}
	items := j.fields(wi.Items)
	name := wi.Name.Value
	allKnown := len(items) <= 8
	for _, it := range items {
		allKnown = allKnown && it.known
	}
	if !allKnown || !wi.InPos.IsValid() {
		j.maybe(func() {
			j.setVar(name, field{}, "for "+name)
			j.loop(func() { j.stmts(c.Do, fl) })
		})
		return
	}
	j.maybe(func() { // the iterations in order; break may end them early
		for _, it := range items {
			j.setVar(name, it, "for "+name)
			j.maybe(func() { j.stmts(c.Do, fl) })
		}
	})
}

func (j *judge) funcDecl(c *syntax.FuncDecl) {
	names := c.Names
	if c.Name != nil {
		names = append(names, c.Name)
	}
	for _, n := range names {
		j.sc.funcs[n.Value] = &funcDef{body: c.Body, src: j.src, certain: true}
		if forkBomb(n.Value, c.Body) {
			for _, r := range j.rules {
				if r.Check == CheckForkBomb && (r.WhenMode == "" || r.WhenMode == j.mode) {
					j.decide(r.Decision, r.ID, r.Justification, strings.TrimSpace(j.text(c)))
				}
			}
		}
	}
}

// uncalled judges the bodies of functions this command line defined and
// never called: they may still run (trap, export -f, an unresolved name).
func (j *judge) uncalled() {
	names := make([]string, 0, len(j.sc.funcs))
	for k, f := range j.sc.funcs {
		if !f.called && f.src == j.src {
			names = append(names, k)
		}
	}
	sortStrings(names)
	for _, k := range names {
		f := j.sc.funcs[k]
		f.called = true
		saved := j.src
		j.src = f.src
		j.isolated(func() { j.stmt(f.body, flow{}) })
		j.src = saved
	}
}

// forkBomb: a function that runs itself in a pipeline or in the
// background.
func forkBomb(name string, body *syntax.Stmt) bool {
	calls := func(n syntax.Node) bool {
		found := false
		syntax.Walk(n, func(x syntax.Node) bool {
			if ce, ok := x.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
				if s, ok := plainWord(ce.Args[0]); ok && s == name {
					found = true
				}
			}
			return !found
		})
		return found
	}
	bomb := false
	syntax.Walk(body, func(x syntax.Node) bool {
		switch t := x.(type) {
		case *syntax.Stmt:
			if t.Background && calls(t) {
				bomb = true
			}
		case *syntax.BinaryCmd:
			if (t.Op == syntax.Pipe || t.Op == syntax.PipeAll) && (calls(t.X) || calls(t.Y)) {
				bomb = true
			}
		}
		return !bomb
	})
	return bomb
}

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

func splitFields(s string) []field {
	var out []field
	for _, w := range strings.Fields(s) {
		out = append(out, field{s: w, known: true})
	}
	return out
}

// History is what a chat's earlier commands left defined for the next
// ones: exported variables, functions and aliases. Functions and aliases
// do not outlive a command in Flowbox's shell, but a history keeps them
// as possible, so that the next command's use of them is judged both
// ways. It is safe for concurrent use.
type History struct {
	mu      sync.RWMutex
	vars    map[string]string
	funcs   map[string]*funcDef
	aliases map[string]string
	cwd     string // where the shell is, "" when not known
}

// NewHistory replays commands, oldest first.
func NewHistory(commands ...string) *History {
	h := &History{vars: map[string]string{}, funcs: map[string]*funcDef{}, aliases: map[string]string{}, cwd: workDir}
	for _, c := range commands {
		h.Add(c)
	}
	return h
}

// Add records a command that ran.
func (h *History) Add(command string) {
	j := newJudge(Denylist, nil, h)
	j.record = true
	j.script(command, flow{})
	h.mu.Lock()
	defer h.mu.Unlock()
	vars := map[string]string{}
	for k, v := range j.sc.vars {
		_, had := h.vars[k]
		if (had || j.exported[k]) && k != "IFS" && k != "HOME" {
			vars[k] = v
		}
	}
	h.vars = vars
	h.cwd = j.sc.cwd
	for k, f := range j.sc.funcs {
		cp := *f
		cp.certain, cp.called = false, true
		h.funcs[k] = &cp
	}
	maps.Copy(h.aliases, j.sc.aliases)
	for k := range h.aliases {
		if _, ok := j.sc.aliases[k]; !ok {
			delete(h.aliases, k)
		}
	}
}

func (f field) String() string {
	if f.known {
		return f.s
	}
	return fmt.Sprintf("<%s>", f.src)
}

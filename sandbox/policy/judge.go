package policy

import (
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

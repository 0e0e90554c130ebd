// Package redact finds secrets (API keys, tokens, passwords, private keys)
// in the text a sandbox produces and replaces them before that text reaches
// the model, the browser, the stored history, the audit or the logs.
//
// A Redactor is built from a Config: built-in detectors (see Detectors),
// opt-in ones (email, credit_card) and custom regex rules, each with a
// strategy (redact, mask, hash, block). Redactor.Redact rewrites a whole
// string; Redactor.Transformer rewrites a live output stream chunk by chunk
// and catches a secret cut across chunks; Middleware plugs both into the
// sandbox chain.
//
// The built-in detectors are gitleaks' default rule set (some 220 provider
// formats, each with keywords, an expression, an entropy threshold and
// allowlists), read from the gitleaks module's config package, plus a few
// detectors of context that a provider's format does not describe: private
// key blocks across lines, Authorization and Bearer credentials, passwords
// in URLs, and literal values assigned to secret-sounding names. Values
// that are code (os.environ["X"], getpass(), ${{ secrets.X }}) are left as
// they are.
//
// Detection is cheap literal scanning first: a detector runs only where one
// of its keywords appears, so ordinary output costs one pass over the
// bytes. It must never return or log a secret it found: a Finding carries
// the detector and a count, nothing else.
//
// Known residual: a secret that is encoded (base64, hex, URL-escaped,
// split across strings) is not recognised; nor is one whose format no rule
// describes and that is not assigned to a secret-sounding name.
package redact

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Strategy says what replaces a secret.
type Strategy string

const (
	// Redact replaces the secret with [REDACTED:<id>].
	Redact Strategy = "redact"
	// Mask keeps a few leading characters and replaces the rest with a
	// fixed run of '*', so that the length is not told either.
	Mask Strategy = "mask"
	// Hash replaces the secret with [HASH:<id>:<8 hex>], a keyed
	// HMAC-SHA256 of it: the same secret gives the same mark across
	// outputs, and the mark cannot be turned back into the secret.
	Hash Strategy = "hash"
	// Block withholds the whole output, replaced by a message naming the
	// detector. In a stream, what was already let out stays out (it held
	// no secret); everything from the secret on is withheld.
	Block Strategy = "block"
)

func (s Strategy) valid() bool {
	switch s {
	case Redact, Mask, Hash, Block:
		return true
	}
	return false
}

// Config chooses what is redacted and how. The zero value turns on every
// built-in detector that is not opt-in, with the redact strategy.
type Config struct {
	// Disable names built-in detectors to turn off.
	Disable []string `json:"disable,omitempty"`
	// Enable names opt-in detectors to turn on (email, credit_card).
	Enable []string `json:"enable,omitempty"`
	// Rules are custom detectors.
	Rules []Rule `json:"rules,omitempty"`
	// DefaultStrategy applies to every detector without a strategy of its
	// own; empty means redact.
	DefaultStrategy Strategy `json:"defaultStrategy,omitempty"`
	// Strategies maps a detector or rule id to its strategy; it wins over
	// Rule.Strategy and DefaultStrategy.
	Strategies map[string]Strategy `json:"strategies,omitempty"`
	// HashKey keys the hash strategy. Required when any detector uses it:
	// without a key, a short password's hash could be guessed.
	HashKey string `json:"hashKey,omitempty"`
	// MaskKeep is how many leading characters mask keeps (default 4; never
	// more than a third of the secret).
	MaskKeep int `json:"maskKeep,omitempty"`
	// MaxHold bounds the bytes a stream holds back per stream while it
	// waits for the end of a line or of a private key block (default
	// 64 KiB, at least 4 KiB). See Transformer for what happens beyond it.
	MaxHold int `json:"maxHold,omitempty"`
	// Files, in the operator's configuration, redacts the file API's
	// reads and downloads too (text files; a folder's ZIP is refused
	// then, since an archive cannot be redacted as it streams). An app
	// can turn it on, not off.
	Files bool `json:"files,omitempty"`
}

// Rule is a custom detector: an RE2 regular expression matched within one
// line at a time.
type Rule struct {
	// ID names the rule in markers and findings: letters, digits, '_',
	// '-' and '.'.
	ID string `json:"id"`
	// Pattern is the expression (Go RE2 syntax). When it has a capture
	// group, only the first group's text is replaced (for example
	// `ticket=(\w+)` keeps "ticket=").
	Pattern string `json:"pattern"`
	// Keywords, when set, are literals (matched case-insensitively) one of
	// which a line must contain for the rule to run on it. Without them
	// the pattern's literal prefix is used; a rule with neither runs on
	// every line, which costs regular-expression speed, and makes a stream
	// hold back each line until it ends.
	Keywords []string `json:"keywords,omitempty"`
	// Strategy of the rule; empty means the default.
	Strategy Strategy `json:"strategy,omitempty"`
}

// Merge combines the operator's configuration with an app's: the app adds
// rules and opt-in detectors, and sets strategies for its own rules. It
// cannot turn off or soften what the operator set; its Disable, its
// strategies for other ids and its global settings are ignored.
func Merge(operator, app Config) Config {
	out := operator
	out.Files = operator.Files || app.Files
	out.Enable = append(slices.Clip(operator.Enable), app.Enable...)
	out.Rules = append(slices.Clip(operator.Rules), app.Rules...)
	own := map[string]bool{}
	for _, r := range app.Rules {
		own[r.ID] = true
	}
	if len(app.Strategies) > 0 {
		out.Strategies = make(map[string]Strategy, len(operator.Strategies)+len(app.Strategies))
		for id, s := range app.Strategies {
			if own[id] {
				out.Strategies[id] = s
			}
		}
		for id, s := range operator.Strategies {
			out.Strategies[id] = s
		}
	}
	return out
}

// Finding says that a detector matched, and how often. It never holds the
// secret.
type Finding struct {
	ID       string   `json:"id"`
	Strategy Strategy `json:"strategy"`
	Count    int      `json:"count"`
}

// rule is one active detector, built-in or custom.
type rule struct {
	id       string
	strategy Strategy
	prio     int
	det      *detector      // built-in, hand-written
	gl       *glRule        // built-in, from gitleaks
	re       *regexp.Regexp // custom
	keywords []string       // custom: lowercased trigger literals
}

// Redactor redacts text. It is safe for concurrent use; a Transformer is
// not (one per stream).
type Redactor struct {
	rules    []rule
	gl       *glSet
	trig     triggerTable
	scanAll  []int // rules that scan the whole text themselves
	anyLine  []int // custom rules run on every line
	hashKey  []byte
	maskKeep int
	maxHold  int
	hasBlock bool
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// New builds a Redactor. It refuses unknown detector ids, invalid
// strategies and patterns, duplicate ids, and the hash strategy without a
// key.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{hashKey: []byte(cfg.HashKey), maskKeep: cfg.MaskKeep, maxHold: cfg.MaxHold}
	if r.maskKeep <= 0 {
		r.maskKeep = 4
	}
	if r.maxHold <= 0 {
		r.maxHold = 64 << 10
	}
	r.maxHold = max(r.maxHold, 4<<10)
	def := cfg.DefaultStrategy
	if def == "" {
		def = Redact
	}
	if !def.valid() {
		return nil, fmt.Errorf("redaction config: default strategy %q is not one of redact, mask, hash, block", def)
	}
	gl, err := loadGitleaks()
	if err != nil {
		return nil, fmt.Errorf("redaction config: %w", err)
	}
	known := map[string]*detector{}
	for i := range builtins {
		known[builtins[i].id] = &builtins[i]
	}
	off, on := map[string]bool{}, map[string]bool{}
	for _, id := range cfg.Disable {
		switch {
		case known[id] != nil || gl.byID[id] != nil:
			off[id] = true
		case legacyIDs[id] != nil:
			for _, g := range legacyIDs[id] {
				off[g] = true
			}
		default:
			return nil, fmt.Errorf("redaction config: disable: no built-in detector %q (the list is in docs/POLICY.md, under redaction)", id)
		}
	}
	strategies := make(map[string]Strategy, len(cfg.Strategies))
	for id, st := range cfg.Strategies {
		for _, g := range legacyIDs[id] {
			if _, set := cfg.Strategies[g]; !set {
				strategies[g] = st
			}
		}
		if legacyIDs[id] == nil {
			strategies[id] = st
		}
	}
	for _, id := range cfg.Enable {
		if d := known[id]; d == nil || !d.optIn {
			return nil, fmt.Errorf("redaction config: enable: no opt-in detector %q", id)
		}
		on[id] = true
	}
	ids := map[string]bool{}
	for id := range known {
		ids[id] = true
	}
	for id := range gl.byID {
		ids[id] = true
	}
	for id := range legacyIDs {
		ids[id] = true
	}
	strategy := func(id string, own Strategy) (Strategy, error) {
		s := def
		if own != "" {
			s = own
		}
		if o, ok := strategies[id]; ok {
			s = o
		}
		if !s.valid() {
			return "", fmt.Errorf("redaction config: strategy %q of %q is not one of redact, mask, hash, block", s, id)
		}
		return s, nil
	}
	for i := range builtins {
		d := &builtins[i]
		if off[d.id] || (d.optIn && !on[d.id]) {
			continue
		}
		s, err := strategy(d.id, "")
		if err != nil {
			return nil, err
		}
		r.rules = append(r.rules, rule{id: d.id, strategy: s, prio: d.prio, det: d})
	}
	for i := range gl.rules {
		g := &gl.rules[i]
		if off[g.id] {
			continue
		}
		s, err := strategy(g.id, "")
		if err != nil {
			return nil, err
		}
		prio := prioToken
		if g.generic {
			prio = prioGeneric
		}
		r.rules = append(r.rules, rule{id: g.id, strategy: s, prio: prio, gl: g})
	}
	r.gl = gl
	for _, c := range cfg.Rules {
		if !idPattern.MatchString(c.ID) {
			return nil, fmt.Errorf("redaction config: rule id %q: use 1 to 64 letters, digits, '_', '-' or '.'", c.ID)
		}
		if ids[c.ID] {
			return nil, fmt.Errorf("redaction config: rule id %q is used twice or names a built-in detector", c.ID)
		}
		ids[c.ID] = true
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("redaction config: rule %q: %w", c.ID, err)
		}
		s, err := strategy(c.ID, c.Strategy)
		if err != nil {
			return nil, err
		}
		r.rules = append(r.rules, rule{id: c.ID, strategy: s, prio: prioCustom, re: re, keywords: customKeywords(c, re)})
	}
	for id := range cfg.Strategies {
		if !ids[id] {
			return nil, fmt.Errorf("redaction config: strategies: no detector or rule %q", id)
		}
	}
	var lits []literal
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.strategy == Hash && len(r.hashKey) == 0 {
			return nil, fmt.Errorf("redaction config: %q uses the hash strategy, which needs hashKey", ru.id)
		}
		r.hasBlock = r.hasBlock || ru.strategy == Block
		switch {
		case ru.det != nil && ru.det.scanAll != nil:
			r.scanAll = append(r.scanAll, i)
		case ru.det != nil:
			for _, t := range ru.det.triggers {
				lits = append(lits, literal{text: t, rule: i})
			}
		case ru.gl != nil:
			for _, k := range ru.gl.keywords {
				if len(k) >= 2 {
					lits = append(lits, literal{text: k, rule: i})
				}
			}
		default:
			if len(ru.keywords) == 0 {
				r.anyLine = append(r.anyLine, i)
			}
			for _, k := range ru.keywords {
				lits = append(lits, literal{text: k, rule: i})
			}
		}
	}
	r.trig.build(lits)
	return r, nil
}

// customKeywords are the lowercased literals that trigger a custom rule.
func customKeywords(c Rule, re *regexp.Regexp) []string {
	var out []string
	for _, k := range c.Keywords {
		if k = strings.ToLower(k); len(k) >= 2 {
			out = append(out, k)
		} else if k != "" {
			// A one-byte keyword filters nothing worth its cost.
			return nil
		}
	}
	if len(c.Keywords) == 0 {
		if p, _ := re.LiteralPrefix(); len(p) >= 2 {
			out = append(out, strings.ToLower(p))
		}
	}
	return out
}

// Detectors lists the built-in detectors: id and whether it is opt-in.
func Detectors() []struct {
	ID    string
	OptIn bool
} {
	out := make([]struct {
		ID    string
		OptIn bool
	}, len(builtins))
	for i, d := range builtins {
		out[i].ID, out[i].OptIn = d.id, d.optIn
	}
	if gl, err := loadGitleaks(); err == nil {
		for _, g := range gl.rules {
			out = append(out, struct {
				ID    string
				OptIn bool
			}{ID: g.id})
		}
	}
	return out
}

// Redact returns s with every secret replaced, and what was found. When a
// block detector matched, the whole of s is replaced by BlockMessage.
func (r *Redactor) Redact(s string) (string, []Finding) {
	if s == "" {
		return s, nil
	}
	sc := r.scan(s)
	defer sc.release()
	if len(sc.spans) == 0 {
		return s, nil
	}
	var f findings
	if r.hasBlock {
		for _, sp := range sc.spans {
			if ru := &r.rules[sp.rule]; ru.strategy == Block {
				f.add(ru)
				return BlockMessage(ru.id), f.list
			}
		}
	}
	var b strings.Builder
	b.Grow(len(s))
	r.apply(&b, s, 0, len(s), sc.spans, &f)
	return b.String(), f.list
}

// BlockMessage is what replaces output a block detector matched.
func BlockMessage(id string) string {
	return "[output withheld: it contained a secret (" + id + ")]"
}

// apply writes s[from:to] to b with the spans (sorted, disjoint, within
// [from, to]) replaced.
func (r *Redactor) apply(b *strings.Builder, s string, from, to int, spans []span, f *findings) {
	at := from
	for _, sp := range spans {
		b.WriteString(s[at:sp.start])
		ru := &r.rules[sp.rule]
		r.replace(b, ru, s[sp.start:sp.end])
		f.add(ru)
		at = sp.end
	}
	b.WriteString(s[at:to])
}

// writer is a strings.Builder or a bytes.Buffer.
type writer interface {
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

func (r *Redactor) replace(b writer, ru *rule, secret string) {
	switch ru.strategy {
	case Mask:
		keep := min(r.maskKeep, len(secret)/3)
		b.WriteString(secret[:keep])
		b.WriteString("********")
	case Hash:
		m := hmac.New(sha256.New, r.hashKey)
		m.Write([]byte(secret))
		b.WriteString("[HASH:")
		b.WriteString(ru.id)
		b.WriteByte(':')
		b.WriteString(hex.EncodeToString(m.Sum(nil)[:4]))
		b.WriteByte(']')
	default: // Redact; Block when a stream lets out what precedes it
		b.WriteString("[REDACTED:")
		b.WriteString(ru.id)
		b.WriteByte(']')
	}
}

// findings counts matches per rule, in order of first match.
type findings struct{ list []Finding }

func (f *findings) add(ru *rule) { f.merge(Finding{ID: ru.id, Strategy: ru.strategy, Count: 1}) }

func (f *findings) merge(x Finding) {
	for i := range f.list {
		if f.list[i].ID == x.ID {
			f.list[i].Count += x.Count
			return
		}
	}
	f.list = append(f.list, x)
}

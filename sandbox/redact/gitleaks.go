package redact

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"

	"github.com/spf13/viper"
	glconfig "github.com/zricethezav/gitleaks/v8/config"
)

// The provider formats (cloud keys, tokens of hundreds of services, JWTs,
// private keys written on one line) come from gitleaks' default rule set,
// which its config package embeds: each rule has keywords, a regular
// expression, an entropy threshold and allowlists. It is loaded the way
// gitleaks loads it (viper reads the TOML, Translate compiles it), so a
// dependency update is a rule set update; nothing here copies a rule.

// glRule is one gitleaks rule as the scanner runs it.
type glRule struct {
	id       string
	re       *regexp.Regexp
	group    int
	entropy  float64
	keywords []string
	allow    []*glconfig.Allowlist
	generic  bool // a keyword assignment rather than a provider's format
	// need is a literal every match contains (lowercase when fold), found
	// in the expression: a line without it is not run through it.
	need string
	fold bool
}

// glSet is the loaded rule set.
type glSet struct {
	rules  []glRule
	global []*glconfig.Allowlist
	byID   map[string]*glRule
}

// glSkip are gitleaks rules a hand-written detector here does better: the
// private key rule spans lines, which a line scanner cannot follow, and
// the PEM detector holds a block back while it streams.
var glSkip = map[string]bool{"private-key": true}

var loadGitleaks = sync.OnceValues(func() (*glSet, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(glconfig.DefaultConfig)); err != nil {
		return nil, fmt.Errorf("read gitleaks rules: %w", err)
	}
	var vc glconfig.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, fmt.Errorf("read gitleaks rules: %w", err)
	}
	c, err := vc.Translate()
	if err != nil {
		return nil, fmt.Errorf("compile gitleaks rules: %w", err)
	}
	set := &glSet{global: c.Allowlists, byID: map[string]*glRule{}}
	for _, r := range c.GetOrderedRules() {
		// Rules on file paths only, and rules that report only beside
		// another rule's finding, have nothing to redact on their own.
		if r.Regex == nil || glSkip[r.RuleID] || len(r.Keywords) == 0 {
			continue
		}
		set.rules = append(set.rules, glRule{
			id: r.RuleID, re: r.Regex, group: r.SecretGroup, entropy: r.Entropy,
			keywords: r.Keywords, allow: r.Allowlists, generic: strings.HasPrefix(r.RuleID, "generic"),
		})
	}
	for i := range set.rules {
		g := &set.rules[i]
		set.byID[g.id] = g
		if re, err := syntax.Parse(g.re.String(), syntax.Perl); err == nil {
			g.need, g.fold = requiredLiteral(re)
			if len(g.need) < 3 {
				g.need = ""
			}
		}
	}
	return set, nil
})

// legacyIDs maps the ids of the detectors this package had before it used
// gitleaks' rules to the rules that replaced them, so that an operator's
// Disable and Strategies keep meaning what they meant.
var legacyIDs = map[string][]string{
	"openai_key":     {"openai-api-key"},
	"anthropic_key":  {"anthropic-api-key", "anthropic-admin-api-key"},
	"google_api_key": {"gcp-api-key"},
	"aws_access_key": {"aws-access-token"},
	"github_token":   {"github-pat", "github-fine-grained-pat", "github-oauth", "github-app-token", "github-refresh-token"},
	"gitlab_token":   {"gitlab-pat"},
	"slack_token":    {"slack-bot-token", "slack-user-token", "slack-app-token", "slack-config-access-token", "slack-config-refresh-token", "slack-legacy-bot-token", "slack-legacy-token", "slack-legacy-workspace-token"},
	"slack_webhook":  {"slack-webhook-url"},
	"stripe_key":     {"stripe-access-token"},
}

// matchGitleaks runs rule g on the line s[ls:le] and adds the secret of
// each match that passes the rule's entropy threshold and allowlists.
func (sc *scanner) matchGitleaks(rule, ls, le int, g *glRule, set *glSet) {
	line := sc.s[ls:le]
	if g.need != "" && !containsLiteral(line, g.need, g.fold) {
		return
	}
	probe := line
	if strings.IndexByte(line, '&') >= 0 {
		// gitleaks' rules end a token at a blank, a quote or ';'. In
		// command output a token also ends at a URL query's '&'
		// (?key=AIza...&q=1); the same bytes with '&' as a blank keep
		// every offset.
		probe = strings.ReplaceAll(line, "&", " ")
	}
	for _, m := range g.re.FindAllStringSubmatchIndex(probe, -1) {
		start, end := m[0], m[1]
		if g.group > 0 && 2*g.group+1 < len(m) {
			start, end = m[2*g.group], m[2*g.group+1]
		} else {
			for k := 2; k+1 < len(m); k += 2 {
				if m[k] >= 0 && m[k+1] > m[k] {
					start, end = m[k], m[k+1]
					break
				}
			}
		}
		if start < 0 || end <= start {
			continue
		}
		secret := line[start:end]
		if g.entropy > 0 && entropy(secret) <= g.entropy {
			continue
		}
		if placeholder(secret) || (g.generic && codeValue(secret, line[end:])) {
			continue
		}
		match := line[m[0]:m[1]]
		if glAllowed(set.global, secret, match, line) || glAllowed(g.allow, secret, match, line) {
			continue
		}
		if !g.generic && isKeyByte(line[end-1]) {
			// Some formats stop at a length (ghp_ and 36 bytes): what
			// follows in the same run of key bytes is the same token, and
			// no tail of it is let out.
			end = run(line, end, isKeyByte)
		}
		sc.add(ls+start, ls+end, rule)
	}
}

// glAllowed applies gitleaks' allowlists as its detector does, for what
// has no file path or commit: regexes against the secret, the match or the
// line, and stop words in the secret.
func glAllowed(lists []*glconfig.Allowlist, secret, match, line string) bool {
	for _, a := range lists {
		target := secret
		switch a.RegexTarget {
		case "match":
			target = match
		case "line":
			target = line
		}
		re := a.RegexAllowed(target)
		sw, _ := a.ContainsStopWord(secret)
		if a.MatchCondition == glconfig.AllowlistMatchAnd {
			checks := []bool{}
			if len(a.Commits) > 0 || len(a.Paths) > 0 {
				checks = append(checks, false)
			}
			if len(a.Regexes) > 0 {
				checks = append(checks, re)
			}
			if len(a.StopWords) > 0 {
				checks = append(checks, sw)
			}
			all := len(checks) > 0
			for _, c := range checks {
				all = all && c
			}
			if all {
				return true
			}
		} else if re || sw {
			return true
		}
	}
	return false
}

// entropy is the Shannon entropy of s in bits per byte, as gitleaks
// measures it.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var e float64
	inv := 1 / float64(len(s))
	for _, c := range counts {
		if c > 0 {
			f := float64(c) * inv
			e -= f * math.Log2(f)
		}
	}
	return e
}

// requiredLiteral returns the longest ASCII literal that every match of re
// contains, and whether it is matched ignoring case (then lowercased).
func requiredLiteral(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= 0x80 {
				return "", false
			}
		}
		fold := re.Flags&syntax.FoldCase != 0
		if fold {
			return strings.ToLower(string(re.Rune)), true
		}
		return string(re.Rune), false
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		var best string
		var fold bool
		for _, sub := range re.Sub {
			if l, f := requiredLiteral(sub); len(l) > len(best) {
				best, fold = l, f
			}
		}
		return best, fold
	}
	return "", false
}

// containsLiteral reports whether s contains lit (lowercase, when fold:
// then ASCII case is ignored).
func containsLiteral(s, lit string, fold bool) bool {
	if !fold {
		return strings.Contains(s, lit)
	}
	for i := 0; i+len(lit) <= len(s); i++ {
		if lowerTab[s[i]] == lit[0] && hasFoldPrefix(s, i, lit) {
			return true
		}
	}
	return false
}

// assignmentAhead is a cheap necessary condition for gitleaks' generic
// rules, whose expressions cost far more than the rest of the scan: after
// the keyword that ends at i, within a name's length, an assignment
// operator followed by a value of at least 10 bytes. It returns where the
// first such value starts and ends, or -1. Ordinary lines that merely say
// "key" or "token" (most of a log's) never run the expression.
func assignmentAhead(s string, i, le int) (int, int) {
	lim := min(le, i+24)
	for j := i; j < lim; j++ {
		switch c := s[j]; {
		case c == '=' || c == '>' || c == ':' || c == ',' || c == '|' || c == '?':
			k := j + 1
			for m := 0; k < le && m < 8 && strings.IndexByte("`'\" \t=:|>?", s[k]) >= 0; m++ {
				k++
			}
			if e := run(s, k, func(c byte) bool { return isKeyByte(c) || c == '.' || c == '=' || c == '+' || c == '/' }); e-k >= 10 {
				return k, e
			}
		case isNameByte(c) || c == ' ' || c == '\t' || c == '\'' || c == '"':
		default:
			return -1, -1
		}
	}
	return -1, -1
}

// codeValue reports whether an unquoted assigned value is an expression
// rather than a literal: a call or an index (getpass(), os.environ["X"]) or
// a dotted name (settings.SECRET_KEY, self.token). Code that reads a
// secret from somewhere is left as it is; only literals are secrets.
func codeValue(v, after string) bool {
	if strings.ContainsAny(v, "([{") || (after != "" && (after[0] == '(' || after[0] == '[')) {
		return true
	}
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || !(isUpper(p[0]) || isLower(p[0]) || p[0] == '_') {
			return false
		}
		for i := 0; i < len(p); i++ {
			if !isAlnum(p[i]) && p[i] != '_' {
				return false
			}
		}
	}
	return true
}

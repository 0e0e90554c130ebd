package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ParsePatterns checks and normalises an allowlist: each entry is a host
// name ("pypi.org") or a suffix pattern ("*.pythonhosted.org", which
// matches names under pythonhosted.org but not the name itself), in any
// case, without scheme, port, path or trailing dot. IP addresses and
// catch-alls ("*", "*.com" is allowed, "*" alone is not) are refused:
// an allowlist names hosts.
func ParsePatterns(list []string) ([]string, error) {
	var out []string
	var errs []error
	for _, raw := range list {
		p := strings.ToLower(strings.TrimSpace(raw))
		if p == "" {
			continue
		}
		name, wild := strings.CutPrefix(p, "*.")
		if err := checkName(name); err != nil {
			errs = append(errs, fmt.Errorf("egress pattern %q: %w", raw, err))
			continue
		}
		if wild {
			name = "*." + name
		}
		out = append(out, name)
	}
	return out, errors.Join(errs...)
}

// checkName says why name is not a plain DNS host name: letters, digits
// and hyphens in dot-separated labels of 1 to 63 characters, at most 253
// in all, and a last label that is not numeric (which URL parsers and
// inet_aton read as an IPv4 address: "2130706433", "0x7f.1", "127.1").
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty host name")
	case len(name) > 253:
		return errors.New("host name longer than 253 characters")
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return errors.New("an IP address, not a host name")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return errors.New("empty or over-long label (a trailing dot, or two dots)")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("a label starts or ends with a hyphen")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("character %q is not allowed in a host name", c)
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return errors.New("a numeric last label: an IP address in another notation")
	}
	return nil
}

// numeric reports whether a label reads as a number in decimal, octal or
// hexadecimal ("0x1f").
func numeric(l string) bool {
	digits := l
	if h, ok := strings.CutPrefix(l, "0x"); ok {
		digits = h
		if digits == "" {
			return true
		}
		for i := 0; i < len(digits); i++ {
			c := digits[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

// Match reports whether host (as a client sent it, any case) is allowed
// by patterns, which ParsePatterns normalised. A host that is no plain
// name (an IP literal in any notation, a trailing dot) never matches.
func Match(patterns []string, host string) bool {
	host = strings.ToLower(host)
	if checkName(host) != nil {
		return false
	}
	for _, p := range patterns {
		if covers(p, host) {
			return true
		}
	}
	return false
}

// covers reports whether pattern p allows every host that pattern q
// allows; with q a plain name, whether p allows that name.
func covers(p, q string) bool {
	if p == q {
		return true
	}
	suffix, ok := strings.CutPrefix(p, "*")
	if !ok {
		return false
	}
	// "*.a.org" covers "b.a.org" and "*.b.a.org", not "a.org".
	return strings.HasSuffix(strings.TrimPrefix(q, "*"), suffix) && len(strings.TrimPrefix(q, "*")) > len(suffix)
}

// Narrow returns the patterns of app that operator covers: an app can
// tighten the operator's allowlist, never widen it. Both are normalised
// first; invalid entries of app are dropped.
func Narrow(operator, app []string) []string {
	op, _ := ParsePatterns(operator)
	ap, _ := ParsePatterns(app)
	out := []string{}
	for _, q := range ap {
		for _, p := range op {
			if covers(p, q) {
				out = append(out, q)
				break
			}
		}
	}
	return out
}

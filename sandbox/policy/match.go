package policy

import (
	"path"
	"sort"
	"strings"
)

func sortStrings(s []string) { sort.Strings(s) }

// glob matches s against a shell-style pattern: * (any run of bytes, /
// included), ? (one byte), [abc], [a-z], [!x]; \ quotes the next byte.
func glob(pattern, s string) bool {
	px, sx := 0, 0
	nextPx, nextSx := -1, -1
	for px < len(pattern) || sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				nextPx, nextSx = px, sx+1
				px++
				continue
			case '?':
				if sx < len(s) {
					px++
					sx++
					continue
				}
			case '[':
				if sx < len(s) {
					if ok, width := classMatch(pattern[px:], s[sx]); width > 0 && ok {
						px += width
						sx++
						continue
					}
				}
			case '\\':
				if px+1 < len(pattern) && sx < len(s) && pattern[px+1] == s[sx] {
					px += 2
					sx++
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px++
					sx++
					continue
				}
			}
		}
		if nextSx > 0 && nextSx <= len(s) {
			px, sx = nextPx, nextSx
			continue
		}
		return false
	}
	return true
}

// classMatch matches b against the class at the start of p ("[...]"),
// returning the class's width (0 when it is malformed).
func classMatch(p string, b byte) (bool, int) {
	i := 1
	neg := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		neg = true
		i++
	}
	matched := false
	first := true
	for i < len(p) {
		if p[i] == ']' && !first {
			return matched != neg, i + 1
		}
		first = false
		lo := p[i]
		hi := lo
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi = p[i+2]
			i += 3
		} else {
			i++
		}
		if lo <= b && b <= hi {
			matched = true
		}
	}
	return false, 0
}

func validGlob(g string) bool {
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			i++
		case '[':
			if _, w := classMatch(g[i:], 'a'); w == 0 {
				return false
			}
		}
	}
	return true
}

// systemDirs are where a program run by path keeps its plain name: /bin/rm
// is rm. A program anywhere else (./rm, /workspace/rm) is a file the
// sandbox's user may have written.
var systemDirs = map[string]bool{
	"/bin": true, "/sbin": true, "/usr/bin": true, "/usr/sbin": true,
	"/usr/local/bin": true, "/usr/local/sbin": true,
}

// program is a resolved command name.
type program struct {
	raw  string // as written, quotes removed
	base string // base name
	full string // cleaned path, when raw has a slash
	// file: run by a path outside the system directories.
	file bool
}

func newProgram(name string) program {
	p := program{raw: name, base: name}
	if strings.Contains(name, "/") {
		p.full = path.Clean(name)
		p.base = path.Base(p.full)
		dir := path.Dir(p.full)
		p.file = !strings.HasPrefix(name, "/") || !systemDirs[dir]
	}
	return p
}

func (r *Rule) matchesProgram(p program) bool {
	for _, g := range r.Command {
		if g == "*" {
			return true
		}
		if strings.Contains(g, "/") {
			if p.full != "" && glob(g, p.full) {
				return true
			}
			continue
		}
		if glob(g, p.base) {
			return true
		}
	}
	return false
}

func (a *ArgMatch) matches(argv []field) bool {
	if a.Position > 0 {
		if a.Position >= len(argv) {
			return false
		}
		return a.matchOne(argv[a.Position], argv[1:a.Position])
	}
	if len(a.Option) > 0 {
		return a.matchOption(argv[1:])
	}
	for i := 1; i < len(argv); i++ {
		if a.matchOne(argv[i], nil) {
			return true
		}
	}
	return false
}

func (a *ArgMatch) matchOne(f field, before []field) bool {
	if !f.known {
		return false
	}
	s := f.s
	if len(a.Option) > 0 {
		return a.matchOption(append(append([]field{}, before...), f))
	}
	cands := [2]string{s, ""}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~/") {
		cands[1] = cleanArg(s)
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if a.IgnoreCase {
			c = strings.ToLower(c)
		}
		for _, want := range a.Equals {
			if a.IgnoreCase {
				want = strings.ToLower(want)
			}
			if c == want {
				return true
			}
		}
		for _, want := range a.Prefix {
			if a.IgnoreCase {
				want = strings.ToLower(want)
			}
			if strings.HasPrefix(c, want) {
				return true
			}
		}
		for _, want := range a.Glob {
			if a.IgnoreCase {
				want = strings.ToLower(want)
			}
			if glob(want, c) {
				return true
			}
		}
	}
	return false
}

// cleanArg cleans a path argument, keeping a trailing "/*" or "/" that
// makes a difference to rm (rm -rf /* is not rm -rf /.).
func cleanArg(s string) string {
	star := strings.HasSuffix(s, "/*")
	if star {
		s = strings.TrimSuffix(s, "/*")
	}
	c := path.Clean(s)
	if star {
		if c == "/" {
			return "/*"
		}
		return c + "/*"
	}
	return c
}

// matchOption reports whether one of a.Option is given among args. "-rf"
// needs every letter among the short options given (-r -f, -fr, -rfv);
// "--force" matches --force, --force=x and abbreviations (--fo).
func (a *ArgMatch) matchOption(args []field) bool {
	for _, want := range a.Option {
		if optionGiven(want, args, a.IgnoreCase) {
			return true
		}
	}
	return false
}

func optionGiven(want string, args []field, fold bool) bool {
	if fold {
		want = strings.ToLower(want)
	}
	if strings.HasPrefix(want, "--") {
		for _, f := range args {
			if !f.known {
				continue
			}
			s := f.s
			if fold {
				s = strings.ToLower(s)
			}
			if s == "--" {
				return false
			}
			if !strings.HasPrefix(s, "--") || len(s) < 3 {
				continue
			}
			name, _, _ := strings.Cut(s, "=")
			if name == want || strings.HasPrefix(want, name) {
				return true
			}
		}
		return false
	}
	letters := want[1:]
	have := map[byte]bool{}
	for _, f := range args {
		if !f.known {
			continue
		}
		s := f.s
		if s == "--" {
			break
		}
		if len(s) < 2 || s[0] != '-' || s[1] == '-' {
			continue
		}
		if fold {
			s = strings.ToLower(s)
		}
		if s == want {
			return true
		}
		for i := 1; i < len(s); i++ {
			have[s[i]] = true
		}
	}
	for i := 0; i < len(letters); i++ {
		if !have[letters[i]] {
			return false
		}
	}
	return true
}

func (r *Rule) matchesArgs(argv []field) bool {
	for i := range r.Args {
		if !r.Args[i].matches(argv) {
			return false
		}
	}
	return true
}

func anyGlob(globs Globs, ss []string) bool {
	for _, s := range ss {
		for _, g := range globs {
			if glob(g, s) {
				return true
			}
		}
	}
	return false
}

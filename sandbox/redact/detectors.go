package redact

import "strings"

// detector is a built-in detector: match runs where one of its triggers
// occurs (at is the trigger's position) and adds at most one span;
// scanAll, for detectors without a literal to look for, scans the text.
type detector struct {
	id       string
	optIn    bool
	prio     int
	triggers []string
	match    func(sc *scanner, at int, l literal)
	scanAll  func(sc *scanner, rule int)
}

// Priorities name the merged span of overlapping matches: the most
// specific detector wins.
const (
	prioAssignment = iota
	prioGeneric
	prioContext
	prioToken
	prioCustom
	prioBlock
)

// builtins are the hand-written detectors: context that no provider's
// format describes. Provider formats come from gitleaks (gitleaks.go).
var builtins = []detector{
	{id: "private_key", prio: prioBlock, triggers: []string{"-----begin"}, match: matchPEM},
	{id: "aws_secret_key", prio: prioContext, triggers: []string{"aws", "secret"}, match: matchAWSSecret},
	{id: "bearer_token", prio: prioGeneric, triggers: []string{"bearer"}, match: matchBearer},
	{id: "authorization_header", prio: prioGeneric, triggers: []string{"authorization"}, match: matchAuthorization},
	{id: "url_password", prio: prioContext, triggers: []string{"://"}, match: matchURLPassword},
	{id: "secret_assignment", prio: prioAssignment, triggers: assignmentKeywords, match: matchAssignment},
	{id: "email", optIn: true, prio: prioGeneric, scanAll: scanEmail},
	{id: "credit_card", optIn: true, prio: prioToken, scanAll: scanCards},
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// isKeyByte: the alphabet of most API keys, and of base64url.
func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func isB64Byte(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// isNameByte: the bytes of a variable or option name.
func isNameByte(c byte) bool { return isKeyByte(c) || c == '.' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// run returns the end of the run of bytes from i that ok accepts.
func run(s string, i int, ok func(byte) bool) int {
	for i < len(s) && ok(s[i]) {
		i++
	}
	return i
}

// matchAWSSecret looks, after an "aws" or "secret" on the same line, for
// a 40-byte base64 run mixing upper case, lower case and digits: a git
// SHA-1 or a hex digest never does.
func matchAWSSecret(sc *scanner, at int, l literal) {
	s := sc.s
	limit := min(lineEnd(s, at), at+len(l.text)+100)
	for i := at + len(l.text); i < limit; {
		if !isB64Byte(s[i]) {
			i++
			continue
		}
		end := run(s, i, isB64Byte)
		if end-i == 40 && (i == 0 || s[i-1] != '=') && (end == len(s) || s[end] != '=') {
			var up, lo, dg bool
			for _, c := range []byte(s[i:end]) {
				up, lo, dg = up || isUpper(c), lo || isLower(c), dg || isDigit(c)
			}
			if up && lo && dg {
				sc.add(i, end, l.rule)
				return
			}
		}
		i = end
	}
}

// isCredByte: what a token in a header or after "Bearer" is made of
// (RFC 6750's b64token, and the base64 of Basic).
func isCredByte(c byte) bool {
	return isKeyByte(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}

// matchBearer takes the token after "Bearer " in free text; it must hold
// a digit, so that prose ("bearer authentication") is left alone.
func matchBearer(sc *scanner, at int, l literal) {
	s := sc.s
	if at > 0 && isAlnum(s[at-1]) {
		return
	}
	i := at + len(l.text)
	j := run(s, i, isSpace)
	if j == i || j-i > 4 {
		return
	}
	end := run(s, j, isCredByte)
	if tok := s[j:end]; len(tok) >= 8 && strings.ContainsAny(tok, "0123456789") && !placeholder(tok) {
		sc.add(j, end, l.rule)
	}
}

// matchAuthorization takes the credentials of an Authorization header
// (curl -H, curl -v, HTTP dumps, JSON): after the scheme word, or all of
// the value when there is none.
func matchAuthorization(sc *scanner, at int, l literal) {
	s := sc.s
	if at > 0 && isAlnum(s[at-1]) {
		return
	}
	i := at + len(l.text)
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	i = run(s, i, isSpace)
	if i >= len(s) || (s[i] != ':' && s[i] != '=') {
		return
	}
	i = run(s, i+1, isSpace)
	var q byte
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q, i = s[i], i+1
	}
	le := lineEnd(s, i)
	stop := le
	if q != 0 {
		if k := strings.IndexByte(s[i:le], q); k >= 0 {
			stop = i + k
		}
	}
	start := i
	word := run(s, i, func(c byte) bool { return isUpper(c) || isLower(c) })
	if k := run(s, word, isSpace); word > i && k > word && k < stop && !isSpace(s[k]) {
		start = k // after the scheme
	}
	end := stop
	if !strings.EqualFold(s[i:word], "digest") {
		end = min(stop, run(s, start, func(c byte) bool { return !isSpace(c) && c != '"' && c != '\'' && !isLineEnd(c) }))
	}
	if v := s[start:end]; len(v) >= 3 && !placeholder(v) {
		sc.add(start, end, l.rule)
	}
}

// matchURLPassword takes the password of scheme://user:password@host and
// keeps the user name.
func matchURLPassword(sc *scanner, at int, l literal) {
	s := sc.s
	if at == 0 || !isAlnum(s[at-1]) {
		return
	}
	i := at + 3
	end := run(s, i, func(c byte) bool {
		return c > ' ' && c != '/' && c != '?' && c != '#' && c != '"' && c != '\'' && c != '<' && c != '>' && c != '`' && c < 0x7f
	})
	auth := s[i:end]
	atSign := strings.LastIndexByte(auth, '@')
	if atSign < 0 {
		return
	}
	colon := strings.IndexByte(auth[:atSign], ':')
	if colon < 0 {
		return
	}
	if pw := auth[colon+1 : atSign]; pw != "" && !placeholder(pw) {
		sc.add(i+colon+1, i+atSign, l.rule)
	}
}

// assignmentKeywords are the names whose value is a secret, when a name
// ends with one (FOO_TOKEN, db.password), optionally followed by one of
// assignmentSuffixes (SECRET_KEY).
var (
	assignmentKeywords = []string{"password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "api-key", "access_key", "private_key"}
	assignmentSuffixes = []string{"_key", "-key", "key", "_value"}
)

// matchAssignment takes the value of name=value, name: value (when the
// name is quoted, as in JSON, or begins its line, as in YAML and HTTP
// headers) and "name": "value".
func matchAssignment(sc *scanner, at int, l literal) {
	s := sc.s
	e := at + len(l.text)
	for _, suf := range assignmentSuffixes {
		if hasFoldPrefix(s, e, suf) {
			e += len(suf)
			break
		}
	}
	if e < len(s) && isNameByte(s[e]) {
		return // the name goes on: tokens=, token_count=, passwordless=
	}
	ks := at
	for ks > 0 && isNameByte(s[ks-1]) {
		ks--
	}
	var kq byte
	if ks > 0 && (s[ks-1] == '"' || s[ks-1] == '\'') {
		kq = s[ks-1]
		if e >= len(s) || s[e] != kq {
			return
		}
		e++
	}
	i := run(s, e, isSpace)
	if i >= len(s) {
		return
	}
	sep := s[i]
	if sep != '=' && sep != ':' {
		return
	}
	i++
	if i < len(s) && (s[i] == '=' || (sep == ':' && s[i] == ':')) {
		return // a comparison, a C++ scope
	}
	if sep == ':' && i < len(s) && s[i] == '=' {
		i++ // Go's :=
	}
	i = run(s, i, isSpace)
	if i >= len(s) {
		return
	}
	var start, end int
	if q := s[i]; q == '"' || q == '\'' {
		start = i + 1
		le := lineEnd(s, start)
		end = le
		for k := start; k < le; k++ {
			if s[k] == '\\' {
				k++
			} else if s[k] == q {
				end = k
				break
			}
		}
	} else {
		if sep == ':' && kq == 0 && !beginsLine(s, ks) {
			return // prose: "the token: it expired"
		}
		start = i
		end = run(s, i, func(c byte) bool {
			return c > ' ' && c != '"' && c != '\'' && c != ',' && c != ';' && c != '&' && c != ')' && c != '}' && c != ']' && c != '`' && c != 0x7f
		})
		// An expression, or a variable named like the key (password =
		// password, api_key=API_KEY), reads a secret; it is not one.
		if v := s[start:end]; codeValue(v, s[end:]) || strings.Contains(strings.ToLower(v), l.text) {
			return
		}
	}
	if v := s[start:end]; len(v) >= 3 && !placeholder(v) {
		sc.add(start, end, l.rule)
	}
}

// beginsLine: only indentation, a list dash or "export" precede s[i] on
// its line.
func beginsLine(s string, i int) bool {
	ls, _ := lineAt(s, i)
	pre := strings.TrimSpace(s[ls:i])
	return pre == "" || pre == "-" || pre == "export"
}

// placeholder: values that are references, templates, booleans or marks
// rather than secrets, our own marks included.
func placeholder(v string) bool {
	switch v[0] {
	case '$', '%', '<', '{', '[', '(':
		return true
	}
	if strings.Trim(v, "*xX.") == "" {
		return true
	}
	switch strings.ToLower(v) {
	case "null", "none", "nil", "true", "false", "undefined", "empty", "redacted", "required", "optional", "string", "your_token", "changeme":
		return true
	}
	return false
}

// matchPEM takes a private key block: the BEGIN line, the body lines
// (base64, or RFC 1421 headers) and the END line. A block with no END
// line ends at the first line that is not part of a body; one written on
// a single line with \n escapes (as in JSON) is taken too.
func matchPEM(sc *scanner, at int, l literal) {
	s := sc.s
	const begin = "-----BEGIN "
	if !strings.HasPrefix(s[at:], begin) {
		return
	}
	le := lineEnd(s, at)
	close := strings.Index(s[at+len(begin):le], "-----")
	if close < 0 {
		if le == len(s) {
			sc.add(at, le, l.rule) // the header itself is still arriving
		}
		return
	}
	label := s[at+len(begin) : at+len(begin)+close]
	if !strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
		return
	}
	i := at + len(begin) + close + 5
	sc.add(at, pemEnd(s, i), l.rule)
}

// pemEnd returns where the block whose header ends at i ends.
func pemEnd(s string, i int) int {
	if strings.HasPrefix(s[i:], `\n`) || strings.HasPrefix(s[i:], `\r\n`) {
		for j := i; j < len(s); {
			switch {
			case strings.HasPrefix(s[j:], "-----END"):
				if k := strings.Index(s[j+8:], "-----"); k >= 0 {
					return j + 8 + k + 5
				}
				return len(s)
			case s[j] == '\\' && j+1 < len(s) && (s[j+1] == 'n' || s[j+1] == 'r'):
				j += 2
			case isB64Byte(s[j]) || s[j] == '=' || s[j] == '\\':
				j++
			default:
				return j
			}
		}
		return len(s)
	}
	end := lineEnd(s, i) // the rest of the header line
	for ls := end + 1; end < len(s); ls = end + 1 {
		if ls < len(s) && s[end] == '\r' && s[ls] == '\n' {
			ls++
		}
		if ls >= len(s) {
			return len(s) // the next line has not arrived
		}
		le := lineEnd(s, ls)
		line := strings.TrimRight(s[ls:le], " \t")
		switch {
		case strings.HasPrefix(line, "-----END"):
			if k := strings.Index(line[8:], "-----"); k >= 0 {
				return ls + 8 + k + 5
			}
			return le
		case pemBody(line):
			end = le
		case le == len(s) && strings.HasPrefix("-----END", line):
			return len(s) // the END line is still arriving
		default:
			return end
		}
	}
	return end
}

func pemBody(line string) bool {
	if k := strings.Index(line, ": "); k > 0 && strings.Trim(line[:k], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-") == "" {
		return true // Proc-Type: 4,ENCRYPTED
	}
	for i := 0; i < len(line); i++ {
		if !isB64Byte(line[i]) && line[i] != '=' {
			return false
		}
	}
	return true
}

func scanEmail(sc *scanner, rule int) {
	s := sc.s
	isLocal := func(c byte) bool { return isAlnum(c) || strings.IndexByte("._%+-", c) >= 0 }
	for i := 0; ; i++ {
		k := strings.IndexByte(s[i:], '@')
		if k < 0 {
			return
		}
		i += k
		start := i
		for start > 0 && isLocal(s[start-1]) {
			start--
		}
		end := run(s, i+1, func(c byte) bool { return isAlnum(c) || c == '.' || c == '-' })
		for end > i+1 && s[end-1] == '.' {
			end--
		}
		dom := s[i+1 : end]
		dot := strings.LastIndexByte(dom, '.')
		if start == i || dot <= 0 || len(dom)-dot-1 < 2 {
			continue
		}
		tld := dom[dot+1:]
		if strings.Trim(tld, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			continue
		}
		sc.add(start, end, rule)
		i = end - 1
	}
}

// scanCards takes 13 to 19 digits, in groups joined by single spaces or
// dashes, that begin like a card number (2 to 6) and pass the Luhn check.
func scanCards(sc *scanner, rule int) {
	s := sc.s
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			continue
		}
		start := i
		if start > 0 && (isAlnum(s[start-1]) || s[start-1] == '.') {
			i = run(s, i, isDigit)
			continue
		}
		var digits [20]byte
		n, j := 0, i
		for j < len(s) && n <= 19 {
			if isDigit(s[j]) {
				digits[n] = s[j] - '0'
				n++
				j++
			} else if (s[j] == ' ' || s[j] == '-') && j+1 < len(s) && isDigit(s[j+1]) && n > 0 {
				j++
			} else {
				break
			}
		}
		i = j
		if n < 13 || n > 19 || digits[0] < 2 || digits[0] > 6 || (j < len(s) && (isAlnum(s[j]) || s[j] == '.')) {
			continue
		}
		if luhn(digits[:n]) {
			sc.add(start, j, rule)
		}
	}
}

func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		v := int(d[len(d)-1-i])
		if i%2 == 1 {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

package redact

import (
	"slices"
	"sync"
)

// span is a secret found in the scanned text: s[start:end], by rule.
type span struct{ start, end, rule int }

// literal is a trigger: a lowercase ASCII string whose occurrence (in any
// case) makes a rule look at that place.
type literal struct {
	text string
	rule int
}

// triggerTable finds every trigger in one pass: a bitmap of the first two
// (case-folded) bytes of all literals rejects almost every position with
// two loads, and only positions that pass compare whole literals.
type triggerTable struct {
	first  [256]bool
	bits   [1 << 10]uint64 // bigram bitmap
	index  []uint16        // bigram -> 1 + its group in groups, 0 for none
	short  []bool          // bigram -> a literal of two bytes begins so
	tri    []uint64        // hashed trigram bitmap of literals' first three bytes
	groups [][]literal
	lits   []literal
	maxLen int
}

var lowerTab = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

func (t *triggerTable) build(lits []literal) {
	// An array rather than a map: with gitleaks' keywords, common
	// bigrams pass the bitmap often enough for a map's hashing to show.
	t.index = make([]uint16, 1<<16)
	t.short = make([]bool, 1<<16)
	t.tri = make([]uint64, 1<<12)
	t.lits = lits
	for _, l := range lits {
		bg := bigram(l.text[0], l.text[1])
		if len(l.text) == 2 {
			t.short[bg] = true
		} else {
			h := trigram(l.text[0], l.text[1], l.text[2])
			t.tri[h>>6] |= 1 << (h & 63)
		}
		t.first[l.text[0]] = true
		t.bits[bg>>6] |= 1 << (bg & 63)
		if t.index[bg] == 0 {
			t.groups = append(t.groups, nil)
			t.index[bg] = uint16(len(t.groups))
		}
		g := t.index[bg] - 1
		t.groups[g] = append(t.groups[g], l)
		t.maxLen = max(t.maxLen, len(l.text))
	}
}

func bigram(a, b byte) uint16 { return uint16(lowerTab[a])<<8 | uint16(lowerTab[b]) }

// trigram hashes three case-folded bytes to 18 bits.
func trigram(a, b, c byte) uint32 {
	return (uint32(lowerTab[a])<<16 | uint32(lowerTab[b])<<8 | uint32(lowerTab[c])) * 2654435761 >> 14
}

// hasFoldPrefix reports whether s[i:] begins with lit (lowercase ASCII),
// ignoring ASCII case.
func hasFoldPrefix(s string, i int, lit string) bool {
	if len(s)-i < len(lit) {
		return false
	}
	for j := 0; j < len(lit); j++ {
		if lowerTab[s[i+j]] != lit[j] {
			return false
		}
	}
	return true
}

// each calls fn for every trigger occurrence in s[from:to] (the literal may
// run past to, not past len(s)).
func (t *triggerTable) each(s string, from, to int, fn func(l literal, at int) bool) {
	if len(t.lits) == 0 {
		return
	}
	to = min(to, len(s)-1)
	for i := from; i < to; i++ {
		c := lowerTab[s[i]]
		if !t.first[c] {
			continue
		}
		bg := uint16(c)<<8 | uint16(lowerTab[s[i+1]])
		if t.bits[bg>>6]&(1<<(bg&63)) == 0 {
			continue
		}
		// Common bigrams pass often with gitleaks' keywords; a third
		// byte rejects most of them before any literal is compared.
		if !t.short[bg] {
			if i+2 >= len(s) {
				continue
			}
			if h := trigram(c, s[i+1], s[i+2]); t.tri[h>>6]&(1<<(h&63)) == 0 {
				continue
			}
		}
		for _, l := range t.groups[t.index[bg]-1] {
			if hasFoldPrefix(s, i, l.text) && !fn(l, i) {
				return
			}
		}
	}
}

// prefixAtEnd returns where the longest suffix of s that begins some
// trigger starts, or len(s). Candidates are found through the bigram
// index, not by comparing every literal: a stream asks this of every
// chunk.
func (t *triggerTable) prefixAtEnd(s string, from int) int {
	for k := min(t.maxLen-1, len(s)-from); k > 0; k-- {
		i := len(s) - k
		c := lowerTab[s[i]]
		if !t.first[c] {
			continue
		}
		if k == 1 {
			return i // every literal is at least two bytes long
		}
		bg := uint16(c)<<8 | uint16(lowerTab[s[i+1]])
		if t.bits[bg>>6]&(1<<(bg&63)) == 0 {
			continue
		}
		for _, l := range t.groups[t.index[bg]-1] {
			if len(l.text) > k && hasFoldPrefix(s, i, l.text[:k]) {
				return i
			}
		}
	}
	return len(s)
}

// scanner gathers the spans of one text.
type scanner struct {
	r        *Redactor
	s        string
	spans    []span
	lastLine []int     // per rule: start of the last line a custom rule ran on
	deferred []pending // generic rules' candidates, run after the rest
}

// pending is a place where a generic rule may match: the line, and the
// value assigned there.
type pending struct{ rule, ls, le, vs, ve int }

// covered reports whether a span found so far holds s[start:end].
func (sc *scanner) covered(start, end int) bool {
	for _, sp := range sc.spans {
		if sp.start <= start && end <= sp.end {
			return true
		}
	}
	return false
}

var scanners = sync.Pool{New: func() any { return &scanner{} }}

func (sc *scanner) release() {
	sc.r, sc.s, sc.spans, sc.deferred = nil, "", sc.spans[:0], sc.deferred[:0]
	scanners.Put(sc)
}

func (sc *scanner) add(start, end, rule int) {
	if end > start {
		sc.spans = append(sc.spans, span{start, end, rule})
	}
}

// scan finds the secrets of s, sorted by start and disjoint: overlapping
// matches are merged into their union, named after the most specific
// detector among them, so that no part of any match is let out.
func (r *Redactor) scan(s string) *scanner {
	sc := scanners.Get().(*scanner)
	sc.r, sc.s = r, s
	sc.lastLine = sc.lastLine[:0]
	for range r.rules {
		sc.lastLine = append(sc.lastLine, -1)
	}
	ls, le := 0, -1 // the line of the last trigger; triggers come in order
	r.trig.each(s, 0, len(s), func(l literal, at int) bool {
		ru := &r.rules[l.rule]
		if ru.det != nil {
			ru.det.match(sc, at, l)
		} else {
			// Expressions run once per line, however many of the rule's
			// keywords the line holds.
			if at > le {
				ls, le = lineAt(s, at)
			}
			if ru.gl != nil && ru.gl.generic {
				// Generic rules run last, and only on a value no
				// specific detector took already.
				if vs, ve := assignmentAhead(s, at+len(l.text), le); vs >= 0 {
					sc.deferred = append(sc.deferred, pending{rule: l.rule, ls: ls, le: le, vs: vs, ve: ve})
				}
				return true
			}
			if sc.lastLine[l.rule] != ls {
				sc.lastLine[l.rule] = ls
				if ru.gl != nil {
					sc.matchGitleaks(l.rule, ls, le, ru.gl, r.gl)
				} else {
					sc.custom(l.rule, ls, le)
				}
			}
		}
		return true
	})
	for _, p := range sc.deferred {
		if sc.lastLine[p.rule] == p.ls || sc.covered(p.vs, p.ve) {
			continue
		}
		sc.lastLine[p.rule] = p.ls
		sc.matchGitleaks(p.rule, p.ls, p.le, r.rules[p.rule].gl, r.gl)
	}
	for _, i := range r.scanAll {
		r.rules[i].det.scanAll(sc, i)
	}
	if len(r.anyLine) > 0 {
		for ls := 0; ls < len(s); {
			le := lineEnd(s, ls)
			for _, i := range r.anyLine {
				sc.custom(i, ls, le)
			}
			ls = le + 1
		}
	}
	sc.merge()
	return sc
}

func (sc *scanner) custom(rule, ls, le int) {
	re := sc.r.rules[rule].re
	for _, m := range re.FindAllStringSubmatchIndex(sc.s[ls:le], -1) {
		if len(m) >= 4 && m[2] >= 0 {
			m = m[2:]
		}
		sc.add(ls+m[0], ls+m[1], rule)
	}
}

func (sc *scanner) merge() {
	if len(sc.spans) < 2 {
		return
	}
	slices.SortFunc(sc.spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	out := sc.spans[:1]
	for _, sp := range sc.spans[1:] {
		last := &out[len(out)-1]
		if sp.start < last.end {
			last.end = max(last.end, sp.end)
			if sc.r.rules[sp.rule].prio > sc.r.rules[last.rule].prio {
				last.rule = sp.rule
			}
			continue
		}
		out = append(out, sp)
	}
	sc.spans = out
}

// isLineEnd: secrets other than private key blocks never cross these.
func isLineEnd(c byte) bool { return c == '\n' || c == '\r' }

// lineAt returns the bounds of the line holding s[i], its end excluded.
func lineAt(s string, i int) (start, end int) {
	start = i
	for start > 0 && !isLineEnd(s[start-1]) {
		start--
	}
	return start, lineEnd(s, i)
}

func lineEnd(s string, i int) int {
	for i < len(s) && !isLineEnd(s[i]) {
		i++
	}
	return i
}

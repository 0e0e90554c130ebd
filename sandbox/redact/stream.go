package redact

import (
	"bytes"
	"strings"
	"sync/atomic"

	"github.com/flowbox/flowbox/sandbox"
)

// Transformer redacts one output stream as it arrives; it is a
// sandbox.StreamTransformer. A secret cut across chunks, however many, is
// caught: Transform lets out at once what cannot be part of a secret and
// holds back the rest until the chunk that settles it.
//
// What is held: secrets other than private keys never cross a line end
// ('\n' or '\r'), so complete lines go out at once. Of the line still
// arriving, everything is held when it holds a detector's keyword or
// prefix (a key's value, a header's credentials, a token may follow);
// otherwise only its last word (a run of non-blank bytes) is held, since a
// secret or a keyword may be starting there. A private key block is held
// from its BEGIN line until its END line.
//
// Bounds: at most Config.MaxHold bytes are held. A line that grows past
// it is let out but for its last quarter of MaxHold, never cutting a
// secret found whole. A secret (or a private key block) still arriving
// when the bound is reached is let out as its marker, and the rest of it,
// when it comes, is dropped: the rest of the token's run of key bytes, or
// for a private key every line up to and including the END line (up to
// the end of the stream if none comes). Nothing of a secret is released.
//
// For text within these bounds, the concatenated output equals
// Redactor.Redact of the whole text, however it was cut, except with the
// block strategy: a stream cannot take back what it already let out (it
// held no secret), so it ends with BlockMessage in place of the secret and
// withholds everything after it, where Redact replaces all of its input.
type Transformer struct {
	r       *Redactor
	ctx     []byte // raw end of the current line already let out, for look-behind
	held    []byte // raw bytes not yet let out
	cont    int    // after a forced release: contToken or contPEM, else contNone
	blocked *atomic.Bool
	f       findings
	out     bytes.Buffer // what Transform returns, reused
}

var _ sandbox.StreamTransformer = (*Transformer)(nil)

const (
	contNone = iota
	contToken
	contPEM
)

// ctxLen is how much already released text a stream keeps for detectors
// that look behind a secret (a key's name, "export", a line's start).
const ctxLen = 128

// Transformer returns a new stream transformer.
func (r *Redactor) Transformer() *Transformer { return r.transformer(new(atomic.Bool)) }

// transformer returns one whose block state is shared: once one stream of
// a command is blocked, so are the others.
func (r *Redactor) transformer(blocked *atomic.Bool) *Transformer {
	return &Transformer{r: r, blocked: blocked}
}

// Findings are what the stream found so far.
func (t *Transformer) Findings() []Finding { return t.f.list }

// Transform takes the next chunk and returns what may be let out now.
func (t *Transformer) Transform(p []byte) []byte {
	if t.blocked.Load() {
		return nil
	}
	t.held = append(t.held, p...)
	if t.cont != contNone && !t.continueSecret(false) {
		return nil
	}
	return t.step(false)
}

// Flush returns what is still held, redacted, when the stream ends.
func (t *Transformer) Flush() []byte {
	defer func() { t.ctx, t.held, t.cont = t.ctx[:0], t.held[:0], contNone }()
	if t.blocked.Load() {
		return nil
	}
	if t.cont != contNone && !t.continueSecret(true) {
		return nil
	}
	if len(t.held) == 0 {
		return nil
	}
	return t.step(true)
}

// continueSecret drops the rest of a secret released as its marker, and
// reports whether anything is left to look at.
func (t *Transformer) continueSecret(final bool) bool {
	h := t.held
	switch t.cont {
	case contToken:
		n := run(string(h), 0, isCredByte)
		if n == len(h) && !final {
			t.held = h[:0]
			return false
		}
		t.held, t.cont = h[n:], contNone
	case contPEM:
		for {
			nl := strings.IndexAny(string(h), "\n\r")
			if nl < 0 {
				if final || len(h) > t.r.maxHold {
					h = h[:0]
				}
				t.held = h
				return false
			}
			line := string(h[:nl])
			h = h[nl:]
			if strings.HasPrefix(strings.TrimSpace(line), "-----END") {
				t.held, t.cont = h, contNone
				break
			}
			h = h[1:]
		}
	}
	t.ctx = t.ctx[:0]
	return len(t.held) > 0
}

// step redacts held text and lets out all of it (final) or what is safe.
func (t *Transformer) step(final bool) []byte {
	r := t.r
	base := len(t.ctx)
	text := string(t.ctx) + string(t.held)
	sc := r.scan(text)
	defer sc.release()
	spans := sc.spans[:0]
	for _, sp := range sc.spans {
		if sp.end > base {
			sp.start = max(sp.start, base)
			spans = append(spans, sp)
		}
	}
	safe := len(text)
	force := -1
	if !final {
		safe = max(t.holdFrom(text, base), base)
		for _, sp := range spans {
			// A span that reaches the end of the text may still grow.
			if sp.start < safe && (safe < sp.end || sp.end == len(text)) {
				safe = sp.start
			}
		}
		if len(text)-safe > r.maxHold {
			safe, force = t.release(text, base, spans)
		}
	}
	b := &t.out
	b.Reset()
	at := base
	for _, sp := range spans {
		if sp.start >= safe {
			break
		}
		ru := &r.rules[sp.rule]
		b.WriteString(text[at:sp.start])
		if ru.strategy == Block {
			b.WriteString(BlockMessage(ru.id))
			t.f.add(ru)
			t.blocked.Store(true)
			t.held, t.ctx = t.held[:0], t.ctx[:0]
			return b.Bytes()
		}
		r.replace(b, ru, text[sp.start:sp.end])
		t.f.add(ru)
		at = sp.end
	}
	b.WriteString(text[at:safe])
	if force >= 0 {
		t.cont = contToken
		if r.rules[force].det != nil && r.rules[force].det.id == "private_key" {
			t.cont = contPEM
		}
	}
	t.held = append(t.held[:0], text[safe:]...)
	t.ctx = t.ctx[:0]
	if t.cont == contNone {
		ls := strings.LastIndexAny(text[:safe], "\n\r") + 1
		t.ctx = append(t.ctx, text[max(ls, safe-ctxLen):safe]...)
	}
	return b.Bytes()
}

// release chooses what to let out of a line held past MaxHold: all but
// the last quarter of MaxHold, not cutting a secret found whole, and a
// secret still arriving only if it alone is larger than MaxHold (force
// names its rule then).
func (t *Transformer) release(text string, base int, spans []span) (safe, force int) {
	cut := max(len(text)-t.r.maxHold/4, base)
	for _, sp := range spans {
		if sp.start < cut && cut < sp.end {
			switch {
			case sp.end < len(text):
				return sp.end, -1
			case len(text)-sp.start <= t.r.maxHold:
				return sp.start, -1
			default:
				return len(text), sp.rule
			}
		}
	}
	return cut, -1
}

// holdFrom returns where the text that may still be part of a secret
// begins, given that the text ends mid-line.
func (t *Transformer) holdFrom(text string, base int) int {
	r := t.r
	ls := strings.LastIndexAny(text[base:], "\n\r")
	if ls < 0 {
		ls = 0
	} else {
		ls += base + 1
	}
	if len(r.anyLine) > 0 {
		return ls
	}
	found := false
	r.trig.each(text, ls, len(text), func(literal, int) bool {
		found = true
		return false
	})
	if found {
		return ls
	}
	h := len(text)
	for h > ls && text[h-1] != ' ' && text[h-1] != '\t' {
		h--
	}
	h = min(h, r.trig.prefixAtEnd(text, ls))
	if r.cards() {
		for h-2 >= ls && (text[h-1] == ' ' || text[h-1] == '-') && isDigit(text[h-2]) {
			h--
			for h > ls && isDigit(text[h-1]) {
				h--
			}
		}
	}
	return h
}

func (r *Redactor) cards() bool {
	for _, i := range r.scanAll {
		if r.rules[i].det.id == "credit_card" {
			return true
		}
	}
	return false
}

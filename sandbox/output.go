package sandbox

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultOutputLimit is how many bytes of each stream a result keeps when
// the caller sets none: half from the head, half from the tail.
const DefaultOutputLimit = 32 << 10

// Collector gathers a command's stdout and stderr for providers: it caps
// each stream (head and tail kept, the cut marked), forwards live output to
// ExecRequest.OnOutput one call at a time, and builds the ExecResult.
type Collector struct {
	mu       sync.Mutex
	onOutput func(Stream, []byte)
	out, err capBuffer
}

// NewCollector returns a collector for req; limit is the bytes kept per
// stream (DefaultOutputLimit when <= 0).
func NewCollector(limit int, onOutput func(Stream, []byte)) *Collector {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	c := &Collector{onOutput: onOutput}
	c.out.init(limit)
	c.err.init(limit)
	return c
}

// Stdout is the writer for the command's standard output.
func (c *Collector) Stdout() io.Writer { return streamWriter{c, Stdout} }

// Stderr is the writer for the command's standard error.
func (c *Collector) Stderr() io.Writer { return streamWriter{c, Stderr} }

type streamWriter struct {
	c *Collector
	s Stream
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.s == Stdout {
		w.c.out.write(p)
	} else {
		w.c.err.write(p)
	}
	if w.c.onOutput != nil && len(p) > 0 {
		w.c.onOutput(w.s, p)
	}
	return len(p), nil
}

// Result builds the ExecResult. A timed-out command gets exit code 124 (as
// timeout(1) reports) and a line on stderr saying what happened.
func (c *Collector) Result(exitCode int, timedOut bool, timeout, duration time.Duration) ExecResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := ExecResult{
		Stdout:    c.out.String(),
		Stderr:    c.err.String(),
		ExitCode:  exitCode,
		Duration:  duration,
		TimedOut:  timedOut,
		Truncated: c.out.truncated() || c.err.truncated(),
	}
	if timedOut {
		r.ExitCode = 124
		if r.Stderr != "" && !strings.HasSuffix(r.Stderr, "\n") {
			r.Stderr += "\n"
		}
		r.Stderr += fmt.Sprintf("[command timed out after %s and was killed with all its processes]\n", timeout)
	}
	return r
}

// capBuffer keeps the first half and the last half of limit bytes.
type capBuffer struct {
	head, tail []byte
	half       int
	total      int64
}

func (b *capBuffer) init(limit int) {
	b.half = limit / 2
	if b.half < 1 {
		b.half = 1
	}
}

func (b *capBuffer) write(p []byte) {
	b.total += int64(len(p))
	if room := b.half - len(b.head); room > 0 {
		n := min(room, len(p))
		b.head = append(b.head, p[:n]...)
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	b.tail = append(b.tail, p...)
	// Trim lazily so that appends stay amortised O(1).
	if len(b.tail) > 2*b.half {
		b.tail = append(b.tail[:0], b.tail[len(b.tail)-b.half:]...)
	}
}

func (b *capBuffer) truncated() bool {
	return b.total > int64(len(b.head)+min(len(b.tail), b.half))
}

// String returns the kept bytes as valid UTF-8, with a marker where bytes
// were dropped.
func (b *capBuffer) String() string {
	tail := b.tail
	if len(tail) > b.half {
		tail = tail[len(tail)-b.half:]
	}
	if !b.truncated() {
		return validUTF8(string(b.head) + string(tail))
	}
	head := trimIncompleteEnd(b.head)
	tail = trimIncompleteStart(tail)
	dropped := b.total - int64(len(head)+len(tail))
	return validUTF8(string(head)) +
		fmt.Sprintf("\n... [%d bytes truncated] ...\n", dropped) +
		validUTF8(string(tail))
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// trimIncompleteEnd drops a rune cut in half at the end of p.
func trimIncompleteEnd(p []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < utf8.RuneSelf {
			return p // ASCII: nothing cut
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return p[:len(p)-i]
			}
			return p
		}
	}
	return p
}

// trimIncompleteStart drops continuation bytes at the start of p.
func trimIncompleteStart(p []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(p); i++ {
		if utf8.RuneStart(p[i]) {
			return p[i:]
		}
	}
	return p
}

// AgentGone is the result of a long-lived command (ExecRequest.Stdin)
// whose connection to the sandbox's agent broke: the sandbox stopped, or
// its agent died, and the command with it (exit status 137, as killed).
func AgentGone(c *Collector, duration time.Duration, why error) ExecResult {
	res := c.Result(137, false, 0, duration)
	if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
		res.Stderr += "\n"
	}
	res.Stderr += "[the sandbox's agent is gone (" + validUTF8(why.Error()) + "): the sandbox stopped]"
	return res
}

package sandboxtest

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// testTerminal: a terminal's shell starts where the last command left
// the shell, and what it does there (cd, export) is where the next
// command starts once it ended.
func testTerminal(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	tp, ok := p.(sandbox.TerminalProvider)
	needs(t, p, ok, "terminals")
	run(t, p, id, "mkdir -p term-t1 && cd term-t1 && export BEFORE=5", 30*time.Second)
	term, err := tp.Terminals().OpenTerminal(ctxFor(t), id, 80, 24)
	if errors.Is(err, sandbox.ErrUnsupported) {
		t.Skipf("this configuration has no terminals: %v", err)
	}
	if err != nil {
		t.Fatalf("OpenTerminal: %v", err)
	}
	defer term.Close()
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		buf := make([]byte, 4096)
		for {
			n, err := term.Read(buf)
			if n > 0 {
				out <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	var screen bytes.Buffer
	until := func(want string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for !strings.Contains(screen.String(), want) {
			select {
			case b, ok := <-out:
				if !ok {
					if strings.Contains(screen.String(), want) {
						return
					}
					t.Fatalf("the terminal ended before %q: %q", want, screen.String())
				}
				screen.Write(b)
			case <-deadline:
				t.Fatalf("the terminal never showed %q: %q", want, screen.String())
			}
		}
	}
	if _, err := term.Write([]byte("echo \"at-$(basename $PWD)-$BEFORE\"; cd /tmp; export T=1\r")); err != nil {
		t.Fatal(err)
	}
	until("at-term-t1-5")
	if _, err := term.Write([]byte("exit\r")); err != nil {
		t.Fatal(err)
	}
	for b := range out {
		screen.Write(b)
	}
	if res := run(t, p, id, `echo "$(pwd) $T"`, 30*time.Second); strings.TrimSpace(res.Stdout) != "/tmp 1" {
		t.Errorf("after the terminal a command starts at %q, want /tmp 1 (the terminal showed %q)", res.Stdout, screen.String())
	}
}

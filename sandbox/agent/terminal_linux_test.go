package agent

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// screen collects what a terminal shows.
type screen struct {
	t    *testing.T
	term *Terminal
	got  chan []byte
	all  bytes.Buffer
}

func watchTerm(t *testing.T, term *Terminal) *screen {
	s := &screen{t: t, term: term, got: make(chan []byte, 64)}
	go func() {
		defer close(s.got)
		buf := make([]byte, 4096)
		for {
			n, err := term.Read(buf)
			if n > 0 {
				s.got <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// until reads until the screen holds want.
func (s *screen) until(want string) {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(s.all.String(), want) {
		select {
		case p, ok := <-s.got:
			if !ok {
				s.t.Fatalf("the terminal ended before showing %q; it showed %q", want, s.all.String())
			}
			s.all.Write(p)
		case <-deadline:
			s.t.Fatalf("the terminal never showed %q; it showed %q", want, s.all.String())
		}
	}
}

// TestTerminal: a terminal starts where the last command left the
// shell, its cd and export reach the next command while it is open,
// resizes reach its programs, and exit ends it with its code.
func TestTerminal(t *testing.T) {
	e := startAgentWith(t, Config{Token: []byte("0123456789abcdef0123456789abcdef"), Shell: "/bin/bash"})
	e.run(t, "mkdir -p sub && cd sub && export BEFORE=7", time.Minute)
	term, err := OpenTerminal(context.Background(), e.dialer(), 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	s := watchTerm(t, term)
	if _, err := term.Write([]byte("echo \"in $(basename $PWD) $BEFORE\"\r")); err != nil {
		t.Fatal(err)
	}
	s.until("in sub 7")
	if _, err := term.Write([]byte("cd /tmp; export A=1; echo set-done\r")); err != nil {
		t.Fatal(err)
	}
	s.until("set-done")
	// The prompt after it is drawn once the state is saved (the work
	// directory's own prompt holds "/tmp" too: wait for this one).
	s.until("/tmp # ")
	if _, out := e.run(t, `echo "$(pwd) $A"`, time.Minute); strings.TrimSpace(out.stdout.String()) != "/tmp 1" {
		t.Errorf("the next command sees %q, want /tmp 1", out.stdout.String())
	}
	if err := term.Resize(100, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("stty size\r")); err != nil {
		t.Fatal(err)
	}
	s.until("40 100")
	if _, err := term.Write([]byte("exit 3\r")); err != nil {
		t.Fatal(err)
	}
	for range s.got {
	}
	if term.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", term.ExitCode())
	}
}

// TestTerminalHangup: closing the connection hangs the terminal up: the
// shell saves its state, and what it started ends.
func TestTerminalHangup(t *testing.T) {
	e := startAgentWith(t, Config{Shell: "/bin/bash"})
	term, err := OpenTerminal(context.Background(), e.dialer(), 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	s := watchTerm(t, term)
	_, _ = term.Write([]byte("sleep 8642 & echo started\r"))
	s.until("started")
	waitFor(t, "the terminal's sleep", func() bool { return len(running("sleep 8642")) > 0 })
	_, _ = term.Write([]byte("cd /tmp\r"))
	s.until("/tmp # ")
	term.Close()
	waitFor(t, "the sleep to end with the terminal", func() bool { return len(running("sleep 8642")) == 0 })
	if _, err := OpenTerminal(context.Background(), e.dialer(), 0, 24); err == nil {
		t.Error("a terminal of 0 columns")
	}
	if _, out := e.run(t, "pwd", time.Minute); strings.TrimSpace(out.stdout.String()) != "/tmp" {
		t.Errorf("after the hang-up a command starts in %q, want /tmp", out.stdout.String())
	}
}

package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// spare is the PID of the agent's spare shell once there is one.
func spare(t *testing.T, not int) int {
	t.Helper()
	var pid int
	waitFor(t, "a spare shell", func() bool {
		children.Lock()
		defer children.Unlock()
		for p := range children.spares {
			if p != not {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

func spareCount() int {
	children.Lock()
	defer children.Unlock()
	return len(children.spares)
}

func TestSpareShellRunsTheNextCommand(t *testing.T) {
	var last int
	t.Cleanup(func() {
		// Registered first, so it runs after the agent has stopped.
		if last != 0 && syscall.Kill(last, 0) == nil {
			t.Errorf("the spare shell %d outlives the agent", last)
		}
	})
	e := startAgent(t)
	// The agent starts with a spare ready.
	pid := spare(t, 0)
	for i := range 3 {
		res, out := e.run(t, "echo $$", 10*time.Second)
		if res.ExitCode != 0 || strings.TrimSpace(out.stdout.String()) != strconv.Itoa(pid) {
			t.Fatalf("command %d: exit %d, $$ = %q; want the spare shell %d", i, res.ExitCode, out.stdout.String(), pid)
		}
		pid = spare(t, pid)
	}
	last = pid

	// What the command sees is what a shell of its own gives it.
	tests := []struct{ command, stdout string }{
		{`[ -e /proc/self/fd/3 ] && echo open || echo closed`, "closed\n"},
		{`printf '%s|' 'a'\''b' "c\"d" '$HOME' \\ "$0"; echo`, "a'b|c\"d|$HOME|\\|flowbox-shell|\n"},
		{"printf '%s' 'two\nlines'", "two\nlines"},
		{"pwd", e.work + "\n"},
		{"cat /proc/self/oom_score_adj", "1000\n"},
		{"cat; echo end", "end\n"}, // standard input is empty
	}
	for _, tc := range tests {
		before := spare(t, 0)
		res, out := e.run(t, tc.command, 10*time.Second)
		if res.ExitCode != 0 || out.stdout.String() != tc.stdout || out.stderr.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.command, res.ExitCode, out.stdout.String(), out.stderr.String(), tc.stdout)
		}
		last = spare(t, before)
	}
}

func TestSpareShellRestoresTheStateWhenUsed(t *testing.T) {
	e := startAgent(t)
	spare(t, 0)
	gate := filepath.Join(e.work, "gate")
	// The long command takes the spare; the short one beside it starts a
	// shell of its own, and a new spare once it has ended, while the long
	// one runs.
	var wg sync.WaitGroup
	wg.Go(func() {
		res, out := e.run(t, `while [ ! -e gate ]; do sleep 0.01; done; export LATE=yes; cd /`, 30*time.Second)
		if res.ExitCode != 0 {
			t.Errorf("the long command: exit %d, stderr %q", res.ExitCode, out.stderr.String())
		}
	})
	waitFor(t, "the long command to take the spare", func() bool { return spareCount() == 0 })
	e.run(t, "true", 10*time.Second)
	pid := spare(t, 0)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// That spare started before the long command saved its state, and
	// runs with it.
	_, out := e.run(t, `echo "$$ $LATE $PWD"`, 10*time.Second)
	if got, want := out.stdout.String(), strconv.Itoa(pid)+" yes /\n"; got != want {
		t.Errorf("after the long command: %q; want %q", got, want)
	}
}

func TestSpareShellThatDies(t *testing.T) {
	e := startAgent(t)
	pid := 0
	for i := range maxSpareFailures {
		pid = spare(t, pid)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The command does not land in the dead shell.
		res, out := e.run(t, "echo ran", 10*time.Second)
		if res.ExitCode != 0 || out.stdout.String() != "ran\n" {
			t.Fatalf("after killing spare %d: exit %d, stdout %q", i+1, res.ExitCode, out.stdout.String())
		}
	}
	// After maxSpareFailures dead spares the agent makes no more, and
	// commands start their own shells.
	for range 3 {
		res, out := e.run(t, "echo ran", 10*time.Second)
		if res.ExitCode != 0 || out.stdout.String() != "ran\n" {
			t.Fatalf("without spares: exit %d, stdout %q", res.ExitCode, out.stdout.String())
		}
	}
	if n := spareCount(); n != 0 {
		t.Errorf("%d spare shells after %d died unused; want none", n, maxSpareFailures)
	}
}

func TestSpareShellTimesOutAndCancels(t *testing.T) {
	e := startAgent(t)
	spare(t, 0)
	res, _ := e.run(t, "sleep 30", 100*time.Millisecond)
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("a spare's command past its timeout: %+v", res)
	}
	pid := spare(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, _, err := e.exec(ctx, "sleep 30", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled command in a spare: %v", err)
	}
	waitFor(t, "the cancelled spare's shell to end", func() bool { return syscall.Kill(pid, 0) != nil })
}

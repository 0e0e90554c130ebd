package agent

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// procs is the client of e's background processes.
func (e agentEnv) procs() Procs {
	return Procs{Dial: func(ctx context.Context) (*Conn, error) { return Dial(ctx, e.sock, e.token) }}
}

// outputOf reads process id's output from 0 until it holds want.
func outputOf(t *testing.T, p Procs, id, want string) sandbox.ProcessOutput {
	t.Helper()
	var out sandbox.ProcessOutput
	waitFor(t, "output "+want, func() bool {
		var err error
		if out, err = p.Read(context.Background(), id, 0, 0); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(out.Data), want)
	})
	return out
}

// A background process starts where the last command left the shell,
// outlives the commands after it, takes its input, and ends reaped with
// its exit code; its output stays to be read.
func TestBackgroundProcess(t *testing.T) {
	e := startAgentWith(t, Config{Token: NewToken()})
	ctx := context.Background()
	p := e.procs()
	e.run(t, "mkdir sub && cd sub && export GREETING=hello", time.Minute)

	started, err := p.Start(ctx, `echo "$GREETING from $(pwd)"; read line; echo "got $line" >&2; exec sleep 7401`)
	if err != nil {
		t.Fatal(err)
	}
	if started.ID != "p1" || !started.Running || started.ExitCode != nil {
		t.Fatalf("started %+v", started)
	}
	outputOf(t, p, "p1", "hello from "+filepath.Join(e.work, "sub"))

	// Commands come and go (each end sweeps the orphans): it stays.
	e.run(t, "true", time.Minute)
	if err := p.Write(ctx, "p1", []byte("ping\n"), false); err != nil {
		t.Fatal(err)
	}
	out := outputOf(t, p, "p1", "got ping")
	if out.Offset != 0 || out.Process.Output != int64(len(out.Data)) || !out.Process.Running {
		t.Errorf("the output read: %+v", out)
	}
	// Read from an offset: only what came after.
	if rest, err := p.Read(ctx, "p1", int64(len(out.Data))-9, 0); err != nil || string(rest.Data) != "got ping\n" {
		t.Errorf("read from near the end: %q, %v", rest.Data, err)
	}
	if len(running("sleep 7401")) != 1 {
		t.Fatal("the background process is not running after a command ended")
	}

	// A stop ends it and everything it started.
	stopped, err := p.Stop(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Running || !stopped.Stopped || stopped.ExitCode == nil || *stopped.ExitCode != 137 || stopped.EndedAt.IsZero() {
		t.Errorf("stopped: %+v, want ended by SIGKILL (137)", stopped)
	}
	if left := running("sleep 7401"); len(left) > 0 {
		t.Errorf("survive the stop: %q", left)
	}
	if err := p.Write(ctx, "p1", []byte("late\n"), true); !errors.Is(err, sandbox.ErrProcessEnded) {
		t.Errorf("a write to an ended process: %v, want ErrProcessEnded", err)
	}

	// One that exits on its own, with its stray children killed after it.
	if _, err := p.Start(ctx, "sleep 7402 & echo bye; exit 3"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "p2 to end", func() bool {
		list, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(list) == 2 && !list[1].Running
	})
	list, _ := p.List(ctx)
	if got := list[1]; got.ID != "p2" || got.ExitCode == nil || *got.ExitCode != 3 || got.Stopped || got.Output != 4 {
		t.Errorf("p2 after its exit: %+v", got)
	}
	if left := running("sleep 7402"); len(left) > 0 {
		t.Errorf("a background process's stray child survives it: %q", left)
	}
	// A plain command's background child still ends with the command.
	e.run(t, "sleep 7403 &", time.Minute)
	if left := running("sleep 7403"); len(left) > 0 {
		t.Errorf("a command's background child survives it: %q", left)
	}
}

// Bounds and refusals: unknown processes, too many at once, the kept
// output's window.
func TestBackgroundBounds(t *testing.T) {
	e := startAgent(t)
	ctx := context.Background()
	p := e.procs()
	if _, err := p.Read(ctx, "p9", 0, 0); !errors.Is(err, sandbox.ErrNoProcess) {
		t.Errorf("read of an unknown process: %v, want ErrNoProcess", err)
	}
	if _, err := p.Stop(ctx, "../p1"); !errors.Is(err, sandbox.ErrNoProcess) {
		t.Errorf("stop of an unknown process: %v, want ErrNoProcess", err)
	}

	// Output past the kept window: reading from 0 starts at the oldest
	// byte kept.
	const total = sandbox.ProcessOutputKept + 300000
	if _, err := p.Start(ctx, "head -c 1348576 /dev/zero | tr '\\0' a; printf END"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long output", func() bool {
		out, err := p.Read(ctx, "p1", 0, 16)
		return err == nil && !out.Process.Running && out.Process.Output == total+3
	})
	out, _ := p.Read(ctx, "p1", 0, 0)
	first := out.Process.Output - sandbox.ProcessOutputKept
	if out.Offset != first || len(out.Data) != maxProcRead || !bytes.Equal(out.Data[:3], []byte("aaa")) {
		t.Errorf("read from 0: offset %d (want %d), %d bytes", out.Offset, first, len(out.Data))
	}
	if end, _ := p.Read(ctx, "p1", out.Process.Output-3, 0); string(end.Data) != "END" {
		t.Errorf("the last bytes: %q", end.Data)
	}

	for range sandbox.MaxProcesses {
		if _, err := p.Start(ctx, "sleep 7410"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Start(ctx, "sleep 7411"); !errors.Is(err, sandbox.ErrTooManyProcesses) {
		t.Errorf("one more than %d: %v, want ErrTooManyProcesses", sandbox.MaxProcesses, err)
	}
	if _, err := p.Stop(ctx, "p2"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Start(ctx, "sleep 7411"); err != nil {
		t.Errorf("after a stop there is room again: %v", err)
	}
}

// The agent's end (the sandbox's stop) ends its background processes.
func TestShutdownKillsBackground(t *testing.T) {
	e, cancel, done := bareAgent(t)
	if _, err := e.procs().Start(context.Background(), "sleep 7421 & sleep 7422"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the process", func() bool { return len(running("sleep 7421")) > 0 && len(running("sleep 7422")) > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve does not return after its context ended")
	}
	if left := running("sleep 742"); len(left) > 0 {
		t.Errorf("survive the shutdown: %q", left)
	}
}

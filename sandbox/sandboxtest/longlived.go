package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// lineSink gathers a command's live standard output and hands it out a
// line at a time.
type lineSink struct {
	mu      sync.Mutex
	partial bytes.Buffer
	lines   chan string
}

func newLineSink() *lineSink { return &lineSink{lines: make(chan string, 64)} }

func (l *lineSink) onOutput(s sandbox.Stream, p []byte) {
	if s != sandbox.Stdout {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial.Write(p)
	for {
		line, err := l.partial.ReadString('\n')
		if err != nil {
			// Not a whole line yet: keep it for the next chunk.
			rest := []byte(line)
			l.partial.Reset()
			l.partial.Write(rest)
			return
		}
		l.lines <- strings.TrimSuffix(line, "\n")
	}
}

// next is the next line, failing the test when none comes.
func (l *lineSink) next(t *testing.T, ctx context.Context, after string) string {
	t.Helper()
	select {
	case line := <-l.lines:
		return line
	case <-ctx.Done():
		t.Fatalf("no answer after %s before the test's deadline", after)
		return ""
	}
}

type execOutcome struct {
	res sandbox.ExecResult
	err error
}

// startLongLived runs command with standard input in the background; the
// test writes to the returned pipe, and the outcome arrives when Exec
// returns.
func startLongLived(ctx context.Context, t *testing.T, p sandbox.Provider, id, command string, sink *lineSink) (*io.PipeWriter, <-chan execOutcome) {
	in, out := io.Pipe()
	t.Cleanup(func() { in.Close() })
	done := make(chan execOutcome, 1)
	go func() {
		// The timeout asked for is ignored: a long-lived command has none.
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: command, Timeout: time.Second, Stdin: in, OnOutput: sink.onOutput})
		in.Close() // as callers do: the provider's reader of Stdin ends
		done <- execOutcome{res, err}
	}()
	return out, done
}

// testLongLived holds a provider to commands with standard input
// (ExecRequest.Stdin): a conversation with a program that runs past the
// timeout it asked for, in the sandbox's shell state, that saves none at
// its end, and ends when its input ends, its context ends or the sandbox
// stops. A provider without the capability refuses them with ErrNoStdin.
func testLongLived(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	ctx := ctxFor(t)
	if !p.Capabilities().Stdin {
		_, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "exec cat", Stdin: strings.NewReader("x\n")})
		if !errors.Is(err, sandbox.ErrNoStdin) {
			t.Fatalf("a command with standard input on a provider without them: err %v, want ErrNoStdin", err)
		}
		return
	}
	if res := run(t, p, id, "mkdir -p /workspace/conv && cd /workspace/conv && export FB_MARK=kept", 30*time.Second); res.ExitCode != 0 {
		t.Fatalf("prepare the state: %+v", res)
	}

	t.Run("Conversation", func(t *testing.T) {
		sink := newLineSink()
		// It moves elsewhere first: a save at its end would leave that
		// directory for the next command.
		cmd := `cd /tmp; while IFS= read -r l; do printf '%s %s %s\n' "$l" "$OLDPWD" "$FB_MARK"; done; echo bye`
		in, done := startLongLived(ctx, t, p, id, cmd, sink)
		for i := range 3 {
			if _, err := fmt.Fprintf(in, "ping%d\n", i); err != nil {
				t.Fatalf("write line %d: %v", i, err)
			}
			want := fmt.Sprintf("ping%d /workspace/conv kept", i)
			if got := sink.next(t, ctx, fmt.Sprintf("line %d", i)); got != want {
				t.Fatalf("answer %d: got %q, want %q (each line is answered before the next is sent, in the shell's state)", i, got, want)
			}
			if i == 0 {
				time.Sleep(1500 * time.Millisecond) // past the timeout it asked for
			}
		}
		// Another command meanwhile, that changes the directory.
		if res := run(t, p, id, "cd /workspace && pwd", 30*time.Second); res.Stdout != "/workspace\n" {
			t.Fatalf("a command beside the long-lived one: %+v", res)
		}
		in.Close()
		var out execOutcome
		select {
		case out = <-done:
		case <-ctx.Done():
			t.Fatal("the command did not end at the end of its input")
		}
		if out.err != nil || out.res.ExitCode != 0 || out.res.TimedOut || !strings.Contains(out.res.Stdout, "ping2 /workspace/conv kept\nbye\n") {
			t.Fatalf("its end: err %v, result %+v", out.err, out.res)
		}
		if res := run(t, p, id, "pwd", 30*time.Second); res.Stdout != "/workspace\n" {
			t.Fatalf("after the long-lived command ended, the directory is %q, want the other command's /workspace: it saved its state", res.Stdout)
		}
	})

	t.Run("CancelEndsIt", func(t *testing.T) {
		sink := newLineSink()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		in, done := startLongLived(cctx, t, p, id, "echo ready; exec sleep 3000", sink)
		defer in.Close()
		if got := sink.next(t, ctx, "start"); got != "ready" {
			t.Fatalf("start: got %q", got)
		}
		cancel()
		select {
		case out := <-done:
			if out.err == nil {
				t.Fatalf("cancelled: no error, result %+v", out.res)
			}
		case <-ctx.Done():
			t.Fatal("Exec did not return once its context ended")
		}
		eventually(t, ctx, "the cancelled command's sleep gone", func() bool {
			return !strings.Contains(strings.Join(h.Processes(t, p, id), "\n"), "sleep 3000")
		})
	})

	t.Run("StopEndsIt", func(t *testing.T) {
		sink := newLineSink()
		in, done := startLongLived(ctx, t, p, id, "echo ready; exec cat", sink)
		defer in.Close()
		if got := sink.next(t, ctx, "start"); got != "ready" {
			t.Fatalf("start: got %q", got)
		}
		if err := p.Stop(ctx, id); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("Exec did not return once the sandbox stopped")
		}
		if err := p.Ensure(ctx, sandbox.Spec{ID: id, Labels: map[string]string{"appId": "app", "userId": "user", "chatId": id}}); err != nil {
			t.Fatalf("Ensure after the stop: %v", err)
		}
		if res := run(t, p, id, "pwd; echo $FB_MARK", 30*time.Second); res.Stdout != "/workspace\nkept\n" {
			t.Fatalf("the state after stop/start: %+v", res)
		}
	})
}

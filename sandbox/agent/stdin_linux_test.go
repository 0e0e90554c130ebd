package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestStdinConversation: a command with standard input answers each line
// as it comes, and ends at the end of its input with its own status.
func TestStdinConversation(t *testing.T) {
	e := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, e.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inR.Close()
	outR, outW := io.Pipe()
	done := make(chan Result, 1)
	go func() {
		res, err := c.Exec(ctx, Request{Command: `while IFS= read -r l; do echo "got $l"; done; exit 7`, Stdin: inR}, outW, io.Discard)
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		outW.Close()
		done <- res
	}()
	lines := bufio.NewReader(outR)
	for _, word := range []string{"one", "two", strings.Repeat("x", 3*MaxFrame)} {
		if _, err := io.WriteString(inW, word+"\n"); err != nil {
			t.Fatal(err)
		}
		got, err := lines.ReadString('\n')
		if err != nil || got != "got "+word+"\n" {
			t.Fatalf("answer to %.10q: %.20q, %v", word, got, err)
		}
	}
	inW.Close()
	if res := <-done; res.ExitCode != 7 || res.Cancelled || res.TimedOut {
		t.Errorf("its end: %+v; want exit 7", res)
	}
}

// rawStdinConn sends a stdin request by hand, to test what a client may
// send that this package's client never does.
func rawStdinConn(t *testing.T, e agentEnv, command string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	line, _ := json.Marshal(wireRequest{Command: command, Stdin: true})
	if _, err := c.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	return c
}

// exitOf reads frames until the exit frame.
func exitOf(t *testing.T, c net.Conn) Result {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, MaxFrame)
	r := bufio.NewReader(c)
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			t.Fatalf("read the answer: %v", err)
		}
		if typ == frameExit {
			res, err := parseExit(p)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
	}
}

func writeFrame(t *testing.T, c net.Conn, typ byte, p []byte) {
	t.Helper()
	h := frameHeader(typ, len(p))
	if _, err := c.Write(append(h[:], p...)); err != nil {
		t.Fatalf("write frame %d: %v", typ, err)
	}
}

// TestStdinEnds: each way a client ends such a command.
func TestStdinEnds(t *testing.T) {
	e := startAgent(t)
	t.Run("cancel frame", func(t *testing.T) {
		c := rawStdinConn(t, e, "exec sleep 1000")
		writeFrame(t, c, frameCancel, nil)
		if res := exitOf(t, c); !res.Cancelled {
			t.Errorf("after a cancel frame: %+v; want cancelled", res)
		}
	})
	t.Run("unknown frame", func(t *testing.T) {
		c := rawStdinConn(t, e, "exec sleep 1000")
		writeFrame(t, c, frameStdout, []byte("x"))
		if res := exitOf(t, c); !res.Cancelled {
			t.Errorf("after a frame a client has no business sending: %+v; want cancelled", res)
		}
	})
	t.Run("more input than the command reads", func(t *testing.T) {
		// The command never reads: past the pipe's buffer and the
		// agent's queue, the command is cancelled instead of the agent
		// holding without bound.
		c := rawStdinConn(t, e, "exec sleep 1000")
		chunk := make([]byte, MaxFrame)
		go func() {
			for range 2 * MaxStdinQueue / MaxFrame {
				h := frameHeader(frameStdin, len(chunk))
				if _, err := c.Write(append(h[:], chunk...)); err != nil {
					return
				}
			}
		}()
		if res := exitOf(t, c); !res.Cancelled {
			t.Errorf("after %d bytes the command did not read: %+v; want cancelled", 2*MaxStdinQueue, res)
		}
	})
	t.Run("end of input", func(t *testing.T) {
		c := rawStdinConn(t, e, "cat; echo done")
		writeFrame(t, c, frameStdin, []byte("abc"))
		writeFrame(t, c, frameStdinEnd, nil)
		if res := exitOf(t, c); res.ExitCode != 0 || res.Cancelled {
			t.Errorf("after the end of its input: %+v; want exit 0", res)
		}
	})
	waitFor(t, "the sleeps gone", func() bool { return len(running("sleep 1000")) == 0 })
}

// TestStdinNotSaved: a long-lived command restores the shell's state and
// saves none at its end.
func TestStdinNotSaved(t *testing.T) {
	e := startAgent(t)
	if res, out := e.run(t, "cd /tmp && export FB_X=1", 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("set the state: %+v %s", res, out.stderr.String())
	}
	c := rawStdinConn(t, e, `echo "$PWD $FB_X"; cd /; export FB_X=2; exit 0`)
	if res := exitOf(t, c); res.ExitCode != 0 {
		t.Fatalf("the long-lived command: %+v", res)
	}
	if res, out := e.run(t, `echo "$PWD $FB_X"`, 10*time.Second); out.stdout.String() != "/tmp 1\n" {
		t.Errorf("after a long-lived command, the state is %q (%+v); want /tmp 1, as before it", out.stdout.String(), res)
	}
}

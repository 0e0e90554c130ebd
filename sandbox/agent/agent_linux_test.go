package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests run the agent in the test process, on the host, with real
// processes. They do not run in parallel: the agent kills every orphan of
// the process whenever no command runs, as it does in a sandbox.

// agentEnv is one agent serving on a temporary socket.
type agentEnv struct {
	sock, state, work string
	// token is the agent's, which a client of its socket proves too.
	token []byte
}

func startAgent(t *testing.T, env ...string) agentEnv {
	t.Helper()
	return startAgentWith(t, Config{Env: env})
}

// startAgentWith starts an agent with cfg, its socket and directories
// temporary.
func startAgentWith(t testing.TB, cfg Config) agentEnv {
	t.Helper()
	dir := t.TempDir()
	e := agentEnv{
		sock:  filepath.Join(dir, "agent.sock"),
		state: filepath.Join(dir, "state"),
		work:  filepath.Join(dir, "work"),
		token: cfg.Token,
	}
	for _, d := range []string{e.state, e.work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if cfg.Shell == "" {
			cfg.Shell = "/bin/sh"
		}
		cfg.Socket, cfg.StateDir, cfg.WorkDir = e.sock, e.state, e.work
		cfg.Env = append(slices.Clip(cfg.Env), runMark)
		done <- Serve(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	waitFor(t, "the agent to listen", func() bool {
		c, err := Dial(context.Background(), e.sock, e.token)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return e
}

type output struct {
	stdout, stderr bytes.Buffer
}

func (e agentEnv) exec(ctx context.Context, command string, timeout time.Duration) (Result, *output, error) {
	out := new(output)
	c, err := Dial(ctx, e.sock, e.token)
	if err != nil {
		return Result{}, out, err
	}
	res, err := c.Exec(ctx, Request{Command: command, Timeout: timeout}, &out.stdout, &out.stderr)
	return res, out, err
}

func (e agentEnv) run(t *testing.T, command string, timeout time.Duration) (Result, *output) {
	t.Helper()
	res, out, err := e.exec(context.Background(), command, timeout)
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	return res, out
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	// Bounded by time, not by a count of tries: on a loaded machine a
	// process may take seconds to be reaped.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// runMark is in the environment of every command this test binary's
// agents run (startAgentWith), so that running counts those and not the
// processes of other tests running on the machine at the same time.
var runMark = fmt.Sprintf("FLOWBOX_AGENT_TEST_RUN=%d", os.Getpid())

// running lists the live processes started by this binary's agents whose
// command line contains marker.
func running(marker string) []string {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		line := strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		if !strings.Contains(line, marker) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(n), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00"+runMark+"\x00")) {
			continue
		}
		out = append(out, line)
	}
	return out
}

func TestExec(t *testing.T) {
	e := startAgent(t, "FLOWBOX_TEST=set", "HOME=/home/test")
	tests := []struct {
		command        string
		stdout, stderr string
		exit           int
	}{
		{"echo out; echo err >&2", "out\n", "err\n", 0},
		{"exit 3", "", "", 3},
		{"kill -KILL $$", "", "", 137},
		{"kill -TERM $$", "", "", 143},
		{"cat; echo done", "done\n", "", 0}, // stdin is empty
		{"", "", "", 0},
		{`echo "$TERM $LANG $HOME $FLOWBOX_TEST"`, "dumb C.UTF-8 /home/test set\n", "", 0},
		{"pwd", e.work + "\n", "", 0},
		{`printf '%s' "$0"`, "flowbox-shell", "", 0},
		{"head -c 100000 /dev/zero | wc -c", "100000\n", "", 0},
	}
	for _, tc := range tests {
		res, out := e.run(t, tc.command, 10*time.Second)
		if out.stdout.String() != tc.stdout || out.stderr.String() != tc.stderr || res.ExitCode != tc.exit || res.TimedOut || res.Cancelled {
			t.Errorf("%q: got stdout=%q stderr=%q %+v; want stdout=%q stderr=%q exit=%d",
				tc.command, out.stdout.String(), out.stderr.String(), res, tc.stdout, tc.stderr, tc.exit)
		}
	}

	// The persistent shell keeps its state between connections.
	e.run(t, "mkdir -p sub && cd sub && export KEPT='a b'", 10*time.Second)
	if _, out := e.run(t, `echo "$KEPT"; pwd`, 10*time.Second); out.stdout.String() != "a b\n"+e.work+"/sub\n" {
		t.Errorf("state: stdout = %q, want the variable and directory of the previous command", out.stdout.String())
	}
}

func TestKillsEveryProcess(t *testing.T) {
	e := startAgent(t)
	tests := []struct {
		name     string
		command  string
		timeout  time.Duration
		timedOut bool
		marker   string
		// orphan: the process leaves the session and loses its parent,
		// so it ends only once no other command runs.
		orphan bool
	}{
		{"background job holding stdout", "sleep 9301 &", 10 * time.Second, false, "sleep 9301", false},
		{"background job, output redirected", "sleep 9302 >/dev/null 2>&1 &", 10 * time.Second, false, "sleep 9302", false},
		{"new session, command ends", "setsid sleep 9303 >/dev/null 2>&1 & sleep 0.2", 10 * time.Second, false, "sleep 9303", true},
		{"orphan in a new session", "(setsid sleep 9304 >/dev/null 2>&1 &); echo forked", 10 * time.Second, false, "sleep 9304", true},
		{"new session, timeout", "setsid sleep 9305 & sleep 9306", time.Second, true, "sleep 930", false},
		{"new session whose parent waits", "setsid sh -c 'sleep 9307 & wait' & wait", time.Second, true, "sleep 9307", false},
		{"ignores SIGTERM and SIGHUP", `trap '' TERM HUP; sh -c "trap '' TERM HUP; sleep 9308" & wait`, time.Second, true, "sleep 9308", false},
		{"endless output", "yes 9309", time.Second, true, "yes 9309", false},
		{"endless output in the background", "yes 9310 & sleep 9311", time.Second, true, " 931", false},
	}
	// Alone, and beside another command: then only the command's own
	// kill can have ended its processes.
	for _, beside := range []bool{false, true} {
		name := "alone"
		if beside {
			name = "beside another command"
		}
		t.Run(name, func(t *testing.T) {
			if beside {
				ctx, cancel := context.WithCancel(context.Background())
				other := make(chan error, 1)
				go func() {
					_, _, err := e.exec(ctx, "sleep 8300", time.Minute)
					other <- err
				}()
				defer func() {
					cancel()
					<-other
				}()
				waitFor(t, "the other command", func() bool { return len(running("sleep 8300")) > 0 })
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					if beside && tc.orphan {
						t.Skip("an orphan ends with the last command (TestOrphansEndWithTheLastCommand)")
					}
					res, out := e.run(t, "echo started; "+tc.command, tc.timeout)
					if res.TimedOut != tc.timedOut {
						t.Errorf("timedOut = %v, want %v (%+v)", res.TimedOut, tc.timedOut, res)
					}
					if !strings.HasPrefix(out.stdout.String(), "started\n") {
						t.Errorf("stdout begins %.40q, want started", out.stdout.String())
					}
					// The kill is done before the answer: nothing may be left.
					if left := running(tc.marker); len(left) > 0 {
						t.Fatalf("processes survive their command: %q", left)
					}
				})
			}
		})
	}
}

// Processes that left their command's session and lost their parent are
// told apart from other commands' only once no command runs.
func TestOrphansEndWithTheLastCommand(t *testing.T) {
	e := startAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := make(chan error, 1)
	go func() {
		_, _, err := e.exec(ctx, "sleep 9321", time.Minute)
		long <- err
	}()
	waitFor(t, "the long command", func() bool { return len(running("sleep 9321")) > 0 })
	// Give setsid time to take the process out of the session before the
	// command ends: until then it is the command's and dies with it.
	e.run(t, "(setsid sleep 9322 >/dev/null 2>&1 &); sleep 0.3", 10*time.Second)
	if len(running("sleep 9322")) == 0 {
		t.Fatal("the orphan is already gone while another command runs; this test needs it alive")
	}
	cancel()
	if err := <-long; !errors.Is(err, context.Canceled) {
		t.Fatalf("the long command: err = %v, want context.Canceled", err)
	}
	if left := running("sleep 932"); len(left) > 0 {
		t.Fatalf("survive the last command: %q", left)
	}
}

func TestTimeoutResult(t *testing.T) {
	e := startAgent(t)
	begin := time.Now()
	res, out := e.run(t, "echo started; yes 9331 | head -c 1000000 >&2; sleep 9332; echo never", 500*time.Millisecond)
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("result %+v, want timed out and killed (137)", res)
	}
	if out.stdout.String() != "started\n" || out.stderr.Len() != 1000000 {
		t.Errorf("stdout %q, %d bytes of stderr; want started and all 1000000", out.stdout.String(), out.stderr.Len())
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("a 500ms timeout took %v", d)
	}
}

func TestCancel(t *testing.T) {
	e := startAgent(t)
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		res, out, err := e.exec(ctx, "echo started; sleep 9341 & sleep 9342", time.Minute)
		if !errors.Is(err, context.Canceled) || !res.Cancelled {
			t.Fatalf("result %+v, err %v; want cancelled, context.Canceled", res, err)
		}
		if out.stdout.String() != "started\n" {
			t.Errorf("stdout = %q, want started", out.stdout.String())
		}
		if left := running("sleep 934"); len(left) > 0 {
			t.Fatalf("processes survive the cancellation: %q", left)
		}
	})
	t.Run("connection closed", func(t *testing.T) {
		c, err := net.Dial("unix", e.sock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, `{"command":"echo started; sleep 9343 & sleep 9344","timeoutMs":60000}`+"\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, MaxFrame)
		if typ, p, err := readFrame(c, buf); err != nil || typ != frameStdout || string(p) != "started\n" {
			t.Fatalf("first frame %d %q %v, want stdout started", typ, p, err)
		}
		c.Close()
		waitFor(t, "the processes to end", func() bool { return len(running("sleep 934")) == 0 })
	})
	if _, out := e.run(t, "echo alive", 10*time.Second); out.stdout.String() != "alive\n" {
		t.Fatalf("after the cancellations: stdout %q", out.stdout.String())
	}
}

// A request the agent cannot serve gets an error frame; the agent serves
// on.
func TestMalformedRequests(t *testing.T) {
	e := startAgent(t)
	tests := []struct {
		name string
		send []byte
		half bool // close the writing side after send
	}{
		{"not JSON", []byte("rm -rf /\n"), false},
		{"wrong type", []byte(`{"command": 1}` + "\n"), false},
		{"unknown field", []byte(`{"command": "true", "user": "root"}` + "\n"), false},
		{"two values", []byte(`{"command": "true"} {"command": "true"}` + "\n"), false},
		{"negative timeout", []byte(`{"command": "true", "timeoutMs": -1}` + "\n"), false},
		{"NUL in the command", []byte(`{"command": "echo a\u0000b"}` + "\n"), false},
		{"over the size bound", append(bytes.Repeat([]byte("a"), MaxRequest+10), '\n'), false},
		{"cut short", []byte(`{"command": "tr`), true},
		{"empty", nil, true},
		{"binary", []byte{0xff, 0xfe, 0, 1, '\n'}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("unix", e.sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() {
				// The agent may answer and close before it read it all.
				_, _ = c.Write(tc.send)
				if tc.half {
					_ = c.(*net.UnixConn).CloseWrite()
				}
			}()
			r := bufio.NewReader(c)
			buf := make([]byte, MaxFrame)
			typ, p, err := readFrame(r, buf)
			if err != nil || typ != frameError || len(p) == 0 {
				t.Fatalf("got frame %d %q, %v; want an error frame", typ, p, err)
			}
			if _, _, err := readFrame(r, buf); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("after the error frame: %v, want the connection closed", err)
			}
		})
	}
	if _, out := e.run(t, "echo alive", 10*time.Second); out.stdout.String() != "alive\n" {
		t.Fatalf("after malformed requests: stdout %q", out.stdout.String())
	}
}

// The sandbox can replace the socket with anything: the client connects to
// sockets only, and never through a link.
func TestDialRefusesWhatIsNotTheSocket(t *testing.T) {
	dir := t.TempDir()
	// other stands for a socket of the host the sandbox must not reach,
	// such as the Docker daemon's.
	other := filepath.Join(dir, "other.sock")
	ln, err := net.Listen("unix", other)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	stale := filepath.Join(dir, "stale.sock")
	if l, err := net.Listen("unix", stale); err != nil {
		t.Fatal(err)
	} else {
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
	}

	tests := []struct {
		name  string
		plant func(path string) error
		want  error
	}{
		{"link to another socket", func(p string) error { return os.Symlink(other, p) }, ErrNotSocket},
		{"relative link", func(p string) error { return os.Symlink("other.sock", p) }, ErrNotSocket},
		{"dangling link", func(p string) error { return os.Symlink("/nonexistent.sock", p) }, ErrNotSocket},
		{"regular file", func(p string) error { return os.WriteFile(p, nil, 0o644) }, ErrNotSocket},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, ErrNotSocket},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, ErrNotSocket},
		{"missing", func(string) error { return nil }, ErrNotListening},
		{"socket nobody listens on", func(p string) error { return os.Link(stale, p) }, ErrNotListening},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "agent"+strconv.Itoa(i)+".sock")
			if err := tc.plant(path); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				c, err := Dial(context.Background(), path, nil)
				if c != nil {
					c.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Errorf("Dial: err = %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Dial hangs")
			}
		})
	}
	select {
	case <-accepted:
		t.Fatal("the client connected to the other socket through a link")
	case <-time.After(100 * time.Millisecond):
	}
	// The same socket by its own name is reachable: the refusals above
	// are the links', not the socket's.
	c, err := Dial(context.Background(), other, nil)
	if err != nil {
		t.Fatalf("Dial of the socket itself: %v", err)
	}
	c.Close()
	<-accepted
}

// What answers on the socket may be the sandbox itself: the client bounds
// what it reads and gives up on an agent that stops answering.
func TestClientDistrustsTheAgent(t *testing.T) {
	defer func(g time.Duration) { grace = g }(grace)
	grace = 200 * time.Millisecond
	frame := func(typ byte, p []byte) []byte {
		h := frameHeader(typ, len(p))
		return append(h[:], p...)
	}
	huge := frameHeader(frameStdout, 0)
	huge[1], huge[2], huge[3], huge[4] = 0x7f, 0xff, 0xff, 0xff
	tests := []struct {
		name   string
		answer []byte
		want   error
	}{
		{"frame over the bound", huge[:], ErrProtocol},
		{"unknown frame type", frame(9, []byte("x")), ErrProtocol},
		{"short exit frame", frame(frameExit, []byte{0, 0}), ErrProtocol},
		{"closed before the exit frame", frame(frameStdout, []byte("partial")), io.ErrUnexpectedEOF},
		{"refusal with control characters", frame(frameError, []byte("no\n\x1b[31mway")), ErrRefused},
		{"silent", nil, os.ErrDeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "fake.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n')
				_, _ = c.Write(tc.answer)
				if tc.answer == nil {
					_, _ = io.Copy(io.Discard, c) // until the client gives up
				}
			}()
			defer wg.Wait()
			c, err := Dial(context.Background(), sock, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Exec(context.Background(), Request{Command: "true", Timeout: 100 * time.Millisecond}, io.Discard, io.Discard)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Exec = %+v, %v; want %v", res, err, tc.want)
			}
			if strings.ContainsAny(err.Error(), "\n\x1b") {
				t.Errorf("the error carries the agent's control characters: %q", err)
			}
		})
	}
}

// bareAgent serves an agent in this process on a socket in a temporary
// directory, until cancel; done has what Serve returned.
func bareAgent(t *testing.T) (e agentEnv, cancel context.CancelFunc, done <-chan error) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, Config{Socket: sock, StateDir: dir, WorkDir: dir, Env: []string{runMark}})
	}()
	waitFor(t, "the agent to listen", func() bool {
		c, err := Dial(context.Background(), sock, nil)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return agentEnv{sock: sock}, cancel, served
}

func TestShutdownKillsCommands(t *testing.T) {
	e, cancel, done := bareAgent(t)
	type answer struct {
		res Result
		err error
	}
	ran := make(chan answer, 1)
	go func() {
		res, _, err := e.exec(context.Background(), "sleep 9351 & sleep 9352", time.Minute)
		ran <- answer{res, err}
	}()
	waitFor(t, "the command", func() bool { return len(running("sleep 9352")) > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve does not return after its context ended")
	}
	if a := <-ran; a.err != nil || !a.res.Cancelled {
		t.Errorf("the running command: %+v, %v; want it cancelled", a.res, a.err)
	}
	if left := running("sleep 935"); len(left) > 0 {
		t.Errorf("survive the shutdown: %q", left)
	}
	if _, err := os.Lstat(e.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left behind (lstat: %v)", err)
	}
}

func TestServeReplacesAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	// As left by an agent that was killed.
	if err := os.Symlink("/nonexistent", sock); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, Config{Socket: sock, StateDir: dir, WorkDir: dir}) }()
	defer func() {
		cancel()
		<-done
	}()
	e := agentEnv{sock: sock}
	waitFor(t, "the agent to listen", func() bool {
		_, out, err := e.exec(context.Background(), "echo up", 5*time.Second)
		return err == nil && out.stdout.String() == "up\n"
	})
}

func TestCommandEnv(t *testing.T) {
	got := commandEnv([]string{"PATH=/bin", "X=1", "bad", "=v", "X=2"})
	want := []string{"PATH=/bin", "HOME=/root", "LANG=C.UTF-8", "TERM=dumb", "X=2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("commandEnv = %q, want %q", got, want)
	}
}

package agent

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// freeAddr returns a loopback TCP address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startTCPAgent starts an agent serving on TCP as well, with token.
func startTCPAgent(t *testing.T, token string) (agentEnv, string) {
	t.Helper()
	addr := freeAddr(t)
	e := startAgentWith(t, Config{Listen: addr, Token: []byte(token)})
	waitFor(t, "the agent to listen on TCP", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return e, addr
}

const testToken = "a token of the sandbox, 32 bytes"

func TestTCPExec(t *testing.T) {
	e, addr := startTCPAgent(t, testToken)
	ctx := context.Background()
	c, err := DialTCP(ctx, addr, []byte(testToken))
	if err != nil {
		t.Fatalf("DialTCP: %v", err)
	}
	var stdout, stderr bytes.Buffer
	res, err := c.Exec(ctx, Request{Command: "cd sub 2>/dev/null || mkdir sub; echo over tcp; pwd", Timeout: 10 * time.Second}, &stdout, &stderr)
	if err != nil || res.ExitCode != 0 || stdout.String() != "over tcp\n"+e.work+"\n" {
		t.Fatalf("Exec over TCP = %+v, %v, stdout %q stderr %q", res, err, stdout.String(), stderr.String())
	}
	// The Unix socket serves the same shell at the same time.
	if res, out := e.run(t, "pwd", 10*time.Second); res.ExitCode != 0 || out.stdout.String() != e.work+"\n" {
		t.Fatalf("Exec over the socket = %+v, %q", res, out.stdout.String())
	}
}

func TestTCPWrongToken(t *testing.T) {
	e, addr := startTCPAgent(t, testToken)
	ctx := context.Background()
	// An engine with another sandbox's token: the agent's proof fails,
	// and the command is never sent.
	if _, err := DialTCP(ctx, addr, []byte("the token of another sandbox...")); !errors.Is(err, ErrAuth) {
		t.Fatalf("DialTCP with a wrong token: err = %v, want ErrAuth", err)
	}
	// A client that does not know the token and sends a request anyway:
	// the agent runs nothing.
	marker := filepath.Join(e.work, "ran")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(make([]byte, nonceSize)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, nonceSize+sha256.Size)); err != nil {
		t.Fatalf("read the agent's challenge: %v", err)
	}
	forged := append(bytes.Repeat([]byte{1}, sha256.Size), []byte(`{"command":"touch `+marker+`"}`+"\n")...)
	if _, err := c.Write(forged); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatalf("the agent answered %d bytes to a forged proof", n)
	}
	// Commands that run still work, and the forged one did not run.
	e.run(t, "true", 10*time.Second)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a request with a forged proof ran: %v", err)
	}
	// A request with no handshake at all is refused the same way.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte(`{"command":"touch ` + marker + `"}` + "\n" + strings.Repeat("x", 64))); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, bufio.NewReader(c2))
	e.run(t, "true", 10*time.Second)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a request without a handshake ran: %v", err)
	}
}

func TestServeRefusesTCPWithoutToken(t *testing.T) {
	err := Serve(context.Background(), Config{Listen: freeAddr(t), Token: []byte("short")})
	if err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Serve on TCP with a short token: %v, want a refusal naming the token", err)
	}
}

// TestFiles runs the file operations through the agent, over the Unix
// socket and over TCP.
func TestFiles(t *testing.T) {
	e, addr := startTCPAgent(t, testToken)
	for _, tc := range []struct {
		name string
		dial func(ctx context.Context) (*Conn, error)
	}{
		{"socket", func(ctx context.Context) (*Conn, error) { return Dial(ctx, e.sock, e.token) }},
		{"tcp", func(ctx context.Context) (*Conn, error) { return DialTCP(ctx, addr, []byte(testToken)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testFiles(t, e, Files{Dial: tc.dial})
		})
	}
}

func testFiles(t *testing.T, e agentEnv, files Files) {
	ctx := context.Background()
	res, out := e.run(t, `rm -rf ./*; mkdir -p d/e && echo inner > d/e/in.txt && head -c 100000 /dev/urandom > big.bin &&
ln -s / rootlink && ln -s d/e/in.txt rel && mkfifo fifo && echo ok`, 10*time.Second)
	if res.ExitCode != 0 || out.stdout.String() != "ok\n" {
		t.Fatalf("setup: %+v %q", res, out.stderr.String())
	}
	entries, err := files.List(ctx, "/workspace")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name+":"+en.Type)
	}
	if got, want := strings.Join(names, " "), "d:directory big.bin:file fifo:other rel:symlink rootlink:symlink"; got != want {
		t.Errorf("List = %s, want %s", got, want)
	}
	if info, err := files.Stat(ctx, "d/e/in.txt"); err != nil || info.Size != 6 || info.Path != "/workspace/d/e/in.txt" || info.Type != "file" {
		t.Errorf("Stat = %+v, %v", info, err)
	}
	want, _ := os.ReadFile(filepath.Join(e.work, "big.bin"))
	if got, err := files.ReadFile(ctx, "big.bin", 1<<20); err != nil || !bytes.Equal(got, want) {
		t.Errorf("ReadFile(big.bin) = %d bytes, %v; want the file's %d", len(got), err, len(want))
	}
	if _, err := files.ReadFile(ctx, "big.bin", 1000); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Errorf("ReadFile over max: err = %v, want ErrTooLarge", err)
	}
	rc, info, err := files.Open(ctx, "rel")
	if err != nil || info.Size != 6 {
		t.Fatalf("Open(rel) = %+v, %v", info, err)
	}
	if got, err := io.ReadAll(rc); err != nil || string(got) != "inner\n" {
		t.Errorf("read through Open = %q, %v", got, err)
	}
	rc.Close()
	for _, p := range []string{"rootlink/etc/passwd", "fifo", "../etc/passwd", "/etc/passwd", "d", "missing"} {
		_, err := files.ReadFile(ctx, p, 1<<20)
		if !errors.Is(err, sandbox.ErrInvalidPath) && !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("ReadFile(%q): err = %v, want ErrInvalidPath or ErrNotFound", p, err)
		}
	}
	if _, err := files.Stat(ctx, "missing"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Stat(missing): err = %v, want ErrNotFound", err)
	}
	if err := files.WriteFile(ctx, "rootlink/tmp/escape", []byte("x")); err == nil {
		t.Error("WriteFile through a link to / succeeded")
	}
	big := bytes.Repeat([]byte("0123456789"), 20000) // several frames
	if err := files.WriteFile(ctx, "new/dir/w.txt", big); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(e.work, "new/dir/w.txt")); err != nil || !bytes.Equal(got, big) {
		t.Errorf("the file WriteFile wrote: %d bytes, %v; want %d", len(got), err, len(big))
	}
	if err := files.WriteFile(ctx, "empty.txt", nil); err != nil {
		t.Fatalf("WriteFile of an empty file: %v", err)
	}
	var buf bytes.Buffer
	if err := files.Zip(ctx, "/workspace", &buf); err != nil {
		t.Fatalf("Zip: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("the zip is not readable: %v", err)
	}
	got := map[string]bool{}
	for _, f := range zr.File {
		got[f.Name] = true
	}
	for _, name := range []string{"workspace/d/e/in.txt", "workspace/big.bin", "workspace/new/dir/w.txt", "workspace/empty.txt"} {
		if !got[name] {
			t.Errorf("the zip lacks %s; has %v", name, got)
		}
	}
	if got["workspace/fifo"] || got["workspace/rootlink"] {
		t.Errorf("the zip holds what is not a regular file: %v", got)
	}
	// The engine adds the mounts from the host and asks the agent to
	// leave them out (E4).
	buf.Reset()
	if err := files.ZipSkipping(ctx, "/workspace", &buf, []string{"d/e", "new"}); err != nil {
		t.Fatalf("ZipSkipping: %v", err)
	}
	if zr, err = zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
		t.Fatalf("the zip is not readable: %v", err)
	}
	var skipped []string
	for _, f := range zr.File {
		skipped = append(skipped, f.Name)
	}
	if got, want := strings.Join(skipped, " "), "workspace/ workspace/big.bin workspace/d/ workspace/empty.txt"; got != want {
		t.Errorf("the zip skipping d/e and new holds %s, want %s", got, want)
	}
	// A cancelled context ends an operation.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := files.List(cctx, "/workspace"); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context: err = %v, want context.Canceled", err)
	}
}

// TestSocketNeedsToken: an agent with a token proves it to its Unix
// socket's clients before its answer, and runs nothing for a client with
// another token's ID or none.
func TestSocketNeedsToken(t *testing.T) {
	e, _ := startTCPAgent(t, testToken)
	ctx := context.Background()
	for _, token := range [][]byte{[]byte("another token of 32 bytes, wrong"), nil} {
		c, err := Dial(ctx, e.sock, token)
		if err != nil {
			t.Fatalf("Dial with token %q: %v", token, err)
		}
		var out bytes.Buffer
		res, err := c.Exec(ctx, Request{Command: "echo ran", Timeout: 5 * time.Second}, &out, io.Discard)
		if err == nil || out.Len() > 0 {
			t.Fatalf("a client with token %q ran a command: %+v, %v, %q", token, res, err, out.String())
		}
		if token != nil && !errors.Is(err, ErrNotListening) {
			t.Errorf("Exec with another token: %v, want ErrNotListening (closed before the proof)", err)
		}
	}
	c, err := Dial(ctx, e.sock, []byte(testToken))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if res, err := c.Exec(ctx, Request{Command: "echo ran", Timeout: 5 * time.Second}, &out, io.Discard); err != nil || res.ExitCode != 0 || out.String() != "ran\n" {
		t.Fatalf("the token's client: %+v, %v, %q", res, err, out.String())
	}
}

// TestSocketImpostor: a process that took the agent's socket and answers
// with frames of its own (a forged exit code 0) is refused before any of
// its bytes is taken, whatever it sends: ErrAuth, and no output.
func TestSocketImpostor(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, exit := frameHeader(frameStdout, 7), []byte(`{"exitCode":0}`)
	end := frameHeader(frameExit, len(exit))
	forged := append(append(append(out[:], "forged\n"...), end[:]...), exit...)
	answers := [][]byte{
		append(make([]byte, 32), forged...), // a "proof" of zeros, then frames
		forged,                              // frames alone
		[]byte("short"),                     // less than a proof
	}
	go func() {
		for _, a := range answers {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// The challenge, the token's ID and the request line.
			_, _ = bufio.NewReader(c).ReadString('\n')
			c.Write(a)
			c.Close()
		}
	}()
	for i := range answers {
		c, err := Dial(context.Background(), sock, []byte(testToken))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res, err := c.Exec(context.Background(), Request{Command: "exit 3", Timeout: 5 * time.Second}, &out, &out)
		if !errors.Is(err, ErrAuth) || out.Len() > 0 {
			t.Errorf("answer %d of the impostor: %+v, %v, output %q; want ErrAuth and nothing taken", i, res, err, out.String())
		}
	}
}

// TestSocketImpostorClosesFirst: an impostor that answers the challenge
// alone and closes before the request arrives (the request's write then
// fails) is still told apart from the agent: ErrAuth, nothing taken.
func TestSocketImpostorClosesFirst(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.ReadFull(c, make([]byte, nonceSize+tokenIDSize))
		out := frameHeader(frameStdout, 7)
		c.Write(append(append(make([]byte, 32), out[:]...), "forged\n"...))
		c.Close()
	}()
	c, err := Dial(context.Background(), sock, []byte(testToken))
	if err != nil {
		t.Fatal(err)
	}
	<-closed
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), Request{Command: "exit 3", Timeout: 5 * time.Second}, &out, &out)
	if !errors.Is(err, ErrAuth) || out.Len() > 0 {
		t.Fatalf("the impostor that closed first: %+v, %v, output %q; want ErrAuth and nothing taken", res, err, out.String())
	}
}

// TestSocketImpostorResets: an impostor that sends less than a proof and
// closes with the request unread resets the connection, so the client
// reads its bytes and then ECONNRESET. That is still an impostor (ErrAuth,
// which has the provider end the sandbox's processes), not an agent that
// was not listening (which would leave the impostor running). Found when a
// provider's attack test left the forger running once in CI.
func TestSocketImpostorResets(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.ReadFull(c, make([]byte, nonceSize+tokenIDSize))
		// Wait until the request is queued, unread, then answer short
		// and close.
		raw, _ := c.(*net.UnixConn).SyscallConn()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			queued := 0
			_ = raw.Control(func(fd uintptr) { queued, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
			if queued > 0 {
				break
			}
		}
		c.Write([]byte("forged"))
	}()
	c, err := Dial(context.Background(), sock, []byte(testToken))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), Request{Command: "exit 3", Timeout: 5 * time.Second}, &out, &out)
	if !errors.Is(err, ErrAuth) || out.Len() > 0 {
		t.Fatalf("the impostor that reset the connection: %+v, %v, output %q; want ErrAuth and nothing taken", res, err, out.String())
	}
}

// TestZipSkippingOlderAgent: an agent older than the zip request's "skip"
// refuses it as malformed; the client asks again without it (E4).
func TestZipSkippingOlderAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var archive bytes.Buffer
	zw := zip.NewWriter(&archive)
	zw.Create("workspace/")
	zw.Close()
	requests := make(chan string, 4)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(conn).ReadBytes('\n')
			requests <- strings.TrimSpace(string(line))
			// An older agent's readRequest refuses unknown fields.
			if _, err := readRequest(bufio.NewReader(bytes.NewReader(line))); err == nil && !bytes.Contains(line, []byte(`"skip"`)) {
				writeTestFrame(conn, frameData, archive.Bytes())
				writeTestFrame(conn, frameDone, nil)
			} else {
				writeTestFrame(conn, frameError, []byte(`malformed request: json: unknown field "skip"`))
			}
			conn.Close()
		}
	}()
	files := Files{Dial: func(ctx context.Context) (*Conn, error) { return Dial(ctx, sock, nil) }}
	var buf bytes.Buffer
	if err := files.ZipSkipping(context.Background(), "/workspace", &buf, []string{"uploads"}); err != nil {
		t.Fatalf("ZipSkipping with an older agent: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), archive.Bytes()) {
		t.Errorf("ZipSkipping wrote %d bytes, want the agent's archive of %d", buf.Len(), archive.Len())
	}
	first, second := <-requests, <-requests
	if !strings.Contains(first, `"skip":["uploads"]`) || strings.Contains(second, "skip") {
		t.Errorf("requests %s then %s; want one with skip, then one without", first, second)
	}
}

func writeTestFrame(w io.Writer, typ byte, p []byte) {
	h := frameHeader(typ, len(p))
	w.Write(append(h[:], p...))
}

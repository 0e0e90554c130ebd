package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// Server bounds.
const (
	// requestTimeout bounds reading the request line.
	requestTimeout = 10 * time.Second
	// drainTimeout is how long the command's output may still arrive once
	// its processes are dead; only a process the kill could not reach can
	// hold the pipes longer.
	drainTimeout = 2 * time.Second
	// answerTimeout bounds writing the last frame to a client that does
	// not read.
	answerTimeout = 5 * time.Second
	// spareThreads is how many idle OS threads the agent keeps (see
	// keepSpareThreads).
	spareThreads = 4
)

// defaultEnv is the environment of every command before Config.Env.
var defaultEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"TERM=dumb",
}

// Config configures Serve. Zero values have the defaults named.
type Config struct {
	// Socket is the path of the Unix socket to listen on; required. A
	// file left there by an earlier run is replaced.
	Socket string
	// Shell interprets commands. Default /bin/sh.
	Shell string
	// StateDir keeps the persistent shell's state. Default
	// sandbox.StateDir.
	StateDir string
	// WorkDir is where a new sandbox's commands start. Default
	// sandbox.WorkspaceDir.
	WorkDir string
	// Env is added to every command's environment over PATH, HOME=/root,
	// LANG=C.UTF-8 and TERM=dumb; in a container, the container's
	// environment.
	Env []string
	// Logger receives what the agent cannot tell a client. Default
	// slog.Default().
	Logger *slog.Logger
	// Cgroup is where the agent reads its cgroups' counters of OOM kills
	// and refused forks, to report them with each command. Default
	// /sys/fs/cgroup: in a container, the container's own groups.
	Cgroup string
	// Listen, when set, is a TCP address to serve on as well (":7070"),
	// for an engine that reaches the sandbox over a network. Every
	// connection to it proves it holds Token first (see Over TCP).
	Listen string
	// Token is the sandbox's secret, at least MinToken bytes; required
	// with Listen. When set, connections to Socket prove it too: the
	// sandbox can write the socket's directory, and a process of its own
	// listening there in the agent's place could answer for it (T3).
	Token []byte
}

// Serve runs the agent until ctx ends: it listens on cfg.Socket and runs
// one command per connection. When ctx ends it stops listening, kills
// every command still running with all its processes, and returns nil.
//
// Serve makes the process a child subreaper and reaps its orphans: it is
// meant to be the process's only user of child processes.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Socket == "" && cfg.Listen == "" {
		return errors.New("agent: no socket path or address to listen on")
	}
	if (cfg.Listen != "" || len(cfg.Token) > 0) && len(cfg.Token) < MinToken {
		return fmt.Errorf("agent: a token must be at least %d bytes (serving on TCP needs one)", MinToken)
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.StateDir == "" {
		cfg.StateDir = sandbox.StateDir
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = sandbox.WorkspaceDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Cgroup == "" {
		cfg.Cgroup = "/sys/fs/cgroup"
	}
	if err := watchChildren(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	var lns []net.Listener
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	if len(cfg.Token) > 0 {
		// Commands run as the agent's user: non-dumpable, its memory
		// and /proc/1/environ (where its token may have come from) are
		// out of their reach without CAP_SYS_PTRACE.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("agent: keep the token from commands: %w", err)
		}
	}
	if cfg.Socket != "" {
		if err := os.Remove(cfg.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("agent: replace the old socket: %w", err)
		}
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Socket, Net: "unix"})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		lns = append(lns, ln)
	}
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			closeAll()
			return fmt.Errorf("agent: %w", err)
		}
		lns = append(lns, ln)
	}
	go keepSpareThreads(spareThreads)
	// What the program's start allocated and left (the packages of the
	// whole engine binary initialise) goes back to the system: a machine
	// runs hundreds of idle agents.
	debug.FreeOSMemory()
	s := &server{cfg: cfg, env: commandEnv(cfg.Env), log: cfg.Logger}
	s.spare.changed.L = &s.spare.mu

	s.refillSpare()

	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		_, tcp := ln.(*net.TCPListener)
		go func() { errs <- s.accept(ctx, hctx, ln, tcp, &wg) }()
	}
	// The first listener to fail ends the agent: a sandbox whose engine
	// cannot reach it is of no use.
	serveErr := <-errs
	closeAll()
	for range len(lns) - 1 {
		if err := <-errs; serveErr == nil {
			serveErr = err
		}
	}
	cancel()
	wg.Wait()
	s.closeSpares()
	s.stopAllBackground()
	if err := killOrphans(); err != nil {
		s.log.Error("agent: processes survive the shutdown", "err", err)
	}
	return serveErr
}

// accept serves the connections of one listener until it is closed:
// nil when ctx ended, the error otherwise.
func (s *server) accept(ctx, hctx context.Context, ln net.Listener, tcp bool, wg *sync.WaitGroup) error {
	for {
		conn, err := ln.Accept()
		if err == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.handle(hctx, conn, tcp)
			}()
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("agent: accept: %w", err)
		}
		// Out of descriptors or memory: the running commands may free
		// some.
		s.log.Warn("agent: accept", "err", err)
		time.Sleep(50 * time.Millisecond)
	}
}

type server struct {
	cfg   Config
	env   []string
	log   *slog.Logger
	spare spares
	bg    backgroundTable
}

// commandEnv is defaultEnv with extra set over it.
func commandEnv(extra []string) []string {
	env := append([]string(nil), defaultEnv...)
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		replaced := false
		for i, old := range env {
			if strings.HasPrefix(old, k+"=") {
				env[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			env = append(env, kv)
		}
	}
	return env
}

// handle serves one connection: one request, its output, its end.
func (s *server) handle(ctx context.Context, conn net.Conn, tcp bool) {
	defer conn.Close()
	w := &frameWriter{c: conn}
	br := bufio.NewReaderSize(conn, 64<<10)
	_ = conn.SetReadDeadline(time.Now().Add(requestTimeout))
	switch {
	case tcp:
		if err := s.authenticate(conn, br); err != nil {
			s.log.Warn("agent: a connection failed authentication", "remote", conn.RemoteAddr().String(), "err", err)
			return
		}
	case len(s.cfg.Token) > 0:
		if err := s.prove(conn, br); err != nil {
			s.log.Debug("agent: a connection without the token", "err", err)
			return
		}
	}
	req, err := readRequest(br)
	if err != nil {
		w.finish(frameError, []byte(err.Error()))
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case req.Op == opDial:
		s.dial(ctx, req, conn, br, w)
		return
	case req.Op == opPTY:
		s.terminal(ctx, req, br, w)
		return
	case req.Op == opMetrics:
		if err := w.json(s.metrics()); err != nil {
			w.finish(frameError, fileErrorPayload(err))
			return
		}
		w.finish(frameDone, nil)
		return
	case isProcOp(req.Op):
		s.procOp(req, br, w)
		return
	case req.Op != "":
		s.fileOp(ctx, req, br, w)
		return
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var in *inputQueue
	if req.Stdin {
		in = newInputQueue()
		go s.readInput(br, in, cancel)
	} else {
		// Whatever arrives next, or the connection's end, cancels.
		go func() {
			_, _ = br.ReadByte()
			cancel()
		}()
	}
	res, err := s.run(ctx, req, in, w)
	if err != nil {
		w.finish(frameError, []byte(err.Error()))
	} else {
		w.finish(frameExit, exitPayload(res))
	}
	if in == nil {
		// The next command's shell starts once this one's answer is out,
		// not beside it.
		s.refillSpare()
	}
}

// readRequest reads and checks the request line.
func readRequest(br *bufio.Reader) (wireRequest, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxRequest {
			return wireRequest{}, fmt.Errorf("the request is over %d bytes", MaxRequest)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return wireRequest{}, fmt.Errorf("read the request: %w", err)
		}
	}
	var req wireRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return wireRequest{}, fmt.Errorf("malformed request: %w", err)
	}
	if dec.More() {
		return wireRequest{}, errors.New("malformed request: more than one JSON value")
	}
	if req.TimeoutMs < 0 {
		return wireRequest{}, errors.New("malformed request: negative timeoutMs")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return wireRequest{}, errors.New("malformed request: the command holds a NUL byte")
	}
	switch req.Op {
	case "":
	case opList, opStat, opRead, opWrite, opZip:
		if req.Command != "" || req.Stdin || req.TimeoutMs != 0 {
			return wireRequest{}, fmt.Errorf("malformed request: a %q operation with a command", req.Op)
		}
		if req.Max < 0 {
			return wireRequest{}, errors.New("malformed request: negative max")
		}
	case opProcStart:
		if req.Command == "" || req.Stdin || req.TimeoutMs != 0 {
			return wireRequest{}, errors.New("malformed request: proc_start takes a command alone")
		}
	case opProcList, opProcRead, opProcWrite, opProcStop:
		if req.Command != "" || req.Stdin || req.TimeoutMs != 0 {
			return wireRequest{}, fmt.Errorf("malformed request: a %q operation with a command", req.Op)
		}
		if req.Max < 0 || req.Offset < 0 {
			return wireRequest{}, errors.New("malformed request: negative max or offset")
		}
	case opPTY:
		if req.Command != "" || req.Stdin || req.TimeoutMs != 0 {
			return wireRequest{}, errors.New("malformed request: pty takes its size alone")
		}
		if req.Cols < 1 || req.Rows < 1 || req.Cols > MaxTerminalSize || req.Rows > MaxTerminalSize {
			return wireRequest{}, fmt.Errorf("malformed request: a terminal of %dx%d (each between 1 and %d)", req.Cols, req.Rows, MaxTerminalSize)
		}
	case opMetrics:
		if req.Command != "" || req.Stdin || req.TimeoutMs != 0 || req.Path != "" || req.Max != 0 || req.Proc != "" || req.Port != 0 {
			return wireRequest{}, errors.New("malformed request: metrics takes nothing else")
		}
	case opDial:
		if req.Command != "" || req.Stdin || req.TimeoutMs != 0 {
			return wireRequest{}, errors.New("malformed request: dial takes a port alone")
		}
		if err := sandbox.CheckPort(req.Port); err != nil {
			return wireRequest{}, fmt.Errorf("malformed request: %w", err)
		}
	default:
		return wireRequest{}, fmt.Errorf("malformed request: unknown operation %q", req.Op)
	}
	return req, nil
}

// readInput reads the client's frames for a command with standard input
// into in, and cancels the command at a cancel frame, an unknown one, a
// queue over its bound, or the connection's end.
func (s *server) readInput(r io.Reader, in *inputQueue, cancel context.CancelFunc) {
	defer cancel()
	defer in.end()
	buf := make([]byte, MaxFrame)
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			return
		}
		switch typ {
		case frameStdin:
			if !in.push(p) {
				s.log.Warn("agent: a command did not read its input; cancelled", "queued", MaxStdinQueue)
				return
			}
		case frameStdinEnd:
			in.end()
		default: // frameCancel, or a frame a client has no business sending
			return
		}
	}
}

// run runs one command and kills what it leaves, however it ends. With
// in, the command reads it as its standard input; without, it runs in the
// spare shell when there is one.
func (s *server) run(ctx context.Context, req wireRequest, in *inputQueue, w *frameWriter) (Result, error) {
	// Commands running at the same time share the counters: what one
	// hits is reported for the others too.
	before := readExhaustion(s.cfg.Cgroup)
	if in != nil {
		sh, err := s.startShell(req, in)
		if err != nil {
			return Result{}, fmt.Errorf("start the command: %w", err)
		}
		defer sh.release()
		return s.wait(ctx, req, sh, w, before), nil
	}
	if sh := s.takeSpare(); sh != nil {
		if sh.send(spareScriptFor(s.cfg.StateDir, s.cfg.WorkDir, req.Command)) {
			res := s.wait(ctx, req, sh, w, before)
			ran := !sh.ranNothing()
			sh.release()
			if ran {
				s.spare.mu.Lock()
				s.spare.failures = 0
				s.spare.mu.Unlock()
				return res, nil
			}
			// It died before its script began: the command did not run.
			s.countSpareDeath()
		} else {
			s.putBack(sh)
		}
	}
	sh, err := s.startShell(req, nil)
	if err != nil {
		return Result{}, fmt.Errorf("start the command: %w", err)
	}
	defer sh.release()
	return s.wait(ctx, req, sh, w, before), nil
}

// wait sends the output of the command running in sh to w until it ends,
// its timeout passes or ctx ends, then kills what is left of it.
func (s *server) wait(ctx context.Context, req wireRequest, sh *shellProc, w *frameWriter, before exhaustion) Result {
	cmd, exited, outR, errR := sh.cmd, sh.exited, sh.outR, sh.errR
	leader := cmd.Process.Pid

	var readers sync.WaitGroup
	for _, r := range []struct {
		f   *os.File
		typ byte
	}{{outR, frameStdout}, {errR, frameStderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			w.copyFrom(r.f, r.typ)
		}()
	}

	var timeout <-chan time.Time
	if req.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var res Result
	select {
	case <-exited:
	case <-timeout:
		res.TimedOut = true
	case <-ctx.Done():
		res.Cancelled = true
	}
	if err := killTree(inSession(leader)); err != nil {
		s.log.Error("agent: a command's processes survive its end", "pid", leader, "err", err)
	}
	<-exited
	// The shell is dead: Wait only reaps it.
	_ = cmd.Wait()
	if err := finishCommand(leader); err != nil {
		s.log.Error("agent: orphaned processes survive", "err", err)
	}
	res.ExitCode = exitCode(cmd.ProcessState)
	res.OOMKilled, res.PidsLimited = before.During(readExhaustion(s.cfg.Cgroup))

	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		// A process the kill could not reach holds the pipes.
		past := time.Unix(1, 0)
		_ = outR.SetReadDeadline(past)
		_ = errR.SetReadDeadline(past)
		select {
		case <-drained:
		case <-time.After(answerTimeout):
			// The client does not read what is left.
			w.abort()
			<-drained
		}
	}
	return res
}

// startShell starts a shell of the command's own: the spare shell's
// shape, with the persistent shell's script and arguments on its command
// line and, with in, its standard input fed from in.
func (s *server) startShell(req wireRequest, in *inputQueue) (*shellProc, error) {
	n := 2
	if in != nil {
		n = 3
	}
	p, err := pipes(n)
	if err != nil {
		return nil, err
	}
	outR, outW, errR, errW := p[0], p[1], p[2], p[3]
	var inR, inW *os.File
	if in != nil {
		inR, inW = p[4], p[5]
	}
	st := sandbox.ReadShellState(s.cfg.StateDir)
	argv := sandbox.ShellArgv(s.cfg.Shell, s.cfg.StateDir, s.cfg.WorkDir, req.Command, st)
	if in != nil {
		argv = sandbox.LongLivedArgv(s.cfg.Shell, s.cfg.StateDir, s.cfg.WorkDir, req.Command, st)
	}
	cmd := &exec.Cmd{
		Path:        argv[0],
		Args:        argv,
		Env:         s.env,
		Stdout:      outW, // *os.File: the child gets it, no copying goroutine
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if inR != nil {
		cmd.Stdin = inR
	}
	exited, err := startCommand(cmd)
	if err != nil {
		closeFiles(p)
		return nil, err
	}
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
		// Writes to a command that is gone fail (EPIPE), which ends the
		// feeding; so does the end of the input.
		go in.feed(inW)
	}
	return &shellProc{cmd: cmd, exited: exited, outR: outR, errR: errR}, nil
}

func exitCode(st *os.ProcessState) int {
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// keepSpareThreads makes the Go runtime start n OS threads and keep them
// idle. The runtime dies when it needs a new thread and cannot create one,
// which is the case while a fork bomb holds the sandbox's pids limit; the
// idle threads are reused instead.
func keepSpareThreads(n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A blocking system call: the runtime hands the goroutine's
			// processor to another thread meanwhile.
			ts := syscall.Timespec{Nsec: int64(20 * time.Millisecond)}
			_ = syscall.Nanosleep(&ts, nil)
		}()
	}
	wg.Wait()
}

package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/flowbox/flowbox/sandbox"
)

// hangupGrace is how long a terminal's processes have after SIGHUP
// before they are killed.
const hangupGrace = 2 * time.Second

// terminal serves a "pty" request (see Terminals): an interactive shell
// on a new pseudo-terminal until it exits or the client hangs up.
func (s *server) terminal(ctx context.Context, req wireRequest, br *bufio.Reader, w *frameWriter) {
	rc := sandbox.InteractiveRC(s.cfg.StateDir, s.cfg.WorkDir, sandbox.ReadShellState(s.cfg.StateDir))
	rcR, rcW, err := os.Pipe()
	if err != nil {
		w.finish(frameError, []byte("start the terminal: "+err.Error()))
		return
	}
	defer rcW.Close()
	ptmx, tty, err := pty.Open()
	if err != nil {
		rcR.Close()
		w.finish(frameError, []byte("start the terminal: "+err.Error()))
		return
	}
	defer ptmx.Close()
	_ = pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(req.Cols), Rows: uint16(req.Rows)})
	env := append(append([]string(nil), s.env...), "TERM=xterm-256color")
	argv := []string{s.cfg.Shell, "--noprofile", "--rcfile", "/dev/fd/3", "-i"}
	if filepath.Base(s.cfg.Shell) != "bash" {
		// A POSIX shell reads $ENV when it is interactive.
		argv = []string{s.cfg.Shell, "-i"}
		env = append(env, "ENV=/dev/fd/3")
	}
	cmd := &exec.Cmd{Path: s.cfg.Shell, Args: argv, Env: env, Stdin: tty, Stdout: tty, Stderr: tty,
		ExtraFiles:  []*os.File{rcR},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}}
	exited, err := startLeader(cmd, true)
	tty.Close()
	rcR.Close()
	if err != nil {
		w.finish(frameError, []byte("start the terminal: "+err.Error()))
		return
	}
	pid := cmd.Process.Pid
	go func() {
		_, _ = rcW.WriteString(rc)
		rcW.Close()
	}()
	_ = w.write(frameDone, nil)

	// Keystrokes and sizes; anything else, or the connection's end,
	// hangs up (unless the shell has ended: its pid may be reused once
	// it is reaped).
	go func() {
		buf := make([]byte, MaxFrame)
		for {
			typ, p, err := readFrame(br, buf)
			switch {
			case err != nil:
				select {
				case <-exited:
				default:
					s.hangupSoon(pid)
				}
				return
			case typ == frameStdin:
				if _, err := ptmx.Write(p); err != nil {
					return
				}
			case typ == frameResize && len(p) == 4:
				cols, rows := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
				if cols >= 1 && rows >= 1 && cols <= MaxTerminalSize && rows <= MaxTerminalSize {
					_ = pty.Setsize(ptmx, &pty.Winsize{Cols: cols, Rows: rows})
				}
			default:
				s.hangupSoon(pid)
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { s.hangupSoon(pid) })
	defer stop()
	out := &ptyOutput{f: ptmx}
	drained := make(chan struct{})
	go func() {
		w.copyFrom(out, frameStdout)
		close(drained)
	}()
	<-exited
	// What the shell left in its session ends with it.
	if err := killTree(inSession(pid)); err != nil {
		s.log.Error("agent: a terminal's processes survive it", "pid", pid, "err", err)
	}
	_ = cmd.Wait()
	if err := finishCommand(pid); err != nil {
		s.log.Error("agent: orphaned processes survive", "err", err)
	}
	out.end()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		// The page does not read what is left.
		s.log.Warn("agent: a terminal's output does not end; answering without it", "pid", pid)
	}
	w.finish(frameExit, exitPayload(Result{ExitCode: exitCode(cmd.ProcessState)}))
}

// ptyOutput reads a terminal's output. On Linux the read fails (EIO)
// once the last process holding the terminal's other side has closed
// it; under gVisor (runsc 2022-12) it blocks instead, whatever has
// closed. So once the shell has ended and its session is killed, when
// what is left to read is already queued, each read waits tailQuiet at
// most: the output ends as soon as it has been read.
type ptyOutput struct {
	f     *os.File
	ended atomic.Bool
}

// tailQuiet is how long an ended terminal's output may pause.
const tailQuiet = 100 * time.Millisecond

func (o *ptyOutput) Read(p []byte) (int, error) {
	if o.ended.Load() {
		_ = o.f.SetReadDeadline(time.Now().Add(tailQuiet))
	}
	return o.f.Read(p)
}

// end bounds the reads from now on, the one waiting now included.
func (o *ptyOutput) end() {
	o.ended.Store(true)
	_ = o.f.SetReadDeadline(time.Now().Add(tailQuiet))
}

// hangupSoon hangs a terminal up: SIGHUP to its session's processes (the
// shell saves its state and exits), SIGKILL to what is left after
// hangupGrace.
func (s *server) hangupSoon(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGHUP)
	time.AfterFunc(hangupGrace, func() { _ = killTree(inSession(pid)) })
}

package agent

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// Spare shells.
//
// Starting a shell costs a fork, an exec and the shell's own start: on a
// small machine that is several milliseconds, more than all the rest of a
// short command. So the agent keeps one shell started ahead of time. It
// runs nothing yet: it reads its script from a pipe on descriptor 3 and
// waits there. The next command without standard input takes it and
// writes the persistent shell's script (sandbox.ShellScript, its
// arguments set in a first line) down the pipe; another spare is started
// once that command has ended. The command sees what it would see in a
// shell of its own: the state is restored when the script arrives, not
// when the spare started; its shell leads a session of its own, runs with
// the same environment, and has descriptors 3 and 4 closed before the
// command runs.
//
// A spare can die before it runs its script (the OOM killer's choice, a
// command's `kill -9 -1`, a shell that cannot read /proc/self/fd). The
// script's first act is to write a byte to descriptor 4, a second pipe, so
// the agent can tell: when the shell has ended and that pipe is empty, the
// command never ran, and it runs in a shell of its own. After maxSpareFailures
// such deaths in a row the agent makes no more spares. A script longer
// than the pipe holds goes to a shell of its own too.

// spareScript is what a spare runs: it makes itself the OOM killer's first
// choice while it waits, then runs the script sent on descriptor 3.
const spareScript = `{ echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null
. /proc/self/fd/3
`

// IsSpareShell reports whether argv (a process's command line) is a
// spare shell's. Told apart by the command line, which a command could
// imitate: for tests and operators, not for decisions.
func IsSpareShell(argv []string) bool {
	return len(argv) == 4 && argv[1] == "-c" && argv[2] == spareScript && argv[3] == "flowbox-shell"
}

// maxSpareFailures is how many spares in a row may end unused before the
// agent stops making them.
const maxSpareFailures = 3

// shellProc is a command's shell: a spare one waiting for its script, or
// one started for its command.
type shellProc struct {
	cmd        *exec.Cmd
	exited     <-chan struct{}
	outR, errR *os.File // its standard output and error
	// A spare's pipes, the agent's ends: its script (the agent keeps a
	// read end, so a write never fails), and the one its script first
	// writes a byte to.
	scriptR, scriptW, startedR *os.File
}

// spares is the agent's spare shell, if any.
type spares struct {
	mu    sync.Mutex
	ready *shellProc
	// starting is true while a spare is being started; changed is
	// signalled when it ends.
	starting bool
	changed  sync.Cond
	failures int
	closed   bool
	wg       sync.WaitGroup
}

// takeSpare returns the spare shell, now the caller's, or nil when there
// is none. One being started is waited for: the wait is shorter than a
// start of another.
func (s *server) takeSpare() *shellProc {
	s.spare.mu.Lock()
	for s.spare.ready == nil && s.spare.starting {
		s.spare.changed.Wait()
	}
	sp := s.spare.ready
	s.spare.ready = nil
	if sp != nil {
		setSpare(sp.cmd.Process.Pid, false)
	}
	s.spare.mu.Unlock()
	if sp == nil {
		return nil
	}
	select {
	case <-sp.exited:
		s.spareDied(sp)
		return nil
	default:
	}
	return sp
}

// spareDied discards a spare that ended before it ran a command.
func (s *server) spareDied(sp *shellProc) {
	s.discard(sp)
	s.countSpareDeath()
}

// countSpareDeath counts a spare that ended before its script began.
func (s *server) countSpareDeath() {
	s.spare.mu.Lock()
	s.spare.failures++
	if s.spare.failures == maxSpareFailures {
		s.log.Warn("agent: spare shells keep dying unused; commands start their own shells from now on", "shell", s.cfg.Shell)
	}
	s.spare.mu.Unlock()
}

// putBack makes sp, untouched, the spare again, unless there is one.
func (s *server) putBack(sp *shellProc) {
	s.spare.mu.Lock()
	if s.spare.ready == nil && !s.spare.closed {
		s.spare.ready = sp
		setSpare(sp.cmd.Process.Pid, true)
		sp = nil
	}
	s.spare.mu.Unlock()
	if sp != nil {
		s.discard(sp)
	}
}

// refillSpare starts a spare shell in the background unless one is ready
// or being started.
func (s *server) refillSpare() {
	s.spare.mu.Lock()
	defer s.spare.mu.Unlock()
	if s.spare.closed || s.spare.ready != nil || s.spare.starting || s.spare.failures >= maxSpareFailures {
		return
	}
	s.spare.starting = true
	s.spare.wg.Go(func() {
		sp, err := s.startSpare()
		s.spare.mu.Lock()
		s.spare.starting = false
		keep := err == nil && !s.spare.closed
		if keep {
			s.spare.ready = sp
			setSpare(sp.cmd.Process.Pid, true)
		}
		s.spare.changed.Broadcast()
		s.spare.mu.Unlock()
		switch {
		case err != nil:
			s.log.Warn("agent: a spare shell did not start; commands start their own", "err", err)
		case !keep:
			s.discard(sp)
		}
	})
}

// closeSpares ends the spare shell and makes no more.
func (s *server) closeSpares() {
	s.spare.mu.Lock()
	s.spare.closed = true
	sp := s.spare.ready
	s.spare.ready = nil
	s.spare.mu.Unlock()
	s.spare.wg.Wait()
	if sp != nil {
		s.discard(sp)
	}
}

func (s *server) startSpare() (*shellProc, error) {
	p, err := pipes(4)
	if err != nil {
		return nil, fmt.Errorf("start a spare shell: %w", err)
	}
	scriptR, scriptW, startedR, startedW, outR, outW, errR, errW := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
	cmd := &exec.Cmd{
		Path:        s.cfg.Shell,
		Args:        []string{s.cfg.Shell, "-c", spareScript, "flowbox-shell"},
		Env:         s.env,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{scriptR, startedW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	exited, err := startCommand(cmd)
	if err != nil {
		closeFiles(p)
		return nil, fmt.Errorf("start a spare shell: %w", err)
	}
	outW.Close()
	errW.Close()
	startedW.Close()
	return &shellProc{cmd: cmd, exited: exited, outR: outR, errR: errR, scriptR: scriptR, scriptW: scriptW, startedR: startedR}, nil
}

// pipes makes n pipes, their read and write ends in turn; on failure it
// closes those it made.
func pipes(n int) ([]*os.File, error) {
	var files []*os.File
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(files)
			return nil, err
		}
		files = append(files, r, w)
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// spareScriptFor is the script a spare shell runs command with.
func spareScriptFor(stateDir, workDir, command string) string {
	var b strings.Builder
	b.WriteString("echo >&4; exec 3<&- 4>&-\nset --")
	st := sandbox.ReadShellState(stateDir)
	for _, a := range []string{stateDir, workDir, command, st.Prelude()} {
		b.WriteByte(' ')
		b.WriteString(sandbox.ShellQuote(a))
	}
	b.WriteByte('\n')
	b.WriteString(sandbox.ShellScript)
	return b.String()
}

// send gives the spare its script and closes the pipe behind it; false,
// writing nothing, when the script is longer than the pipe holds (the
// write must not wait for a shell that may be dead).
func (sp *shellProc) send(script string) bool {
	size, err := unix.FcntlInt(sp.scriptW.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || len(script) > size {
		return false
	}
	_, _ = sp.scriptW.WriteString(script)
	sp.scriptW.Close()
	return true
}

// ranNothing tells, once a spare has ended, whether it died before its
// script began: then its command never ran.
func (sp *shellProc) ranNothing() bool {
	if sp.startedR == nil {
		return false
	}
	// TIOCINQ is FIONREAD: the bytes a pipe holds.
	n, err := unix.IoctlGetInt(int(sp.startedR.Fd()), unix.TIOCINQ)
	return err == nil && n == 0
}

// release closes the agent's ends of the shell's pipes.
func (sp *shellProc) release() {
	for _, f := range []*os.File{sp.outR, sp.errR, sp.scriptR, sp.scriptW, sp.startedR} {
		if f != nil {
			f.Close()
		}
	}
}

// discard kills a shell that runs no command and reaps it.
func (s *server) discard(sp *shellProc) {
	sp.release()
	pid := sp.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-sp.exited
	_ = sp.cmd.Wait()
	if err := finishCommand(pid); err != nil {
		s.log.Error("agent: orphaned processes survive", "err", err)
	}
}

package agent

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Background processes (see Background processes in protocol.go).
//
// A background process leads a session of its own, as a command's shell
// does, and is registered as a leader, so the orphan sweep that ends each
// command leaves it and its descendants alone. When it exits, or is
// stopped, what is left of its session is killed, as after a command.
// The agent's end (the sandbox's stop) ends them all.

// backgroundTable is the agent's background processes.
type backgroundTable struct {
	mu    sync.Mutex
	procs []*background // oldest first
	next  int
}

// background is one background process.
type background struct {
	id      string
	command string
	started time.Time
	pid     int
	in      *inputQueue
	// done is closed once it has ended and been reaped.
	done chan struct{}

	mu       sync.Mutex
	out      outputRing
	ended    time.Time
	exitCode int
	stopped  bool
}

// outputRing keeps the last sandbox.ProcessOutputKept bytes of an output
// and counts all of it.
type outputRing struct {
	buf   []byte // at most ProcessOutputKept bytes, the newest last
	total int64
}

func (r *outputRing) write(p []byte) {
	r.total += int64(len(p))
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - sandbox.ProcessOutputKept; over > 0 {
		// Compact rather than grow without bound.
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
}

// read returns at most limit bytes from offset on: from the oldest byte
// kept when offset was dropped, nothing when it is at or past the end.
func (r *outputRing) read(offset int64, limit int) (int64, []byte) {
	first := r.total - int64(len(r.buf))
	offset = min(max(offset, first), r.total)
	from := int(offset - first)
	to := min(len(r.buf), from+limit)
	return offset, append([]byte(nil), r.buf[from:to]...)
}

// info is the process as the protocol sends it.
func (b *background) info() sandbox.Process {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := sandbox.Process{ID: b.id, Command: b.command, StartedAt: b.started, Output: b.out.total, Running: b.ended.IsZero(), Stopped: b.stopped}
	if !p.Running {
		code := b.exitCode
		p.ExitCode, p.EndedAt = &code, b.ended
	}
	return p
}

// find is the process named id, or nil.
func (t *backgroundTable) find(id string) *background {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.procs {
		if b.id == id {
			return b
		}
	}
	return nil
}

// list is every process kept, oldest first.
func (t *backgroundTable) list() []sandbox.Process {
	t.mu.Lock()
	procs := append([]*background(nil), t.procs...)
	t.mu.Unlock()
	out := make([]sandbox.Process, 0, len(procs))
	for _, b := range procs {
		out = append(out, b.info())
	}
	return out
}

// start starts command as a background process of s.
func (s *server) startBackground(command string) (sandbox.Process, error) {
	t := &s.bg
	t.mu.Lock()
	defer t.mu.Unlock()
	running := 0
	for _, b := range t.procs {
		if b.info().Running {
			running++
		}
	}
	if running >= sandbox.MaxProcesses {
		return sandbox.Process{}, fmt.Errorf("%w: %d run already, the most a sandbox may have; stop one first", sandbox.ErrTooManyProcesses, running)
	}
	p, err := pipes(2)
	if err != nil {
		return sandbox.Process{}, err
	}
	outR, outW, inR, inW := p[0], p[1], p[2], p[3]
	st := sandbox.ReadShellState(s.cfg.StateDir)
	argv := sandbox.LongLivedArgv(s.cfg.Shell, s.cfg.StateDir, s.cfg.WorkDir, command, st)
	cmd := &exec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    s.env,
		Stdin:  inR,
		Stdout: outW, // one stream, in the order written, as a terminal shows it
		Stderr: outW,
		// A session of its own: what it starts is found and killed
		// with it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	exited, err := startLeader(cmd, true)
	if err != nil {
		closeFiles(p)
		return sandbox.Process{}, err
	}
	outW.Close()
	inR.Close()
	t.next++
	b := &background{
		id: "p" + strconv.Itoa(t.next), command: command, started: time.Now().UTC(),
		pid: cmd.Process.Pid, in: newInputQueue(), done: make(chan struct{}),
	}
	go b.in.feed(inW)
	go b.collect(outR)
	go s.reap(b, cmd, exited, outR)
	t.procs = append(t.procs, b)
	// Forget the oldest ended ones past the bound.
	for i := 0; len(t.procs) > sandbox.KeptProcesses && i < len(t.procs); {
		if t.procs[i].info().Running {
			i++
			continue
		}
		t.procs = append(t.procs[:i], t.procs[i+1:]...)
	}
	return b.info(), nil
}

// collect keeps what the process writes.
func (b *background) collect(r *os.File) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b.mu.Lock()
			b.out.write(buf[:n])
			b.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// reap waits for the process to exit, kills what is left of its session
// and reaps it.
func (s *server) reap(b *background, cmd *exec.Cmd, exited <-chan struct{}, outR *os.File) {
	<-exited
	if err := killTree(inSession(b.pid)); err != nil {
		s.log.Error("agent: a background process's processes survive it", "pid", b.pid, "err", err)
	}
	_ = cmd.Wait()
	if err := finishCommand(b.pid); err != nil {
		s.log.Error("agent: orphaned processes survive", "err", err)
	}
	b.in.end()
	// What it wrote before it ended is still read; a process the kill
	// could not reach may hold the pipe, which is then let go.
	time.AfterFunc(drainTimeout, func() { _ = outR.SetReadDeadline(time.Unix(1, 0)) })
	b.mu.Lock()
	b.ended, b.exitCode = time.Now().UTC(), exitCode(cmd.ProcessState)
	b.mu.Unlock()
	close(b.done)
}

// stop kills the process and its session, and waits until it is reaped.
func (s *server) stopBackground(b *background) sandbox.Process {
	b.mu.Lock()
	running := b.ended.IsZero()
	if running {
		b.stopped = true
	}
	b.mu.Unlock()
	if running {
		if err := killTree(inSession(b.pid)); err != nil {
			s.log.Error("agent: stop a background process", "pid", b.pid, "err", err)
		}
		select {
		case <-b.done:
		case <-time.After(killTimeout):
		}
	}
	return b.info()
}

// stopAllBackground ends every background process, for the agent's end.
func (s *server) stopAllBackground() {
	s.bg.mu.Lock()
	procs := append([]*background(nil), s.bg.procs...)
	s.bg.mu.Unlock()
	for _, b := range procs {
		s.stopBackground(b)
	}
}

// maxProcRead bounds the output one proc_read sends.
const maxProcRead = 256 << 10

// procOp serves a background process operation.
func (s *server) procOp(req wireRequest, br io.Reader, w *frameWriter) {
	var b *background
	if req.Op != opProcStart && req.Op != opProcList {
		if b = s.bg.find(req.Proc); b == nil {
			w.finish(frameError, fileErrorPayload(fmt.Errorf("%w %q in this sandbox", sandbox.ErrNoProcess, req.Proc)))
			return
		}
	}
	var err error
	switch req.Op {
	case opProcStart:
		var p sandbox.Process
		if p, err = s.startBackground(req.Command); err == nil {
			err = w.json(p)
		}
	case opProcList:
		err = w.json(s.bg.list())
	case opProcRead:
		max := maxProcRead
		if req.Max > 0 && req.Max < int64(max) {
			max = int(req.Max)
		}
		b.mu.Lock()
		offset, data := b.out.read(req.Offset, max)
		b.mu.Unlock()
		err = w.json(sandbox.ProcessOutput{Process: b.info(), Offset: offset, Data: data})
	case opProcWrite:
		var data []byte
		if data, err = readFrames(br, MaxStdinQueue); err == nil {
			if !b.info().Running {
				err = fmt.Errorf("%w: %s takes no more input", sandbox.ErrProcessEnded, b.id)
			} else if len(data) > 0 && !b.in.push(data) {
				err = fmt.Errorf("%w: the process has not read %d bytes of its input yet", sandbox.ErrTooLarge, MaxStdinQueue)
			} else if req.End {
				b.in.end()
			}
		}
	case opProcStop:
		err = w.json(s.stopBackground(b))
	}
	if err != nil {
		w.finish(frameError, fileErrorPayload(err))
		return
	}
	w.finish(frameDone, nil)
}

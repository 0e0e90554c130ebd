package agent

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// How a command's processes are found and killed.
//
// A command's shell leads a session of its own. The processes it leaves
// are those in that session, and the descendants of any of them, which
// covers a child that called setsid while its parent lives. They are
// stopped (SIGSTOP) round after round until a round finds no new one and
// every one found is stopped: a stopped process can neither fork nor
// exit, so none slips away while the set is built. Then all are killed,
// and the search is repeated until nothing is left.
//
// The agent is a child subreaper: what a command's processes orphan
// becomes the agent's child, not init's. A process that both left the
// session and lost its parent (a daemon that forks twice and calls setsid)
// is such an orphan; whenever no command runs, every descendant of the
// agent is one, and they are killed then. With commands running at once,
// such a process therefore lives until the last of them ends.
//
// A background process (background_linux.go) is a leader as a command's
// shell is, but is not a running command: it and its descendants are no
// orphans, and survive the commands' ends; what it orphans is swept at
// the next command's end like any orphan.
//
// The shell of a finished command is reaped only after the kill: until
// then its PID, and so its session ID, cannot be reused.

const (
	// killTimeout bounds one kill; processes in uninterruptible sleep may
	// take a while to die.
	killTimeout = 10 * time.Second
	// settleTimeout is how long a round waits for its stopped processes
	// to report stopped before killing them anyway.
	settleTimeout = 100 * time.Millisecond
)

// proc is what the kill needs of /proc/<pid>/stat.
type proc struct {
	pid, ppid, sid int
	state          byte
}

func (p proc) dead() bool    { return p.state == 'Z' || p.state == 'X' || p.state == 'x' }
func (p proc) stopped() bool { return p.state == 'T' || p.state == 't' || p.dead() }

// readStat reads /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int, buf *[256]byte) (p proc, ok bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return proc{}, false
	}
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return proc{}, false
	}
	// "pid (comm) state ppid pgrp session ...": comm may hold anything,
	// but the fields after it are numbers.
	line := buf[:n]
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(line[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	sid, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, sid: sid, state: f[0][0]}, true
}

// scan lists every process this agent can see.
func scan() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var buf [256]byte
	procs := make([]proc, 0, len(names)/2)
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid, &buf); ok {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// killTree stops, then kills, every live process that seed selects and
// every descendant of those, never the agent itself, and returns once none
// is left alive (zombies are dead).
func killTree(seed func(proc) bool) error {
	self := os.Getpid()
	marked := map[int]bool{}
	deadline := time.Now().Add(killTimeout)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		settle := time.Now().Add(settleTimeout)
		for {
			procs, err := scan()
			if err != nil {
				return err
			}
			found, unstopped := false, false
			for _, p := range procs {
				switch {
				case p.pid == self:
				case marked[p.pid]:
					unstopped = unstopped || !p.stopped()
				case p.dead():
				case seed(p) || marked[p.ppid]:
					_ = unix.Kill(p.pid, unix.SIGSTOP)
					marked[p.pid] = true
					found = true
				}
			}
			if !found && (!unstopped || time.Now().After(settle)) {
				break
			}
			if !found {
				time.Sleep(50 * time.Microsecond)
			}
		}
		if len(marked) == 0 {
			return nil
		}
		for pid := range marked {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		procs, err := scan()
		if err != nil {
			return err
		}
		alive := 0
		for _, p := range procs {
			if p.pid != self && !p.dead() && (marked[p.pid] || marked[p.ppid] || seed(p)) {
				alive++
			}
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still alive %s after the kill", alive, killTimeout)
		}
		time.Sleep(wait)
	}
}

// inSession selects the processes of the session led by leader.
func inSession(leader int) func(proc) bool {
	return func(p proc) bool { return p.sid == leader }
}

// children tracks the agent's child processes. It is process-wide, like
// the facts it tracks: a process has one set of children, and being a
// subreaper is a property of the process.
var children struct {
	sync.Mutex
	// leaders maps each running command's shell to a channel closed once
	// the shell has exited (it stays a zombie until its command reaps it).
	leaders map[int]chan struct{}
	// spares are the leaders that are spare shells waiting for a command
	// (see spare_linux.go): they count as no running command.
	spares map[int]bool
	// background are the leaders that are background processes (see
	// background_linux.go): they count as no running command either, so
	// that a command's end still kills the orphans it left.
	background map[int]bool
	// started wakes the watcher when a command starts.
	started chan struct{}
	once    sync.Once
	err     error
}

// pollInterval is how often the shells of running commands are looked at
// besides on SIGCHLD: on older kernels the signal can arrive a moment
// before /proc shows the process as a zombie.
const pollInterval = 100 * time.Millisecond

// watchChildren makes the process a child subreaper and starts watching
// for exited shells.
func watchChildren() error {
	children.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			children.err = fmt.Errorf("become a child subreaper: %w", err)
			return
		}
		children.leaders = map[int]chan struct{}{}
		children.spares = map[int]bool{}
		children.background = map[int]bool{}
		children.started = make(chan struct{}, 1)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGCHLD)
		go watch(sig)
	})
	return children.err
}

// watch looks at the shells of running commands on every SIGCHLD, and
// every pollInterval while there are any.
func watch(sig <-chan os.Signal) {
	tick := time.NewTicker(pollInterval)
	tick.Stop()
	for {
		select {
		case <-sig:
		case <-tick.C:
		case <-children.started:
		}
		children.Lock()
		pollLeaders()
		if len(children.leaders)-len(children.spares) > 0 {
			tick.Reset(pollInterval)
		} else {
			tick.Stop()
		}
		children.Unlock()
	}
}

// pollLeaders closes the channel of every shell that has exited. The
// caller holds children's lock.
func pollLeaders() {
	var buf [256]byte
	for pid, ch := range children.leaders {
		select {
		case <-ch:
			continue
		default:
		}
		// Unreaped, the PID cannot have been reused.
		if p, ok := readStat(pid, &buf); !ok || p.dead() {
			close(ch)
		}
	}
}

// runningCommands is the number of commands running. The caller holds children's
// lock.
func runningCommands() int {
	return len(children.leaders) - len(children.spares) - len(children.background)
}

// startCommand starts cmd and registers its process as a command's shell.
// The returned channel is closed once the shell has exited; the caller
// then kills what is left, reaps the shell with cmd.Wait and calls
// finishCommand.
func startCommand(cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	return startLeader(cmd, false)
}

// startLeader starts cmd as a command's shell or, with background, as a
// background process's.
func startLeader(cmd *exec.Cmd, background bool) (exited <-chan struct{}, err error) {
	children.Lock()
	defer children.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	children.leaders[cmd.Process.Pid] = ch
	if background {
		children.background[cmd.Process.Pid] = true
	}
	// It may have exited before it was registered.
	pollLeaders()
	select {
	case children.started <- struct{}{}:
	default:
	}
	return ch, nil
}

// finishCommand forgets a reaped shell, reaps the agent's orphaned
// zombies and, when no command runs any more, kills every process left
// below the agent.
func finishCommand(pid int) error {
	children.Lock()
	defer children.Unlock()
	delete(children.leaders, pid)
	delete(children.spares, pid)
	delete(children.background, pid)
	return tidyChildren(runningCommands() == 0)
}

// setSpare marks the shell pid as a spare (see spare_linux.go), which
// counts as no running command, or as a command's shell again.
func setSpare(pid int, spare bool) {
	children.Lock()
	defer children.Unlock()
	if spare {
		children.spares[pid] = true
		return
	}
	delete(children.spares, pid)
	select {
	case children.started <- struct{}{}:
	default:
	}
}

// tidyChildren reaps the agent's zombie children that are not shells of
// running commands and, with kill, kills the live ones and their
// descendants. The caller holds children's lock, so no command starts
// meanwhile.
func tidyChildren(kill bool) error {
	self := os.Getpid()
	orphan := func(p proc) bool {
		_, leader := children.leaders[p.pid]
		return p.ppid == self && !leader
	}
	procs, err := scan()
	if err != nil {
		return err
	}
	live := false
	for _, p := range procs {
		if orphan(p) && !p.dead() {
			live = true
		}
	}
	if live && kill {
		if err := killTree(orphan); err != nil {
			return fmt.Errorf("kill orphaned processes: %w", err)
		}
		if procs, err = scan(); err != nil {
			return err
		}
	}
	for _, p := range procs {
		if orphan(p) && p.dead() {
			_, _ = unix.Wait4(p.pid, nil, unix.WNOHANG, nil)
		}
	}
	return nil
}

// killOrphans kills what is left below the agent once its commands have
// ended, for its shutdown.
func killOrphans() error {
	children.Lock()
	defer children.Unlock()
	return tidyChildren(true)
}

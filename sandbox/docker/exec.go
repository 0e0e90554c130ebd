package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
)

// How a command run as a Docker exec is killed (the agent kills its
// commands itself: sandbox/agent). Closing the exec's stream does not end
// the command, and the engine may not see the daemon's PIDs, so the kill
// happens inside the container, from a second exec:
//
//  1. Every command starts under launcher, which writes its PID to a file
//     under sandbox.StateDir, then execs the persistent shell (same PID).
//     runc makes each exec process a session and process-group leader, so
//     the command's processes share its session unless they leave it.
//  2. At the timeout, killScript stops (SIGSTOP) every process in that
//     session or process group and every descendant of a stopped process,
//     round after round until a round finds nothing new, then SIGKILLs
//     them all. Stopped processes can neither fork nor exit, so children
//     cannot slip away by being reparented while the set is built, and a
//     process that called setsid is still caught through its parent.
//  3. When that cannot be done (the command removed its PID file, the
//     kill exec fails), the whole container is killed; the next Ensure
//     starts it again with its files.
//
// killScript uses shell builtins only: a fork bomb that has used up the
// pids limit cannot stop it. runc creates the exec's process outside the
// container's cgroup and moves it in, which the pids limit allows. It
// exits 3 when the PID file is missing or invalid.
//
// What escapes: a process that both left the session and lost its parent
// before the timeout (a daemon that double-forks and calls setsid); it is
// then a child of the container's init, like the background processes of
// earlier commands, and runs until the sandbox stops.
const (
	launcher   = `echo $$ >"$0" 2>/dev/null; exec "$@"`
	killScript = `read -r leader 2>/dev/null <"$1" || exit 3
case $leader in '' | *[!0-9]* | 1) exit 3 ;; esac
marked=' '
while :; do
	found=
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		case $pid in 1 | $$) continue ;; esac
		case $marked in *" $pid "*) continue ;; esac
		stat=
		read -r stat 2>/dev/null <"$d/stat" || continue
		set -f
		set -- ${stat##*") "}
		set +f
		# $2 parent, $3 process group, $4 session
		case "$pid $3 $4" in
		"$leader "* | *" $leader "* | *" $leader") ;;
		*) case $marked in *" $2 "*) ;; *) continue ;; esac ;;
		esac
		kill -STOP "$pid" 2>/dev/null
		marked="$marked$pid "
		found=1
	done
	[ -n "$found" ] || break
done
for pid in $marked; do kill -KILL "$pid" 2>/dev/null; done
exit 0
`
)

const (
	// killTimeout bounds the kill exec.
	killTimeout = 15 * time.Second
	// drainTimeout is how long output may still arrive after the kill.
	// The daemon itself closes an exec's stream at most 2 s after the
	// process ended, even when an escaped process holds the pipe.
	drainTimeout = 5 * time.Second
)

// Exec implements sandbox.Provider. The command runs through the
// persistent shell, by the container's agent when it has one, else as a
// Docker exec; output is streamed to req.OnOutput and capped in the
// result. At req.Timeout, or when ctx ends, the command and every process
// it started are killed; a timeout is a result (TimedOut, exit 124), an
// ended ctx an error. Through the agent, processes a command leaves
// behind are killed when it ends, too.
func (p *Provider) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := checkID(id); err != nil {
		return sandbox.ExecResult{}, err
	}
	if p.agent != "" {
		if p.adoptedAway(id) {
			// Its agent's socket, through the link, is another sandbox's.
			return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		if res, handled, err := p.execAgent(ctx, id, req); handled {
			return res, err
		}
	}
	if req.LongLived() {
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %s: %w: its container runs no agent (created before it, or its agent does not answer)", id, sandbox.ErrNoStdin)
	}
	return p.execDocker(ctx, id, req)
}

// execDocker runs a command as a Docker exec.
func (p *Provider) execDocker(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	started := time.Now()
	pidName := "exec-" + newToken() + ".pid"
	pidFile := sandbox.StateDir + "/" + pidName
	argv := append([]string{p.cfg.Shell, "-c", launcher, pidFile},
		sandbox.ShellArgv(p.cfg.Shell, sandbox.StateDir, sandbox.WorkspaceDir, req.Command, sandbox.ReadShellState(p.stateDir(id)))...)

	ex, err := p.cli.ExecCreate(ctx, ContainerName(id), client.ExecCreateOptions{
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return sandbox.ExecResult{}, p.execErr(id, err)
	}
	defer p.removePIDFile(id, pidName)
	// Attaching starts the command. It is not cut short by ctx, which
	// could leave the command started and unkilled; an ended ctx is
	// handled below like a timeout.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	att, err := p.cli.ExecAttach(actx, ex.ID, client.ExecAttachOptions{})
	cancel()
	if err != nil {
		return sandbox.ExecResult{}, p.execErr(id, err)
	}
	defer att.Close()

	col := sandbox.NewCollector(0, req.OnOutput)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(col.Stdout(), col.Stderr(), att.Reader)
		copied <- err
	}()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var (
		timedOut bool
		ctxErr   error
		copyErr  error
	)
	select {
	case copyErr = <-copied:
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}

	if timedOut || ctxErr != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		p.kill(kctx, id, pidFile)
		cancel()
		select {
		case <-copied:
		case <-time.After(drainTimeout):
			att.Close()
			<-copied // OnOutput is never called after Exec returns
		}
		res := col.Result(-1, timedOut, req.Timeout, time.Since(started))
		if ctxErr != nil {
			return res, fmt.Errorf("exec in sandbox %s: %w", id, ctxErr)
		}
		return res, nil
	}
	if copyErr != nil {
		return sandbox.ExecResult{}, p.execErr(id, fmt.Errorf("read the command's output: %w", copyErr))
	}

	code, err := p.exitCode(ctx, ex.ID)
	if err != nil {
		return sandbox.ExecResult{}, p.execErr(id, err)
	}
	return col.Result(code, false, req.Timeout, time.Since(started)), nil
}

// exitCode reads the exit code of a finished exec. The daemon records it
// before it closes the stream, so the first inspect nearly always has it.
func (p *Provider) exitCode(ctx context.Context, execID string) (int, error) {
	for wait := time.Millisecond; ; wait *= 2 {
		res, err := p.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("inspect the command: %w", err)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		if wait > time.Second {
			return 0, errors.New("inspect the command: the daemon still reports it running after its output ended")
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// kill kills the command whose launcher wrote pidFile, with all its
// processes (see killScript). If that cannot be done from inside, the
// container is killed: nothing may keep running behind a timed-out
// command, and the next Ensure starts the sandbox again with its files.
func (p *Provider) kill(ctx context.Context, id, pidFile string) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = p.runKillScript(ctx, id, pidFile)
		if !errors.Is(err, errNoPIDFile) {
			break
		}
		// The command may not have started yet: give the launcher time
		// to write its PID file.
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil {
		return
	}
	p.log.Error("cannot kill a timed-out command inside its sandbox; killing the sandbox's container", "sandbox", id, "err", err)
	if _, kerr := p.cli.ContainerKill(ctx, ContainerName(id), client.ContainerKillOptions{Signal: "KILL"}); kerr != nil && !cerrdefs.IsNotFound(kerr) && !cerrdefs.IsConflict(kerr) {
		p.log.Error("cannot kill the sandbox's container", "sandbox", id, "err", kerr)
	}
}

func (p *Provider) runKillScript(ctx context.Context, id, pidFile string) error {
	ex, err := p.cli.ExecCreate(ctx, ContainerName(id), client.ExecCreateOptions{
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{p.cfg.Shell, "-c", killScript, "flowbox-kill", pidFile},
	})
	if err != nil {
		return fmt.Errorf("create the kill exec: %w", err)
	}
	att, err := p.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("start the kill exec: %w", err)
	}
	defer att.Close()
	var out limitedBuffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		return fmt.Errorf("run the kill exec: %w", err)
	}
	code, err := p.exitCode(ctx, ex.ID)
	if err != nil {
		return err
	}
	switch code {
	case 0:
		return nil
	case 3:
		return errNoPIDFile
	}
	return fmt.Errorf("the kill exec exited with %d: %s", code, out.b)
}

var errNoPIDFile = errors.New("the command's PID file is missing or invalid")

// removePIDFile removes the launcher's PID file through the host view of
// the state directory. os.Root keeps the removal inside that directory
// whatever links the sandbox planted.
func (p *Provider) removePIDFile(id, name string) {
	root, err := os.OpenRoot(p.stateDir(id))
	if err != nil {
		return
	}
	defer root.Close()
	if err := root.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Debug("cannot remove an exec's pid file", "sandbox", id, "err", err)
	}
}

// execErr wraps an error that kept a command from running at all.
func (p *Provider) execErr(id string, err error) error {
	if cerrdefs.IsConflict(err) {
		// Stopped or paused: Ensure must run first.
		return fmt.Errorf("exec in sandbox %s: %w: %w", id, sandbox.ErrNotRunning, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("exec in sandbox %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	return p.apiErr("exec in sandbox "+id, err)
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

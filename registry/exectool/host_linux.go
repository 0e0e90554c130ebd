package exectool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// HostPATH is the PATH of host programs, and where a program named
// without a slash is looked for.
const HostPATH = "/usr/local/bin:/usr/bin:/bin"

// drainGrace bounds the wait for the program's pipes to close once its
// process group is gone: a process that left the group (setsid) may
// hold them open for as long as it likes.
const drainGrace = 2 * time.Second

// HostExecutor runs programs on the engine's machine with the engine's
// privileges, each in its own process group, in a fresh directory that
// is its HOME and TMPDIR and is removed afterwards, with only PATH,
// HOME, TMPDIR and LANG in its environment. When the program ends, times
// out or ctx ends, its whole group is killed. A process that leaves the
// group (setsid) escapes that kill: host tools are the operator's own
// programs, trusted as such.
type HostExecutor struct{}

// Execute runs the program.
func (HostExecutor) Execute(ctx context.Context, inv Invocation) (Result, error) {
	start := time.Now()
	if len(inv.Argv) == 0 {
		return Result{}, errors.New("run a program on the host: no program given")
	}
	prog, problem := lookPath(inv.Argv[0])
	if problem != "" {
		return notRun(127, problem, time.Since(start)), nil
	}
	timeout := sandbox.ClampTimeout(inv.Timeout)
	dir, err := os.MkdirTemp("", "flowbox-exectool-")
	if err != nil {
		return Result{}, fmt.Errorf("run %s on the host: create its working directory: %w", prog, err)
	}
	defer removeTree(dir)

	p, err := newPipes()
	if err != nil {
		return Result{}, fmt.Errorf("run %s on the host: %w", prog, err)
	}
	defer p.closeOurs()
	cmd := &exec.Cmd{
		Path: prog, Args: inv.Argv, Dir: dir,
		Env:   []string{"PATH=" + HostPATH, "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8"},
		Stdin: p.inR, Stdout: p.outW, Stderr: p.errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	startErr := cmd.Start()
	p.closeTheirs() // the child holds its own copies
	if startErr != nil {
		return notRun(126, fmt.Sprintf("cannot start program %s: %v", prog, startErr), time.Since(start)), nil
	}
	pid := cmd.Process.Pid

	// Output is read while the input is written: a program that writes
	// much before it reads would otherwise wait on us while we wait on it.
	col := sandbox.NewCollector(sandbox.DefaultOutputLimit, inv.OnOutput)
	var pipes sync.WaitGroup
	pipes.Go(func() { _, _ = io.Copy(col.Stdout(), p.outR) })
	pipes.Go(func() { _, _ = io.Copy(col.Stderr(), p.errR) })
	pipes.Go(func() {
		// A program may exit without reading its input: EPIPE is fine.
		_, _ = p.inW.Write(inv.Input)
		_ = p.inW.Close()
	})

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		waitExited(pid)
	}()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := false
	select {
	case <-exited:
	case <-tctx.Done():
		killGroup(pid)
		<-exited
		timedOut = ctx.Err() == nil
	}
	// The program has exited but is not reaped yet, so its process group
	// cannot have been reused: whatever it left running ends with it.
	killGroup(pid)
	_ = cmd.Wait()

	drained := make(chan struct{})
	go func() {
		pipes.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		p.closeOurs() // unblocks the copies and the input writer
		<-drained
	}
	d := time.Since(start)
	res := fromExec(col.Result(exitCode(cmd.ProcessState), timedOut, timeout, d))
	if !timedOut && ctx.Err() != nil {
		res.IsError = true
		res.Output = fmt.Sprintf("the call was cancelled (%v); the program was killed", ctx.Err())
		return res, fmt.Errorf("run %s on the host: %w", prog, ctx.Err())
	}
	return res, nil
}

// lookPath finds a program the way the program's own PATH would, never
// the engine's. problem says, for the model and the operator, why it
// cannot run.
func lookPath(name string) (path, problem string) {
	if strings.Contains(name, "/") {
		return checkProgram(name)
	}
	for _, dir := range filepath.SplitList(HostPATH) {
		if p, problem := checkProgram(filepath.Join(dir, name)); problem == "" {
			return p, ""
		}
	}
	return "", fmt.Sprintf("program not found: %s (looked in %s; the operator must install it or declare its absolute path)", name, HostPATH)
}

func checkProgram(path string) (string, string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Sprintf("program not found: %s", path)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Sprintf("program not executable: %s", path)
	}
	return path, ""
}

// waitExited returns when the process has exited, without reaping it.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// exitCode is the program's exit status, or 128+signal as shells report
// a killed one.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// pipes are the program's standard streams: the child's ends (Theirs)
// and ours.
type pipes struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newPipes() (*pipes, error) {
	var p pipes
	var err error
	var errs []error
	if p.inR, p.inW, err = os.Pipe(); err != nil {
		errs = append(errs, err)
	} else if p.outR, p.outW, err = os.Pipe(); err != nil {
		errs = append(errs, err)
	} else if p.errR, p.errW, err = os.Pipe(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		p.closeTheirs()
		p.closeOurs()
		return nil, fmt.Errorf("create pipes: %w", errors.Join(errs...))
	}
	return &p, nil
}

func (p *pipes) closeTheirs() { closeAll(p.inR, p.outW, p.errW) }
func (p *pipes) closeOurs()   { closeAll(p.inW, p.outR, p.errR) }

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close() // closing twice only reports os.ErrClosed
		}
	}
}

// removeTree removes a call's working directory, whatever permissions
// the program left on what it created there.
func removeTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		slog.Warn("exec tool: working directory left behind", "dir", dir, "err", err)
	}
}

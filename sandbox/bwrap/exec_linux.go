package bwrap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/seccomp"
)

// statusEvent is one JSON document bwrap writes to --json-status-fd.
type statusEvent struct {
	ChildPid *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// Exec runs one command in a fresh bwrap inside the sandbox's cgroups.
func (p *Provider) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := checkID(id); err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := p.probe(); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: %w", sandbox.ErrUnavailable, err)
	}
	switch st, err := p.Status(ctx, id); {
	case err != nil:
		return sandbox.ExecResult{}, err
	case st == sandbox.StatusMissing:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", id, sandbox.ErrNotFound)
	case st == sandbox.StatusStopped:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", id, sandbox.ErrNotRunning)
	}
	m, err := p.readMeta(id)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: read meta: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	timeout := req.Timeout
	switch {
	case req.LongLived():
		timeout = 0 // none
	case timeout <= 0:
		timeout = 30 * time.Second
	}
	if err := p.leaveHostNetwork(id, m); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	if p.usesAgent() {
		if res, handled, err := p.execAgent(ctx, id, m, req, timeout); handled {
			return res, err
		}
		defer p.startInBackground(id, m)
	}
	// The namespace's start stages the sandbox itself.
	if err := checkSources(m.Mounts); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	if err := p.stage(id, m); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}

	// fd 3: bwrap reports the sandbox's init PID, then the exit code.
	// fd 4: bwrap's init waits for a byte on it before it starts the
	// command; meanwhile the engine moves bwrap and its init into the
	// sandbox's cgroups, so everything the command forks is inside them.
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
	}
	defer statusR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
	}
	defer blockW.Close()

	tctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		tctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	if m.proxied() {
		// The bind needs the directory; without the proxy's socket in it
		// the forwarder answers 502.
		if err := os.MkdirAll(p.egressDir(id), 0o755); err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
		}
	}
	argv, err := p.argv(id, m, req)
	var files []*os.File
	if err == nil {
		argv, files, err = bwrapFiles(argv)
	}
	if err != nil {
		statusW.Close()
		blockR.Close()
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: %w", sandbox.ErrUnavailable, err)
	}
	defer closeAll(files)
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = append([]*os.File{statusW, blockR}, files...)
	cmd.SysProcAttr = p.procAttr(&syscall.SysProcAttr{Setpgid: true}, id, m)
	// Killing bwrap kills the sandboxed command (--die-with-parent), and with
	// it the PID namespace and every process in it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	col := sandbox.NewCollector(0, req.OnOutput)
	var stderrBuf tailBuffer
	cmd.Stdout = col.Stdout()
	cmd.Stderr = io.MultiWriter(col.Stderr(), &stderrBuf)
	if req.LongLived() {
		// bwrap passes its standard input to the command: a pipe fed
		// from Stdin, which Wait does not wait for (a Read of Stdin may
		// block until the caller closes it).
		inR, inW, err := os.Pipe()
		if err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
		}
		defer inW.Close()
		cmd.Stdin = inR
		defer inR.Close()
		go func() {
			_, _ = io.Copy(inW, req.Stdin)
			inW.Close()
		}()
	}

	// The sandbox's counters of exhaustion, read around the command: with
	// other commands running in the sandbox meanwhile, what they hit is
	// reported for this one too.
	before := p.cg.exhaustion(id)
	result := func(exitCode int, timedOut bool, duration time.Duration) sandbox.ExecResult {
		res := col.Result(exitCode, timedOut, timeout, duration)
		res.OOMKilled, res.PidsLimited = before.During(p.cg.exhaustion(id))
		return res
	}
	start := time.Now()
	err = cmd.Start()
	statusW.Close()
	blockR.Close()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: start: %w: %w", sandbox.ErrUnavailable, err)
	}
	events := make(chan statusEvent, 4)
	go func() {
		defer close(events)
		dec := json.NewDecoder(bufio.NewReader(statusR))
		for {
			var ev statusEvent
			if dec.Decode(&ev) != nil {
				return
			}
			events <- ev
		}
	}()
	started, exitCode := false, -1
	var joinErr error
	for ev := range events {
		if ev.ChildPid != nil {
			started = true
			if joinErr = p.cg.join(p.ctls, id, cmd.Process.Pid, *ev.ChildPid); joinErr != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_, joinErr = blockW.Write([]byte{1})
			}
			blockW.Close()
			break
		}
	}
	waitErr := cmd.Wait()
	duration := time.Since(start)
	for ev := range events {
		if ev.ExitCode != nil {
			exitCode = *ev.ExitCode
		}
	}
	timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", ctx.Err())
	case joinErr != nil:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: put the command in the sandbox's cgroups: %w", sandbox.ErrUnavailable, joinErr)
	case timedOut:
		return result(-1, true, duration), nil
	case !started:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: bwrap failed before the command started (%v): %s",
			sandbox.ErrUnavailable, waitErr, strings.TrimSpace(stderrBuf.String()))
	}
	if exitCode < 0 && cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	return result(exitCode, false, duration), nil
}

// bwrapFiles are bwrap's descriptors 5 and 6: the seccomp filter
// (--seccomp 5) and its options up to "--" (--args 6), each a pipe holding
// it whole. The options travel there rather than on the command line so
// that the sandbox's PID 1, bwrap's init, shows no host path in
// /proc/1/cmdline; the program after "--" stays on it.
func bwrapFiles(argv []string) (cmdArgv []string, files []*os.File, err error) {
	prog, err := seccomp.Program()
	if err != nil {
		return nil, nil, err
	}
	end := slices.Index(argv, "--")
	if end < 0 {
		end = len(argv)
	}
	var opts []byte
	for _, a := range argv[1:end] {
		opts = append(append(opts, a...), 0)
	}
	for _, data := range [][]byte{prog, opts} {
		f, err := pipeHolding(data)
		if err != nil {
			closeAll(files)
			return nil, nil, err
		}
		files = append(files, f)
	}
	return append([]string{argv[0], "--args", "6"}, argv[end:]...), files, nil
}

// pipeHolding is the read end of a pipe holding data, its write end
// closed. data must fit the pipe (64 KiB).
func pipeHolding(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// argv returns the bwrap command line for req in the sandbox that m
// describes.
func (p *Provider) argv(id string, m meta, req sandbox.ExecRequest) ([]string, error) {
	argv, err := p.namespaceArgs(id, m, true)
	if err != nil {
		return nil, err
	}
	// The state is read here, on the host, as data (T3).
	shell := sandbox.ArgvFor(req, p.cfg.Shell, sandbox.StateDir, sandbox.WorkspaceDir, sandbox.ReadShellState(p.stateDir(id)))
	if !m.proxied() {
		return append(append(argv, "--"), shell...), nil
	}
	// Each command has a network namespace of its own: its forwarder
	// listens there before the command starts, and ends with it.
	argv = append(argv, "--", forwarderPath, "egress-forward",
		"-listen", egress.ListenAddr, "-socket", egress.SocketPath, "--")
	return append(argv, shell...), nil
}

// procAttr is attr for a bwrap of the sandbox that m describes: started
// as its host user when sandboxes have their own (idmap_linux.go).
func (p *Provider) procAttr(attr *syscall.SysProcAttr, id string, m meta) *syscall.SysProcAttr {
	switch {
	case p.ids == nil:
		return attr
	case p.ids.userns:
		return idProcAttr(attr, m.hostUser(id))
	}
	return hostProcAttr(attr, m.hostUser(id))
}

// namespaceArgs are bwrap's options for the sandbox that m describes: its
// namespaces, mounts and environment, up to the program to run. A
// command's bwrap dies with the engine (dieWithParent); the long-lived
// namespace of the agent outlives it, as a container does.
func (p *Provider) namespaceArgs(id string, m meta, dieWithParent bool) ([]string, error) {
	// Never --share-net, whatever m.Network says: see network_linux.go.
	withEgress := m.proxied()
	// A user namespace of its own in which no further one can be made
	// (--disable-userns), and the seccomp filter on descriptor 5 (T2).
	argv := []string{p.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--seccomp", "5"}
	if p.ids != nil && !p.ids.userns {
		// bwrap runs as the sandbox's host user: its root inside.
		argv = append(argv, "--uid", "0", "--gid", "0")
	}
	if dieWithParent {
		argv = append(argv, "--die-with-parent")
	}
	argv = append(argv,
		"--new-session", "--cap-drop", "ALL",
		"--json-status-fd", "3", "--block-fd", "4",
		"--hostname", "sandbox",
	)
	argv = append(argv, p.sysArgs...)
	argv = append(argv,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(p.cfg.TmpSizeMiB<<20, 10), "--tmpfs", "/tmp",
		"--bind", p.source(id, p.workspace(id)), sandbox.WorkspaceDir,
	)
	// Inside /workspace, so after its bind.
	argv = append(argv, mountArgs(p.stagedMounts(id, m.Mounts))...)
	argv = append(argv,
		"--bind", p.source(id, p.stateDir(id)), sandbox.StateDir,
		"--bind", p.source(id, p.homeDir(id)), "/root",
	)
	if withEgress {
		forwarder, err := p.reachable(p.cfg.ForwarderBinary)
		if err != nil {
			return nil, err
		}
		argv = append(argv,
			"--ro-bind", p.source(id, p.egressDir(id)), egress.SocketDir,
			"--ro-bind", forwarder, forwarderPath,
		)
	}
	argv = append(argv,
		"--chdir", sandbox.WorkspaceDir,
		"--clearenv",
		"--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--setenv", "HOME", "/root",
		"--setenv", "USER", "root",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "TERM", "dumb",
	)
	if withEgress {
		for _, kv := range egress.Env() {
			k, v, _ := strings.Cut(kv, "=")
			argv = append(argv, "--setenv", k, v)
		}
	}
	return argv, nil
}

// systemMounts binds the host's /usr read-only, mirrors the top-level
// links into it (/bin → usr/bin on merged-/usr systems), and binds the
// snapshot of the allowed /etc entries: no shadow, no host secrets.
func systemMounts(etcDir string) []string {
	return append(usrMounts(), "--ro-bind", etcDir, "/etc")
}

// usrMounts binds /usr read-only and mirrors the top-level directories and
// links into it.
func usrMounts() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(top)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(top); err == nil {
				args = append(args, "--symlink", target, top)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", top, top)
		}
	}
	return args
}

// tailBuffer keeps the last 4 KiB written, for bwrap's own error message.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

package bwrap

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// The long-lived namespace. With Config.AgentBinary set, a running
// sandbox is one bwrap namespace, made on its first command, in which the
// command agent (sandbox/agent, the Docker provider's) runs the commands
// it is sent over a Unix socket: a command costs a connection and a fork
// instead of a new set of namespaces. The namespace has every namespace
// unshared, the sandbox's mounts and cgroups, as a command's has; it is
// not tied to the engine's process, so an engine restart or another
// engine on this machine finds it and goes on using it. Stop and Delete
// end it with every process of the sandbox's cgroups. The shell's state
// is in the sandbox's directories, not in the namespace, so nothing is
// lost when it ends: the next command starts a new one.
//
// A sandbox's first command (and any while its namespace starts) takes
// the per-command path and, once it ended, starts the namespace in the
// background, so a first command is no slower than before; a namespace that cannot be
// started or reached leaves commands to that path, which is always there.
const (
	// agentBinPath is where the namespace sees the agent binary,
	// read-only.
	agentBinPath = "/.flowbox-agent"
	// agentRunDir is where it sees <dir>/run, the directory of the
	// agent's socket. The sandbox can write it: the client follows no
	// link found there (agent.Dial), and the agent proves it holds the
	// namespace's token, which only the engine and the agent know, so a
	// socket a command put in its place is refused (T3).
	agentRunDir     = "/.flowbox-run"
	agentSocketName = "agent.sock"
	// agentTokenName is the file in <dir>/run the agent reads its token
	// from and removes, before any command runs.
	agentTokenName = "token"
	// agentStartup bounds how long a new namespace's agent may take to
	// listen.
	agentStartup = 5 * time.Second
)

func (p *Provider) runDir(id string) string      { return filepath.Join(p.dir(id), "run") }
func (p *Provider) agentSocket(id string) string { return filepath.Join(p.runDir(id), agentSocketName) }

// agentToken is where the engine keeps the namespace's token, out of the
// sandbox's sight.
// It is named anew since sandboxes run as host users of their own
// (idmap_linux.go): a namespace an earlier engine started, as the host's
// root, has only the older agent.token, and is replaced like one from
// before tokens.
func (p *Provider) agentToken(id string) string { return filepath.Join(p.dir(id), agentTokenFile) }

// agentTokenFile is the name of a namespace's token beside the sandbox.
const agentTokenFile = "namespace.token"

// dial connects to the sandbox's agent and has it prove the namespace's
// token. A namespace without a token file was started by an engine from
// before tokens: it is not trusted (errUntrusted when something listens),
// and a new one replaces it.
func (p *Provider) dial(ctx context.Context, id string) (*agent.Conn, error) {
	token, err := os.ReadFile(p.agentToken(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errUntrusted
	}
	if err != nil {
		return nil, err
	}
	return agent.Dial(ctx, p.agentSocket(id), token)
}

// errUntrusted: the agent's socket has no token to check it by.
var errUntrusted = fmt.Errorf("the namespace has no token: %w", agent.ErrAuth)

// endNamespace ends every process of the sandbox, its namespace's and its
// commands', and forgets the namespace's token: something in the sandbox
// answers at the agent's socket that cannot prove it is the agent. The
// next command starts a new namespace.
func (p *Provider) endNamespace(id string) {
	unlock, err := p.lockNamespace(id)
	if err != nil {
		p.log().Warn("bwrap: end the namespace", "sandbox", id, "err", err)
		return
	}
	defer unlock()
	p.endNamespaceLocked(id)
}

// endNamespaceLocked is endNamespace under the sandbox's lock.
func (p *Provider) endNamespaceLocked(id string) {
	p.log().Warn("bwrap: a process in the sandbox answers at its agent's socket without the namespace's token; the sandbox's processes are ended", "sandbox", id)
	_ = os.Remove(p.agentToken(id))
	if err := p.cg.killAll(id, 10*time.Second); err != nil {
		p.log().Warn("bwrap: end the namespace", "sandbox", id, "err", err)
	}
}

// usesAgent reports whether commands go through the long-lived namespace.
func (p *Provider) usesAgent() bool { return p.cfg.AgentBinary != "" }

// execAgent runs req through the sandbox's agent, starting the namespace
// when it has none. handled is false when no agent could be reached: the
// caller runs the command on the per-command path.
func (p *Provider) execAgent(ctx context.Context, id string, m meta, req sandbox.ExecRequest, timeout time.Duration) (res sandbox.ExecResult, handled bool, err error) {
	// A mount whose source the engine removed is refused as on the
	// per-command path: the namespace would still show the old one.
	if err := checkSources(m.Mounts); err != nil {
		return sandbox.ExecResult{}, true, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	conn, err := p.dial(ctx, id)
	if errors.Is(err, agent.ErrAuth) && !errors.Is(err, errUntrusted) {
		// A command's listener in the agent's place: its answers would
		// be its own. This command takes the per-command path.
		p.endNamespace(id)
	}
	if err != nil && req.LongLived() {
		// A program kept running belongs in the namespace, which it
		// would otherwise keep from starting until it ends.
		conn, err = p.agentConn(ctx, id, m)
	}
	if err != nil {
		// No namespace (a new or restarted sandbox): this command takes
		// the per-command path, as fast as ever for a first command, and
		// the namespace starts when it ends (Exec), for the next ones.
		return sandbox.ExecResult{}, false, nil
	}
	col := sandbox.NewCollector(0, req.OnOutput)
	// The sandbox's counters of exhaustion, read around the command, as
	// on the per-command path.
	before := p.cg.exhaustion(id)
	start := time.Now()
	r, err := conn.Exec(ctx, agent.Request{Command: req.Command, Timeout: timeout, Stdin: req.Stdin}, col.Stdout(), col.Stderr())
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.ExecResult{}, true, fmt.Errorf("bwrap exec: %w", ctx.Err())
		}
		switch {
		case errors.Is(err, agent.ErrAuth):
			// A command's listener in the agent's place: its answer
			// was its own, and the agent never saw the request. The
			// sandbox's processes end; this command takes the
			// per-command path.
			p.endNamespace(id)
			return sandbox.ExecResult{}, false, nil
		case errors.Is(err, agent.ErrNotListening):
			// Closed before the agent's proof: nothing ran (an agent
			// ending, or one of another token, started meanwhile by
			// another engine on this root).
			return sandbox.ExecResult{}, false, nil
		}
		if req.LongLived() && errors.Is(err, agent.ErrRefused) {
			// A namespace an older engine started has an agent that
			// knows no standard input; the per-command path gives one.
			return sandbox.ExecResult{}, false, nil
		}
		if req.LongLived() {
			// The namespace ended under it (the sandbox stopped): that
			// is how a long-lived command ends.
			return sandbox.AgentGone(col, time.Since(start), err), true, nil
		}
		// The command may have run: it is not run again.
		return sandbox.ExecResult{}, true, fmt.Errorf("bwrap exec %s through its agent: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	res = col.Result(r.ExitCode, r.TimedOut, timeout, time.Since(start))
	res.OOMKilled, res.PidsLimited = before.During(p.cg.exhaustion(id))
	return res, true, nil
}

// startInBackground starts the sandbox's namespace, unless this process
// is already starting it; a failure is logged, and commands keep the
// per-command path.
func (p *Provider) startInBackground(id string, m meta) {
	if _, starting := p.nsStarting.LoadOrStore(id, true); starting {
		return
	}
	go func() {
		defer p.nsStarting.Delete(id)
		ctx, cancel := context.WithTimeout(context.Background(), 2*agentStartup)
		defer cancel()
		conn, err := p.agentConn(ctx, id, m)
		if errors.Is(err, errBackoff) || errors.Is(err, errNotRunning) {
			return // said when it failed; or nothing to start
		}
		if err != nil {
			level := slog.LevelWarn
			var exit *exec.ExitError
			if st, _ := p.Status(ctx, id); st != sandbox.StatusRunning || errors.As(err, &exit) && exit.ExitCode() == -1 {
				level = slog.LevelInfo // stopped or deleted meanwhile: killed
			}
			p.log().Log(ctx, level, "bwrap: the sandbox's namespace did not start; its commands run in a bwrap each", "sandbox", id, "err", err)
			return
		}
		conn.Close()
	}()
}

// agentConn connects to the sandbox's agent, starting its namespace
// first when nothing listens. One caller starts it, also across engine
// processes (a lock file); the others wait and connect.
func (p *Provider) agentConn(ctx context.Context, id string, m meta) (*agent.Conn, error) {
	if conn, err := p.dial(ctx, id); err == nil {
		return conn, nil
	}
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	switch conn, err := p.dial(ctx, id); {
	case err == nil:
		return conn, nil // started meanwhile
	case errors.Is(err, errUntrusted):
		// No token: a namespace an engine from before tokens started
		// may still run, whose agent would take the socket back.
		if c, err := agent.Dial(ctx, p.agentSocket(id), nil); err == nil {
			c.Close()
			p.endNamespaceLocked(id)
		}
	case errors.Is(err, agent.ErrAuth):
		p.endNamespaceLocked(id)
	}
	if at, ok := p.nsFailed.Load(id); ok && time.Since(at.(time.Time)) < nsRetry {
		return nil, errBackoff
	}
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusRunning {
		return nil, errNotRunning // stopped or deleted meanwhile
	}
	exited, err := p.startNamespace(id, m)
	if err != nil {
		p.nsFailed.Store(id, time.Now())
		return nil, err
	}
	deadline := time.Now().Add(agentStartup)
	for {
		conn, err := p.dial(ctx, id)
		if err == nil {
			p.nsFailed.Delete(id)
			return conn, nil
		}
		if !errors.Is(err, agent.ErrNotListening) || time.Now().After(deadline) {
			p.nsFailed.Store(id, time.Now())
			return nil, fmt.Errorf("the agent of the new namespace does not listen: %w (its log: %s)", err, p.agentLogTail(id))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-exited:
			p.nsFailed.Store(id, time.Now())
			if err == nil {
				err = errors.New("exit status 0")
			}
			return nil, fmt.Errorf("the new namespace ended at once (%w; its log: %s)", err, p.agentLogTail(id))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// errNotRunning: the sandbox was stopped or deleted before its namespace
// started.
var errNotRunning = errors.New("the sandbox is not running")

// errBackoff: the namespace failed to start less than nsRetry ago.
var errBackoff = errors.New("its namespace failed to start moments ago")

// nsRetry is how long after a namespace failed to start its sandbox's
// commands take the per-command path without trying again.
const nsRetry = 10 * time.Second

// namespaceLocks serialise the starts of one sandbox's namespace in this
// process; the lock file does it across processes.
var namespaceLocks sync.Map // id → *sync.Mutex

// Stop and Delete take it too, so that they never run in the middle of a
// start: the start ends first, and they end what it started. A sandbox
// whose directory is gone needs no lock file: there is nothing to start.
func (p *Provider) lockNamespace(id string) (unlock func(), err error) {
	mu, _ := namespaceLocks.LoadOrStore(id, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	f, err := os.OpenFile(filepath.Join(p.dir(id), "namespace.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return mu.(*sync.Mutex).Unlock, nil
	}
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		mu.(*sync.Mutex).Unlock()
		return nil, fmt.Errorf("lock the sandbox's namespace: %w", err)
	}
	return func() {
		f.Close() // releases the lock
		mu.(*sync.Mutex).Unlock()
	}, nil
}

// startNamespace starts the sandbox's long-lived bwrap with the agent as
// its program, in the sandbox's cgroups before the agent runs, and
// returns once bwrap reported the agent's PID. The namespace is a
// session of its own and no child of the engine for long: it is reaped
// here while the engine lives and by init after.
func (p *Provider) startNamespace(id string, m meta) (exited <-chan error, err error) {
	if err := p.stageLocked(id, m); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(p.dir(id), "agent.token")) // an earlier engine's
	if err := os.MkdirAll(p.runDir(id), 0o755); err != nil {
		return nil, err
	}
	if m.proxied() {
		if err := os.MkdirAll(p.egressDir(id), 0o755); err != nil {
			return nil, err
		}
	}
	// A token of the namespace's own: the engine keeps it beside the
	// sandbox, the agent takes it from the run directory before any
	// command runs (-token-file removes it).
	token := agent.NewToken()
	if err := writeFileAtomic(p.agentToken(id), token, 0o600); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(p.runDir(id), agentTokenName)
	_ = os.Remove(tokenFile) // whatever the sandbox left there
	if err := os.WriteFile(tokenFile, token, 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.agentLog(id), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	drained := false
	defer func() {
		if !drained {
			statusR.Close()
		}
	}()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return nil, err
	}
	defer blockW.Close()

	argv, err := p.namespaceArgs(id, m, false)
	var agentBin string
	if err == nil {
		agentBin, err = p.reachable(p.cfg.AgentBinary)
	}
	if err != nil {
		statusW.Close()
		blockR.Close()
		return nil, err
	}
	argv = append(argv,
		"--ro-bind", agentBin, agentBinPath,
		"--bind", p.source(id, p.runDir(id)), agentRunDir,
		"--", agentBinPath, "sandbox-agent",
		"-socket", agentRunDir+"/"+agentSocketName,
		"-shell", p.cfg.Shell,
		"-state-dir", sandbox.StateDir,
		"-workdir", sandbox.WorkspaceDir,
		"-token-file", agentRunDir+"/"+agentTokenName,
		// The agent checks it was put in the sandbox's cgroups: bwrap
		// starts it when the block pipe closes, also when the engine
		// died before it could join them.
		"-cgroup", filepath.Join(p.cg.parent, id),
		"-cgroup-controllers", strings.Join(p.ctls, ","),
		"-log-level", "warn")
	if m.proxied() {
		// The agent forwards the namespace's egress port to the proxy.
		argv = append(argv, "-egress-socket", egress.SocketPath)
	}
	argv, files, err := bwrapFiles(argv)
	if err != nil {
		statusW.Close()
		blockR.Close()
		return nil, err
	}
	defer closeAll(files)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = append([]*os.File{statusW, blockR}, files...)
	cmd.SysProcAttr = p.procAttr(&syscall.SysProcAttr{Setsid: true}, id, m)
	err = cmd.Start()
	statusW.Close()
	blockR.Close()
	if err != nil {
		return nil, fmt.Errorf("start the namespace: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- cmd.Wait() // reaps it; Stop and Delete end it
	}()

	br := bufio.NewReader(statusR)
	pid, err := childPid(br)
	if err == nil {
		// bwrap writes to the status pipe until the namespace ends (its
		// exit code last): keep reading it, or bwrap dies of SIGPIPE.
		drained = true
		go func() {
			_, _ = io.Copy(io.Discard, br)
			statusR.Close()
		}()
	}
	if err == nil {
		err = p.cg.join(p.ctls, id, cmd.Process.Pid, pid)
	}
	if err == nil {
		_, err = blockW.Write([]byte{1})
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return nil, fmt.Errorf("start the namespace: %w (its log: %s)", err, p.agentLogTail(id))
	}
	return done, nil
}

// childPid reads bwrap's report of its child's PID from --json-status-fd.
func childPid(r io.Reader) (int, error) {
	dec := json.NewDecoder(r)
	for {
		var ev statusEvent
		if err := dec.Decode(&ev); err != nil {
			return 0, fmt.Errorf("bwrap ended before its child started: %w", err)
		}
		if ev.ChildPid != nil {
			return *ev.ChildPid, nil
		}
	}
}

func (p *Provider) agentLog(id string) string { return filepath.Join(p.dir(id), "agent.log") }

// agentLogTail is the end of the namespace's log, for errors.
func (p *Provider) agentLogTail(id string) string {
	b, _ := os.ReadFile(p.agentLog(id))
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "empty"
}

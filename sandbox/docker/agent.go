package docker

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

// Where the agent lives in a container: apart from the workspace and the
// shell's state, which are the sandbox's.
const (
	// agentPath is the read-only bind mount of the agent binary.
	agentPath = "/.flowbox-agent/flowbox-agent"
	// agentRunDir is the sandbox's agent directory on the host, where
	// the agent puts its socket.
	agentRunDir     = "/.flowbox-run"
	agentSocketName = "agent.sock"
	// agentStartup is how long after its container started the agent may
	// take to listen before commands fall back to Docker execs.
	agentStartup = 2 * time.Second
	// longLivedStartup is that wait for a command with standard input,
	// which only the agent can run.
	longLivedStartup = 15 * time.Second
)

// agentCmd is the main process of a container with an agent.
// The agent takes its token from agentTokenName in its run directory and
// removes it before any command runs.
func agentCmd(shell string) []string {
	return []string{agentPath, "sandbox-agent",
		"-socket", agentRunDir + "/" + agentSocketName,
		"-shell", shell,
		"-state-dir", sandbox.StateDir,
		"-workdir", sandbox.WorkspaceDir,
		"-token-file", agentRunDir + "/" + agentTokenName,
	}
}

// agentTokenName is the token's file in the agent's run directory.
const agentTokenName = "token"

// agentToken is where the engine keeps the sandbox's token: beside its
// directories, out of the container's sight.
func (p *Provider) agentToken(id string) string { return filepath.Join(p.hostDir(id), "agent.token") }

// handTokenOver puts the sandbox's token where its agent reads it at its
// start, making the token when the sandbox has none. A container created
// before tokens runs an agent that reads none: then nothing is written.
func (p *Provider) handTokenOver(id string) error {
	token, err := os.ReadFile(p.agentToken(id))
	if errors.Is(err, os.ErrNotExist) {
		token = agent.NewToken()
		err = os.WriteFile(p.agentToken(id), token, 0o600)
	}
	if err != nil {
		return fmt.Errorf("the agent's token: %w", err)
	}
	f := filepath.Join(p.agentDir(id), agentTokenName)
	_ = os.Remove(f) // whatever the sandbox left there
	if err := os.WriteFile(f, token, 0o600); err != nil {
		return fmt.Errorf("the agent's token: %w", err)
	}
	return nil
}

// withdrawToken removes a token handed over to a container that was
// already running (its agent took its token when it started): left there,
// the sandbox could read it.
func (p *Provider) withdrawToken(id string) {
	_ = os.Remove(filepath.Join(p.agentDir(id), agentTokenName))
}

// execAgent runs req through the container's agent. handled is false when
// the agent is out of reach although the container runs (it predates the
// agent, is still starting after agentStartup, or the sandbox replaced
// its socket): the caller runs the command as a Docker exec instead.
func (p *Provider) execAgent(ctx context.Context, id string, req sandbox.ExecRequest) (res sandbox.ExecResult, handled bool, err error) {
	started := time.Now()
	patience := agentStartup
	if req.LongLived() {
		// A Docker exec cannot stand in: wait longer for the agent.
		patience = longLivedStartup
	}
	conn, err := p.dialAgent(ctx, id, patience)
	if err != nil {
		return sandbox.ExecResult{}, true, err
	}
	if conn == nil {
		return sandbox.ExecResult{}, false, nil
	}
	col := sandbox.NewCollector(0, req.OnOutput)
	if req.LongLived() {
		req.Timeout = 0 // none
	}
	r, err := conn.Exec(ctx, agent.Request{Command: req.Command, Timeout: req.Timeout, Stdin: req.Stdin}, col.Stdout(), col.Stderr())
	if err != nil {
		if ctx.Err() != nil {
			return col.Result(-1, false, req.Timeout, time.Since(started)), true, fmt.Errorf("exec in sandbox %s: %w", id, ctx.Err())
		}
		if errors.Is(err, agent.ErrAuth) || errors.Is(err, agent.ErrNotListening) {
			// Not the agent (the sandbox's own listener, or an agent of
			// an older engine), or closed before its proof: the
			// request ran nowhere. A Docker exec runs it, unless it
			// is a long-lived one, which only the agent runs.
			p.agentUnreachable(id, err)
			if req.LongLived() {
				return sandbox.ExecResult{}, true, fmt.Errorf("exec in sandbox %s: %w: its agent is out of reach (%v)", id, sandbox.ErrUnavailable, err)
			}
			return sandbox.ExecResult{}, false, nil
		}
		if req.LongLived() && errors.Is(err, agent.ErrRefused) {
			// An agent from before standard input: the container's
			// binary is replaced when it is created again.
			return sandbox.ExecResult{}, true, fmt.Errorf("exec in sandbox %s: %w: its agent is older than standard input (%v); delete the sandbox to have it created anew", id, sandbox.ErrNoStdin, err)
		}
		if req.LongLived() {
			// The container stopped under it: that is how a long-lived
			// command ends.
			return sandbox.AgentGone(col, time.Since(started), err), true, nil
		}
		// The command may have run: this is no ErrNotRunning, whatever
		// became of the container.
		return sandbox.ExecResult{}, true, fmt.Errorf("exec in sandbox %s through its agent: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	res = col.Result(r.ExitCode, r.TimedOut, req.Timeout, time.Since(started))
	// The agent reads them from the container's cgroups, which Docker
	// shows it read-only at /sys/fs/cgroup.
	res.OOMKilled, res.PidsLimited = r.OOMKilled, r.PidsLimited
	return res, true, nil
}

// dialAgent connects to the sandbox's agent. When that fails, it asks the
// daemon why: a missing container is ErrNotFound, a stopped one
// ErrNotRunning, and a container that just started is given agentStartup
// for its agent to replace what was left at the socket's path and listen.
// A nil connection with a nil error means: use a Docker exec. patience
// is how long after the container started the agent may take. That is
// also the answer to what the sandbox may have put there (a link to a
// socket of the host, which the client refuses, or anything else):
// Docker execs do not need the socket.
func (p *Provider) dialAgent(ctx context.Context, id string, patience time.Duration) (*agent.Conn, error) {
	sock := filepath.Join(p.agentDir(id), agentSocketName)
	// No token: a container from before tokens, whose agent proves none.
	token, _ := os.ReadFile(p.agentToken(id))
	var startedAt time.Time
	for wait := time.Millisecond; ; wait = min(2*wait, 5*time.Millisecond) {
		conn, err := agent.Dial(ctx, sock, token)
		if err == nil {
			return conn, nil
		}
		if startedAt.IsZero() {
			res, ierr := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
			if ierr != nil {
				return nil, p.execErr(id, ierr)
			}
			c := res.Container
			if c.State == nil || !c.State.Running || c.State.Paused {
				return nil, fmt.Errorf("exec in sandbox %s: %w", id, sandbox.ErrNotRunning)
			}
			if !runsAgent(c) {
				return nil, nil // created without one
			}
			startedAt, ierr = time.Parse(time.RFC3339Nano, c.State.StartedAt)
			if ierr != nil {
				startedAt = time.Now()
			}
		}
		if time.Since(startedAt) > patience {
			p.agentUnreachable(id, err)
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("exec in sandbox %s: %w", id, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func runsAgent(c container.InspectResponse) bool {
	return c.Config != nil && len(c.Config.Cmd) > 0 && c.Config.Cmd[0] == agentPath
}

// agentUnreachable logs that a command falls back to a Docker exec: the
// first time as a warning, then at debug level, so that a sandbox that
// removes its socket cannot flood the log.
func (p *Provider) agentUnreachable(id string, why error) {
	const msg = "the sandbox's agent is out of reach; its commands run as Docker execs"
	warned := false
	p.unreachable.Do(func() {
		p.log.Warn(msg+" (logged once)", "sandbox", id, "err", why)
		warned = true
	})
	if !warned {
		p.log.Debug(msg, "sandbox", id, "err", why)
	}
}

// agentChoice is the agent binary new containers run.
type agentChoice struct {
	// daemon is its path as the Docker daemon sees it; empty: no agent,
	// commands are Docker execs.
	daemon string
	// fallback says why the default agent, this engine's own binary,
	// cannot be used; nil when it is used or another was configured.
	fallback error
}

// resolveAgent picks the agent binary for cfg: none for NoAgent, the
// configured one, or by default the running executable (executable
// stands for os.Executable) if it can run in a container and stays where
// it is. A configured binary is checked by Fingerprint, not here: the
// operator asked for it, so a bad one is an error, not a fallback.
func resolveAgent(cfg Config, executable func() (string, error)) (agentChoice, error) {
	var local string
	switch cfg.AgentBinary {
	case NoAgent:
		return agentChoice{}, nil
	case "":
		exe, err := selfAgent(executable)
		if err != nil {
			return agentChoice{fallback: err}, nil
		}
		local = exe
	default:
		if !filepath.IsAbs(cfg.AgentBinary) {
			return agentChoice{}, fmt.Errorf("the agent binary %q must be an absolute path", cfg.AgentBinary)
		}
		local = filepath.Clean(cfg.AgentBinary)
	}
	daemon := local
	if cfg.DaemonAgentBinary != "" {
		if !filepath.IsAbs(cfg.DaemonAgentBinary) {
			return agentChoice{}, fmt.Errorf("the daemon's path of the agent binary %q must be an absolute path", cfg.DaemonAgentBinary)
		}
		daemon = filepath.Clean(cfg.DaemonAgentBinary)
	}
	return agentChoice{daemon: daemon}, nil
}

// selfAgent returns the running executable's path, links resolved, or
// why it cannot be the agent: it is dynamically linked, or it is a
// temporary build of go run or go test, which goes away when it exits
// while the containers that mount it stay.
func selfAgent(executable func() (string, error)) (string, error) {
	exe, err := executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("cannot find this engine's binary: %w", err)
	}
	for _, dir := range strings.Split(filepath.Dir(exe), string(filepath.Separator)) {
		if strings.HasPrefix(dir, "go-build") {
			return "", fmt.Errorf("this engine's binary %s is a temporary build of go run or go test; build it with go build", exe)
		}
	}
	if err := CheckStatic(exe); err != nil {
		return "", fmt.Errorf("this engine's binary: %w", err)
	}
	return exe, nil
}

// checkAgentBinary says why the agent binary at path cannot run in a
// container: it needs a dynamic loader, which an image may lack. A path
// this process cannot see is the daemon's to judge: the container's
// creation fails if it is missing.
func checkAgentBinary(path string) error {
	err := CheckStatic(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// CheckStatic says why the binary at path is no static executable, which
// an agent binary must be to run in any image (nil when it is one).
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the agent binary %s: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("the agent binary %s is dynamically linked; build it static with CGO_ENABLED=0 go build ./cmd/flowbox-agent", path)
		}
	}
	return nil
}

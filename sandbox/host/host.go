// Package host runs "sandboxes" as plain directories on the engine's own
// machine, with the engine's privileges: no isolation, no limits, full
// network. It exists for development on machines without bubblewrap or
// Docker. New refuses unless the operator allows it explicitly, and every
// log line and the sandbox prompt say it is unsafe. It must never be the
// default, and the engine refuses it in production mode.
//
// A spec's mounts are links in the workspace to their sources: commands
// reach them, but nothing keeps a read-only mount read-only
// (Capabilities.FilesystemIsolation is false).
package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// ErrNotAllowed is returned by New without Config.AllowUnsafe.
var ErrNotAllowed = errors.New("the host sandbox provider runs commands with the engine's own privileges; set FLOWBOX_SANDBOX_ALLOW_UNSAFE_HOST=true to use it for development")

// Config configures the provider.
type Config struct {
	// Root holds one directory per sandbox. Default /var/lib/flowbox/host.
	Root string
	// Shell interprets commands. Default /bin/bash.
	Shell string
	// AllowUnsafe must be true: the operator acknowledges there is no
	// isolation.
	AllowUnsafe bool
}

// Provider runs commands directly on the host.
type Provider struct{ cfg Config }

var _ sandbox.Provider = (*Provider)(nil)

// New returns the provider, or ErrNotAllowed.
func New(cfg Config) (*Provider, error) {
	if !cfg.AllowUnsafe {
		return nil, ErrNotAllowed
	}
	if cfg.Root == "" {
		cfg.Root = "/var/lib/flowbox/host"
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/bash"
	}
	return &Provider{cfg: cfg}, nil
}

func (p *Provider) Name() string { return "host" }

func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Streaming: true, Unsafe: true}
}

func (p *Provider) Fingerprint(ctx context.Context) error {
	if _, err := exec.LookPath(p.cfg.Shell); err != nil {
		return fmt.Errorf("%w: shell %s: %v", sandbox.ErrUnsupported, p.cfg.Shell, err)
	}
	return os.MkdirAll(p.cfg.Root, 0o755)
}

func (p *Provider) dir(id string) string       { return filepath.Join(p.cfg.Root, id) }
func (p *Provider) workspace(id string) string { return filepath.Join(p.dir(id), "workspace") }
func (p *Provider) state(id string) string     { return filepath.Join(p.dir(id), "state") }
func (p *Provider) stopped(id string) string   { return filepath.Join(p.dir(id), "stopped") }

func check(id string) error {
	if !sandbox.ValidID(id) {
		return fmt.Errorf("host: %w: invalid sandbox id %q", sandbox.ErrNotFound, id)
	}
	return nil
}

// Ensure makes the sandbox's directories, or restarts a stopped one. The
// call that makes the sandbox's directory links the spec's mounts into
// the workspace; a sandbox keeps the mounts it was created with.
func (p *Provider) Ensure(ctx context.Context, spec sandbox.Spec) (err error) {
	id := spec.ID
	if err := check(id); err != nil {
		return err
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return fmt.Errorf("host ensure %s: %w", id, err)
	}
	if err := os.MkdirAll(p.cfg.Root, 0o755); err != nil {
		return fmt.Errorf("host ensure %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	// Whoever makes the directory is the creator, and only the creator
	// links the mounts or rolls back.
	mkErr := os.Mkdir(p.dir(id), 0o755)
	fresh := mkErr == nil
	if mkErr != nil && !errors.Is(mkErr, fs.ErrExist) {
		return fmt.Errorf("host ensure %s: %w: %w", id, sandbox.ErrUnavailable, mkErr)
	}
	defer func() {
		if err != nil && fresh {
			err = errors.Join(err, os.RemoveAll(p.dir(id)))
		}
	}()
	for _, d := range []string{p.workspace(id), p.state(id)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("host ensure %s: %w: %w", id, sandbox.ErrUnavailable, err)
		}
	}
	if fresh {
		if err := p.link(id, mounts); err != nil {
			return fmt.Errorf("host ensure %s: %w: %w", id, sandbox.ErrUnavailable, err)
		}
	}
	if err := os.Remove(p.stopped(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("host ensure %s: %w", id, err)
	}
	return nil
}

// link makes each mount a link at its target's place in the workspace.
// Delete removes the links, never what they point at.
func (p *Provider) link(id string, mounts []sandbox.Mount) error {
	for _, m := range mounts {
		rel := strings.TrimPrefix(m.Target, sandbox.WorkspaceDir+"/")
		at := filepath.Join(p.workspace(id), filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
		if err := os.Symlink(m.Source, at); err != nil {
			return fmt.Errorf("mount %s: %w", m.Target, err)
		}
	}
	return nil
}

func (p *Provider) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if check(id) != nil {
		return sandbox.StatusMissing, nil
	}
	if _, err := os.Stat(p.workspace(id)); err != nil {
		return sandbox.StatusMissing, nil
	}
	if _, err := os.Stat(p.stopped(id)); err == nil {
		return sandbox.StatusStopped, nil
	}
	return sandbox.StatusRunning, nil
}

// Exec runs the command in its own process group in the workspace; the
// whole group is killed at the timeout and when the command ends.
func (p *Provider) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := check(id); err != nil {
		return sandbox.ExecResult{}, err
	}
	if req.LongLived() {
		// No program the engine talks to runs on its own host.
		return sandbox.ExecResult{}, fmt.Errorf("host exec %s: %w", id, sandbox.ErrNoStdin)
	}
	switch st, _ := p.Status(ctx, id); st {
	case sandbox.StatusMissing:
		return sandbox.ExecResult{}, fmt.Errorf("host exec %s: %w", id, sandbox.ErrNotFound)
	case sandbox.StatusStopped:
		return sandbox.ExecResult{}, fmt.Errorf("host exec %s: %w", id, sandbox.ErrNotRunning)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = sandbox.DefaultTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := sandbox.ShellArgv(p.cfg.Shell, p.state(id), p.workspace(id), req.Command, sandbox.ReadShellState(p.state(id)))
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + p.workspace(id), "LANG=C.UTF-8", "TERM=dumb"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	col := sandbox.NewCollector(0, req.OnOutput)
	cmd.Stdout, cmd.Stderr = col.Stdout(), col.Stderr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("host exec: %w: %w", sandbox.ErrUnavailable, err)
	}
	_ = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leave nothing behind
	d := time.Since(start)
	if ctx.Err() != nil {
		return sandbox.ExecResult{}, fmt.Errorf("host exec: %w", ctx.Err())
	}
	if errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return col.Result(-1, true, timeout, d), nil
	}
	return col.Result(cmd.ProcessState.ExitCode(), false, timeout, d), nil
}

func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := check(id); err != nil {
		return err
	}
	if _, err := os.Stat(p.dir(id)); err != nil {
		return nil
	}
	return os.WriteFile(p.stopped(id), nil, 0o600)
}

func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := check(id); err != nil {
		return err
	}
	return os.RemoveAll(p.dir(id))
}

func (p *Provider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	if err := check(id); err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.workspace(id)); err != nil {
		return nil, fmt.Errorf("host files %s: %w", id, sandbox.ErrNotFound)
	}
	return sandbox.DirFiles{Dir: p.workspace(id)}, nil
}

func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	entries, err := os.ReadDir(p.cfg.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []sandbox.Resource
	for _, e := range entries {
		if !sandbox.ValidID(e.Name()) {
			continue
		}
		st, _ := p.Status(ctx, e.Name())
		if st == sandbox.StatusMissing {
			continue
		}
		r := sandbox.Resource{ID: e.Name(), Status: st}
		if fi, err := e.Info(); err == nil {
			r.CreatedAt = fi.ModTime().UTC()
		}
		out = append(out, r)
	}
	return out, nil
}

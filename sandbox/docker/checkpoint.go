package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
)

// Checkpoints (R1–R3). With Config.CheckpointPool set, a new sandbox's
// workspace and shell state are the directories workspace/ and state/
// of its subvolume in the pool (package checkpoint), bound on its host
// directories' workspace/ and state/, which the container binds in turn.
// Its disk limit is its quota group's limit, which its checkpoints count
// against. <host dir>/checkpoint-pool names its files in the pool: its
// own id, or the warm pool member's it was adopted from.
//
// The container binds what is mounted on the host directories when it
// starts, so a restore kills it (its processes end, as on bwrap),
// exchanges the files, binds them again and starts it. The rest of the
// container's filesystem (packages installed outside /workspace, /root)
// is the container's writable layer, which no checkpoint holds.
// Sandboxes made without the pool have no checkpoints (ErrUnsupported).

var (
	_ sandbox.CheckpointProvider = (*Provider)(nil)
	_ sandbox.CheckpointSweeper  = (*Provider)(nil)
)

// poolMark is the file naming the sandbox's files in the pool.
func (p *Provider) poolMark(id string) string { return filepath.Join(p.hostDir(id), "checkpoint-pool") }

// poolID is the id of the sandbox's files in the pool, if it has some.
func (p *Provider) poolID(id string) (string, bool) {
	if p.pool == nil {
		return "", false
	}
	return checkpoint.ReadMark(p.poolMark(id))
}

// mountPool binds the sandbox's files in the pool on its host
// directories: made first, with limit bytes (0: none), when no mark
// names them yet.
func (p *Provider) mountPool(id string, limit int64) error {
	pid, ok := p.poolID(id)
	if !ok {
		pid = id
	}
	if err := p.pool.Create(pid, limit); err != nil {
		return err
	}
	if ok && limit > 0 {
		// A fork's files, made without the limit of the spec it now has.
		if err := p.pool.Limit(pid, limit); err != nil {
			return err
		}
	}
	if !ok {
		if err := checkpoint.WriteMark(p.poolMark(id), pid); err != nil {
			return err
		}
	}
	return p.bindPool(id, pid)
}

// bindPool binds pool files pid on the sandbox's host directories.
func (p *Provider) bindPool(id, pid string) error {
	if err := p.pool.Bind(pid, "workspace", p.workspaceDir(id)); err != nil {
		return err
	}
	return p.pool.Bind(pid, "state", p.stateDir(id))
}

// unbindPool unbinds them; for good (the directories can be removed)
// when release.
func (p *Provider) unbindPool(id string, release bool) error {
	unbind := checkpoint.Unbind
	if release {
		unbind = checkpoint.Release
	}
	return errors.Join(unbind(p.workspaceDir(id)), unbind(p.stateDir(id)))
}

// inPool is the sandbox's id in the pool, or why it has no checkpoints.
func (p *Provider) inPool(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if p.pool == nil {
		return "", checkpoint.Off("docker", id)
	}
	if p.adoptedAway(id) {
		return "", fmt.Errorf("docker sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	pid, ok := p.poolID(id)
	if !ok {
		_, err := os.Stat(p.hostDir(id))
		return "", checkpoint.Unmarked("docker", id, !errors.Is(err, fs.ErrNotExist))
	}
	return pid, nil
}

func (p *Provider) Checkpoint(ctx context.Context, id, name string) (sandbox.Checkpoint, error) {
	return p.files().Checkpoint(id, name)
}

// files is the sandboxes' files in the pool.
func (p *Provider) files() checkpoint.Files {
	return checkpoint.Files{Pool: p.pool, Provider: "docker", In: p.inPool}
}

// RestoreCheckpoint kills a running container, exchanges its files for
// the checkpoint's (name "" empties them), binds them again and starts
// it; a stopped one stays stopped.
func (p *Provider) RestoreCheckpoint(ctx context.Context, id, name string, mounts func() error) error {
	pid, err := p.inPool(id)
	if err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("docker restore %s: %w", id, err) }
	res, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
	running := false
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return fail(p.apiErr("inspect", err))
	default:
		s := stateOf(res.Container)
		running = s == container.StateRunning || s == container.StatePaused || s == container.StateRestarting
	}
	if running {
		// The processes end, and with them the container's binds of the
		// old files: killed, since what they would save on a stop is
		// replaced anyway. Its egress stays served: it starts again below.
		secs := 0
		if _, err := p.cli.ContainerStop(ctx, ContainerName(id), client.ContainerStopOptions{Signal: "SIGKILL", Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
			return fail(p.apiErr("stop", err))
		}
	}
	// The host files it mounts, while no process holds them.
	if mounts != nil {
		if err := mounts(); err != nil {
			if running {
				if serr := p.start(ctx, id); serr != nil {
					err = errors.Join(err, serr)
				}
			}
			return fail(err)
		}
	}
	if err := p.unbindPool(id, false); err != nil {
		return fail(err)
	}
	if name == "" {
		err = p.pool.Reset(pid)
	} else {
		err = p.pool.Restore(pid, name)
	}
	// The files, restored or not, are bound again.
	if berr := p.bindPool(id, pid); berr != nil {
		return fail(errors.Join(checkpoint.SandboxErr(err), berr))
	}
	if err != nil {
		return fail(checkpoint.SandboxErr(err))
	}
	if running {
		if err := p.start(ctx, id); err != nil {
			return fail(fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err))
		}
	}
	return nil
}

// ForkCheckpoint makes sandbox newID's files from the checkpoint, with
// no container: Ensure creates it on them, with the spec it is given.
func (p *Provider) ForkCheckpoint(ctx context.Context, id, name, newID string) (err error) {
	pid, err := p.inPool(id)
	if err != nil {
		return err
	}
	if err := checkID(newID); err != nil {
		return err
	}
	if err := os.Mkdir(p.hostDir(newID), 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("docker fork %s: sandbox %s exists already", id, newID)
		}
		return fmt.Errorf("docker fork %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(p.hostDir(newID))
		}
	}()
	if err := p.pool.Fork(pid, name, newID, 0); err != nil {
		return fmt.Errorf("docker fork %s: %w", id, checkpoint.SandboxErr(err))
	}
	if err := checkpoint.WriteMark(p.poolMark(newID), newID); err != nil {
		_ = p.pool.Delete(newID)
		return fmt.Errorf("docker fork %s: %w", id, err)
	}
	return nil
}

func (p *Provider) DropCheckpoint(ctx context.Context, id, name string) error {
	return p.files().Drop(id, name)
}

func (p *Provider) Checkpoints(ctx context.Context, id string) ([]sandbox.Checkpoint, error) {
	return p.files().List(id)
}

// SweepCheckpoints removes what no sandbox owns any more and is older
// than old (R4): files and checkpoints in the pool that no sandbox's mark
// names, and the directory of a fork that stopped before it was whole (no
// mark, no record, no container). It returns how many it removed.
func (p *Provider) SweepCheckpoints(ctx context.Context, old time.Time) (int, error) {
	if p.pool == nil {
		return 0, nil
	}
	n, err := p.files().Sweep(p.cfg.WorkspaceRoot, p.poolMark, func(id string) bool {
		if _, err := os.Lstat(filepath.Join(p.hostDir(id), recordFile)); err == nil {
			return false
		}
		_, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
		return cerrdefs.IsNotFound(err)
	}, old)
	if n > 0 {
		p.log.Info("docker: the checkpoint sweep removed what no sandbox owned", "count", n)
	}
	return n, err
}

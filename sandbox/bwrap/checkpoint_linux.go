package bwrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// Checkpoints (R1–R3). With Config.CheckpointPool set, a new sandbox's
// workspace, state and home are a subvolume of the pool (package
// checkpoint), bound on <dir>/disk where a disk image would be mounted,
// so that the stage and everything else find them as on an image. Its
// disk limit is its quota group's limit, which its checkpoints count
// against. <dir>/checkpoint-pool names the sandbox's files in the pool:
// its own id, or the warm pool member's it was adopted from.
//
// A restore ends the sandbox's processes, as a stop does, then exchanges
// its files for the checkpoint's and binds them again; the next command
// starts a new namespace. Sandboxes made without the pool have no
// checkpoints (ErrUnsupported).

var _ sandbox.CheckpointProvider = (*Provider)(nil)

// poolMark is the file naming the sandbox's files in the pool.
func (p *Provider) poolMark(id string) string { return filepath.Join(p.dir(id), "checkpoint-pool") }

// poolID is the id of the sandbox's files in the pool, if it has some.
func (p *Provider) poolID(id string) (string, bool) {
	if p.cfg.CheckpointPool == "" {
		return "", false
	}
	return checkpoint.ReadMark(p.poolMark(id))
}

func (p *Provider) onPool(id string) bool {
	_, ok := p.poolID(id)
	return ok
}

// mountPool binds the sandbox's files in the pool on its disk directory:
// made first for a fresh sandbox, with limit bytes (0: none).
func (p *Provider) mountPool(id string, limit int64, fresh bool) error {
	pid, ok := p.poolID(id)
	if !ok {
		if !fresh {
			return fmt.Errorf("sandbox %s: its checkpoint pool mark is missing", id)
		}
		pid = id
	}
	if err := p.pool.Create(pid, limit); err != nil {
		return err
	}
	if !ok {
		if err := checkpoint.WriteMark(p.poolMark(id), pid); err != nil {
			return err
		}
	}
	return p.bindPool(id, pid)
}

// bindPool binds pool files pid on the sandbox's disk directory, unless
// something is mounted there already.
func (p *Provider) bindPool(id, pid string) error { return p.pool.Bind(pid, "", p.diskDir(id)) }

// inPool is the sandbox's id in the pool, or why it has no checkpoints.
func (p *Provider) inPool(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if p.cfg.CheckpointPool == "" {
		return "", checkpoint.Off("bwrap", id)
	}
	if err := p.probe(); err != nil {
		return "", err
	}
	pid, ok := p.poolID(id)
	if !ok {
		exists, _ := p.exists(id)
		return "", checkpoint.Unmarked("bwrap", id, exists)
	}
	return pid, nil
}

func (p *Provider) Checkpoint(ctx context.Context, id, name string) (sandbox.Checkpoint, error) {
	return p.files().Checkpoint(id, name)
}

// files is the sandboxes' files in the pool.
func (p *Provider) files() checkpoint.Files {
	return checkpoint.Files{Pool: p.pool, Provider: "bwrap", In: p.inPool}
}

func (p *Provider) RestoreCheckpoint(ctx context.Context, id, name string, mounts func() error) error {
	pid, err := p.inPool(id)
	if err != nil {
		return err
	}
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return fmt.Errorf("bwrap restore %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	defer unlock()
	_, err = os.Stat(p.stoppedMark(id))
	running := errors.Is(err, fs.ErrNotExist)
	// Its processes go, and with them every mount of the old files.
	if err := p.cg.killAll(id, 10*time.Second); err != nil {
		return fmt.Errorf("bwrap restore %s: %w", id, err)
	}
	if err := p.unstage(id); err != nil {
		return fmt.Errorf("bwrap restore %s: %w", id, err)
	}
	// The host files it mounts, while no process and no stage holds
	// them; a command's stage after a failure shows them as they are.
	if mounts != nil {
		if err := mounts(); err != nil {
			return fmt.Errorf("bwrap restore %s: %w", id, err)
		}
	}
	if err := diskimage.Unmount(p.diskDir(id)); err != nil {
		return fmt.Errorf("bwrap restore %s: %w", id, err)
	}
	if name == "" {
		err = p.pool.Reset(pid)
	} else {
		err = p.pool.Restore(pid, name)
	}
	// The files, restored or not, are bound again.
	if berr := p.bindPool(id, pid); berr != nil {
		return fmt.Errorf("bwrap restore %s: %w", id, errors.Join(checkpoint.SandboxErr(err), berr))
	}
	if err != nil {
		return fmt.Errorf("bwrap restore %s: %w", id, checkpoint.SandboxErr(err))
	}
	if name == "" {
		// Empty files: the directories a sandbox has from the start.
		if err := p.makeDirs(id); err != nil {
			return fmt.Errorf("bwrap restore %s: %w", id, err)
		}
	}
	p.nsFailed.Delete(id)
	if running {
		m, err := p.readMeta(id)
		if err == nil {
			err = p.stageLocked(id, m)
		}
		if err != nil {
			return fmt.Errorf("bwrap restore %s: %w: %w", id, sandbox.ErrUnavailable, err)
		}
	}
	return nil
}

func (p *Provider) ForkCheckpoint(ctx context.Context, id, name, newID string) (err error) {
	pid, err := p.inPool(id)
	if err != nil {
		return err
	}
	if err := checkID(newID); err != nil {
		return err
	}
	m, err := p.readMeta(id)
	if err != nil {
		return fmt.Errorf("bwrap fork %s: %w", id, err)
	}
	if err := os.Mkdir(p.dir(newID), 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("bwrap fork %s: sandbox %s exists already", id, newID)
		}
		return fmt.Errorf("bwrap fork %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(p.dir(newID))
		}
	}()
	if err := p.pool.Fork(pid, name, newID, m.Limits.DiskGiB<<30); err != nil {
		return fmt.Errorf("bwrap fork %s: %w", id, checkpoint.SandboxErr(err))
	}
	// Stopped, with the mark: Ensure starts it on its files, with the
	// spec it is given (its labels, mounts and limits).
	for _, f := range []struct {
		path string
		data string
	}{{p.stoppedMark(newID), ""}, {p.poolMark(newID), newID + "\n"}} {
		if err := writeFileAtomic(f.path, []byte(f.data), 0o600); err != nil {
			_ = p.pool.Delete(newID)
			return fmt.Errorf("bwrap fork %s: %w", id, err)
		}
	}
	return nil
}

func (p *Provider) DropCheckpoint(ctx context.Context, id, name string) error {
	return p.files().Drop(id, name)
}

func (p *Provider) Checkpoints(ctx context.Context, id string) ([]sandbox.Checkpoint, error) {
	return p.files().List(id)
}

// makeDirs makes the writable directories of a sandbox whose files were
// emptied, and the mount points of its mounts in the workspace.
func (p *Provider) makeDirs(id string) error {
	dirs := []string{p.workspace(id), p.stateDir(id), p.homeDir(id)}
	if m, err := p.readMeta(id); err == nil {
		for _, mnt := range m.Mounts {
			dirs = append(dirs, filepath.Join(p.workspace(id), strings.TrimPrefix(mnt.Target, sandbox.WorkspaceDir+"/")))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

var _ sandbox.CheckpointSweeper = (*Provider)(nil)

// SweepCheckpoints removes what no sandbox owns any more and is older
// than old (R4): files and checkpoints in the pool that no sandbox's mark
// names, and the directory of a fork that stopped before it was whole
// (neither files nor a mark). An engine killed in the middle of a fork
// or a delete leaves them; a restore's or checkpoint's leftovers are the
// pool's own to sweep (checkpoint.Open). It returns how many it removed.
func (p *Provider) SweepCheckpoints(ctx context.Context, old time.Time) (int, error) {
	if p.cfg.CheckpointPool == "" {
		return 0, nil
	}
	if err := p.probe(); err != nil {
		return 0, err
	}
	n, err := p.files().Sweep(p.cfg.Root, p.poolMark, func(id string) bool {
		if made, err := p.exists(id); err != nil || made {
			return false
		}
		_, err := os.Stat(filepath.Join(p.dir(id), "meta.json"))
		return errors.Is(err, fs.ErrNotExist)
	}, old)
	if n > 0 {
		p.log().Info("bwrap: the checkpoint sweep removed what no sandbox owned", "count", n)
	}
	return n, err
}

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

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// Warm pool (B2). A member is a sandbox Ensure made with Spec.Pool: its
// meta says so, and with the agent its namespace is started at once, so
// that the chat adopting it runs its first command through the agent.
// Adopt renames what the member owns to the chat's id: its directory,
// its cgroups (cgroup v1 renames a group, its processes with it, within
// its hierarchy) and its egress socket. The namespace runs on through
// the renames: its binds hold the directories, not their paths, and its
// agent's socket answers at the new path.

var _ sandbox.Adopter = (*Provider)(nil)

// warmPoolMember starts the namespace of a pool member that has none. A
// namespace that does not start is logged, not returned: the member
// still runs commands, each in a bwrap of its own.
func (p *Provider) warmPoolMember(ctx context.Context, id string) {
	if !p.usesAgent() {
		return
	}
	m, err := p.readMeta(id)
	if err != nil || !m.Pool {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*agentStartup)
	defer cancel()
	conn, err := p.agentConn(ctx, id, m)
	switch {
	case errors.Is(err, errBackoff) || errors.Is(err, errNotRunning):
	case err != nil:
		p.log().Warn("bwrap: a pool member's namespace did not start; its commands run in a bwrap each", "sandbox", id, "err", err)
	default:
		conn.Close()
	}
}

// Adopt makes the running pool member poolID the sandbox spec.ID: its
// labels and mounts become spec's, and it is no longer a pool member.
func (p *Provider) Adopt(ctx context.Context, poolID string, spec sandbox.Spec) (err error) {
	id := spec.ID
	if err := checkID(poolID); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	if id == poolID {
		return fmt.Errorf("bwrap adopt %s: the pool member already has that id", id)
	}
	if err := p.probe(); err != nil {
		return fmt.Errorf("bwrap adopt %s: %w: %w", poolID, sandbox.ErrUnavailable, err)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return fmt.Errorf("bwrap adopt %s as %s: %w", poolID, id, err)
	}
	// Both names, always in the same order: two adoptions never wait on
	// each other. No Ensure, Stop, Delete or namespace start of either
	// runs meanwhile.
	first, second := poolID, id
	if second < first {
		first, second = second, first
	}
	unlockFirst, err := p.lockNamespace(first)
	if err != nil {
		return fmt.Errorf("bwrap adopt %s as %s: %w", poolID, id, err)
	}
	defer unlockFirst()
	unlockSecond, err := p.lockNamespace(second)
	if err != nil {
		return fmt.Errorf("bwrap adopt %s as %s: %w", poolID, id, err)
	}
	defer unlockSecond()

	switch st, err := p.Status(ctx, poolID); {
	case err != nil:
		return fmt.Errorf("bwrap adopt %s: %w", poolID, err)
	case st != sandbox.StatusRunning:
		return fmt.Errorf("bwrap adopt %s: %w: no running pool member (%s)", poolID, sandbox.ErrNotFound, st)
	}
	m, err := p.readMeta(poolID)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && !m.Pool:
		return fmt.Errorf("bwrap adopt %s: %w: not a pool member", poolID, sandbox.ErrNotFound)
	case err != nil:
		return fmt.Errorf("bwrap adopt %s: %w: read meta: %w", poolID, sandbox.ErrUnavailable, err)
	}
	// What the running member cannot change: a sandbox that isolates
	// less, or is limited otherwise, than the chat's spec asks.
	if m.Network != spec.Network || (len(m.Egress) > 0) != (len(spec.Egress) > 0) || m.Limits != p.cfg.limits(spec.Limits) {
		return fmt.Errorf("bwrap adopt %s as %s: the member has another shape (network %v, egress %v, limits %+v) than the spec (network %v, egress %v, limits %+v)",
			poolID, id, m.Network, len(m.Egress) > 0, m.Limits, spec.Network, len(spec.Egress) > 0, p.cfg.limits(spec.Limits))
	}
	if _, err := os.Lstat(p.dir(id)); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = errors.New("it exists")
		}
		return fmt.Errorf("bwrap adopt %s as %s: %w", poolID, id, err)
	}
	if p.cg.exists(id) {
		return fmt.Errorf("bwrap adopt %s as %s: its cgroups exist", poolID, id)
	}
	// Sources compared before anything moves: the member's writable
	// ones lead to the chat's through the caller's links.
	keep := sameMounts(m.Mounts, mounts)

	var undo sandbox.Cleanup
	defer func() {
		if err != nil {
			err = fmt.Errorf("bwrap adopt %s as %s: %w", poolID, id, errors.Join(err, undo.Run(context.WithoutCancel(ctx))))
		}
	}()

	// The member's egress socket goes with its directory; the proxy
	// serves it again under the new name below.
	if p.cfg.Egress != nil {
		if allow := p.cfg.Egress.Allowlist(poolID); allow != nil {
			if err := p.closeEgress(poolID); err != nil {
				return err
			}
			undo.Add("serve the member's egress again", func(context.Context) error {
				return p.cfg.Egress.Restore(poolID, filepath.Join(p.egressDir(poolID), egress.SocketName), allow)
			})
		}
	}
	if err := p.cg.rename(p.ctls, poolID, id); err != nil {
		return err
	}
	undo.Add("rename the cgroups back", func(context.Context) error { return p.cg.rename(p.ctls, id, poolID) })
	if err := renameNoReplace(p.dir(poolID), p.dir(id)); err != nil {
		return fmt.Errorf("rename the sandbox's directory: %w", err)
	}
	undo.Add("move the directory back", func(context.Context) error { return renameNoReplace(p.dir(id), p.dir(poolID)) })

	adopted := m
	adopted.Labels, adopted.Mounts, adopted.Pool = spec.Labels, mounts, false
	for _, mnt := range mounts {
		dir := filepath.Join(p.workspace(id), strings.TrimPrefix(mnt.Target, sandbox.WorkspaceDir+"/"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create the mount point of %s: %w", mnt.Target, err)
		}
	}
	if err := writeJSONAtomic(filepath.Join(p.dir(id), "meta.json"), adopted); err != nil {
		return err
	}
	undo.Add("restore the member's meta.json", func(context.Context) error { return writeJSONAtomic(filepath.Join(p.dir(id), "meta.json"), m) })
	if err := p.openEgress(id, spec); err != nil {
		return err
	}
	undo.Add("close the egress socket", func(context.Context) error { return p.closeEgress(id) })
	if !keep {
		// The namespace binds the member's mounts, not spec's: it ends
		// (nothing of a chat's runs in it yet), and the next command
		// starts one with spec's.
		if err := p.cg.killAll(id, 10*time.Second); err != nil {
			return fmt.Errorf("end the namespace with the member's mounts: %w", err)
		}
	}
	// A namespace start that failed moments ago holds for the new name.
	// A start in the background under the old name (startInBackground)
	// ends finding nothing to start; the next command starts another.
	if at, ok := p.nsFailed.LoadAndDelete(poolID); ok {
		p.nsFailed.Store(id, at)
	}
	// The member's stage shows the directory (mounts follow it, not its
	// name): it moves to the new name, unless the mounts changed, when
	// the next command stages it anew.
	if err := p.moveStage(poolID, id, keep); err != nil {
		p.log().Warn("bwrap: move a pool member's stage", "sandbox", poolID, "err", err)
	}
	return nil
}

// sameMounts reports whether a namespace made with the mounts have shows
// what want asks for: the same targets, read-only the same way, from the
// same directories (followed through links).
func sameMounts(have, want []sandbox.Mount) bool {
	if len(have) != len(want) {
		return false
	}
	byTarget := map[string]sandbox.Mount{}
	for _, m := range have {
		byTarget[m.Target] = m
	}
	for _, w := range want {
		h, ok := byTarget[w.Target]
		if !ok || h.ReadOnly != w.ReadOnly {
			return false
		}
		hfi, err := os.Stat(h.Source)
		if err != nil {
			return false
		}
		wfi, err := os.Stat(w.Source)
		if err != nil || !os.SameFile(hfi, wfi) {
			return false
		}
	}
	return true
}

// renameNoReplace renames a directory, failing when newPath exists (a
// plain rename replaces an empty directory there).
func renameNoReplace(oldPath, newPath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldPath, unix.AT_FDCWD, newPath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without the flag: os.Rename refuses an existing
		// directory, if with a moment between its check and the rename.
		return os.Rename(oldPath, newPath)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldPath, New: newPath, Err: err}
	}
	return nil
}

package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/diskimage"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// keepAlive is the container's main process when there is no agent.
// Under the init process that Docker adds (Init: true), SIGTERM reaches it
// directly and ends it at once, so a stop does not wait out the grace
// period; the agent, in its place, kills its commands and exits.
var keepAlive = []string{"sleep", "2147483647"}

// Ensure implements sandbox.Provider: missing → create and start, stopped
// → start, paused → unpause, running → nothing. Concurrent calls, also
// from other processes, leave exactly one container: the daemon refuses a
// second container of the same name, and the loser starts the winner's.
// An existing container keeps the image, limits and mounts it was created
// with, and its network or egress forwarder; the egress allowlist is the
// spec's, served by Config.Egress from here on. The spec's mounts are
// checked on every call all the same.
func (p *Provider) Ensure(ctx context.Context, spec sandbox.Spec) error {
	id := spec.ID
	if err := checkID(id); err != nil {
		return err
	}
	if err := p.checkEgress(spec); err != nil {
		return p.ensureErr(id, err)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		// The caller's mistake: retrying will not help, so it is not
		// ErrUnavailable.
		return fmt.Errorf("ensure sandbox %s: %w", id, err)
	}
	spec.Mounts = mounts
	if p.adoptedAway(id) {
		// Its directory is the link an adoption left for the adopting
		// sandbox's container: a sandbox made here would share its
		// files. Not ErrUnavailable: retrying will not help.
		return fmt.Errorf("ensure sandbox %s: the id was a warm pool member's, adopted by another sandbox; it cannot be used again", id)
	}
	if err := p.ensure(ctx, spec); err != nil {
		return err
	}
	if err := p.openEgress(spec); err != nil {
		return p.ensureErr(id, err)
	}
	return nil
}

func (p *Provider) ensure(ctx context.Context, spec sandbox.Spec) error {
	id := spec.ID
	res, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return p.create(ctx, spec)
	case err != nil:
		return p.ensureErr(id, p.apiErr("inspect", err))
	}
	if err := p.leaveNetworks(ctx, id, res.Container); err != nil {
		return p.ensureErr(id, err)
	}
	switch stateOf(res.Container) {
	case container.StateRunning:
		return nil
	case container.StatePaused:
		if _, err := p.cli.ContainerUnpause(ctx, res.Container.ID, client.ContainerUnpauseOptions{}); err != nil {
			return p.ensureErr(id, p.apiErr("unpause", err))
		}
		return nil
	case container.StateDead:
		// A container the daemon failed to remove: finish the removal and
		// start afresh; the files are on the host and stay.
		if _, err := p.cli.ContainerRemove(ctx, res.Container.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return p.ensureErr(id, p.apiErr("remove the dead container", err))
		}
		return p.create(ctx, spec)
	case container.StateRemoving:
		return p.ensureErr(id, fmt.Errorf("it is being deleted: %w", sandbox.ErrUnavailable))
	}
	// created, exited, restarting: the bind-mounted directories must exist
	// for the start to succeed, the workspace's filesystem mounted (after
	// a reboot of the host).
	if err := p.makeDirs(id); err != nil {
		return p.ensureErr(id, err)
	}
	if err := diskimage.Ensure(p.diskImage(id), p.workspaceDir(id), 0); err != nil {
		return p.ensureErr(id, err)
	}
	if pid, ok := p.poolID(id); ok {
		if err := p.bindPool(id, pid); err != nil {
			return p.ensureErr(id, err)
		}
	}
	if err := p.start(ctx, id); err != nil {
		return p.ensureErr(id, err)
	}
	return nil
}

// ensureErr marks every Ensure failure as ErrUnavailable (the agent may
// retry), keeping ErrNotFound and context errors recognisable.
func (p *Provider) ensureErr(id string, err error) error {
	if errors.Is(err, sandbox.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("ensure sandbox %s: %w", id, err)
	}
	return fmt.Errorf("ensure sandbox %s: %w: %w", id, sandbox.ErrUnavailable, err)
}

// start starts the container. A second start of a running container is a
// no-op for the daemon (304). The container may not be visible yet when
// another process's create is still in flight, so a missing container is
// retried for a short while.
func (p *Provider) start(ctx context.Context, id string) error {
	const attempts = 20
	for i := 0; ; i++ {
		if p.agent != "" {
			if err := p.handTokenOver(id); err != nil {
				return err
			}
		}
		_, err := p.cli.ContainerStart(ctx, ContainerName(id), client.ContainerStartOptions{})
		if cerrdefs.IsNotModified(err) {
			p.withdrawToken(id)
		}
		if err == nil || cerrdefs.IsNotModified(err) {
			return nil
		}
		if !cerrdefs.IsNotFound(err) || i == attempts-1 {
			return p.apiErr("start", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hostDirs are the sandbox's host directories, parents first. The
// agent's is private: whoever can connect to its socket runs commands.
func (p *Provider) hostDirs(id string, withAgent bool) []hostDir {
	dirs := []hostDir{{p.hostDir(id), 0o755}, {p.workspaceDir(id), 0o755}, {p.stateDir(id), 0o755}, {p.egressDir(id), 0o755}}
	if withAgent {
		dirs = append(dirs, hostDir{p.agentDir(id), 0o700})
	}
	return dirs
}

type hostDir struct {
	path string
	mode os.FileMode
}

// makeDirs creates the sandbox's host directories if they are missing:
// the agent's too, since the container may have been created with an
// agent whatever this provider's configuration.
func (p *Provider) makeDirs(id string) error {
	for _, dir := range p.hostDirs(id, true) {
		if err := os.MkdirAll(dir.path, dir.mode); err != nil {
			return fmt.Errorf("create the sandbox's directory: %w", err)
		}
	}
	return nil
}

// create creates and starts the container of spec. On failure it undoes
// what it did, in reverse order. When another caller created the container
// first, create starts that one instead.
func (p *Provider) create(ctx context.Context, spec sandbox.Spec) (err error) {
	id := spec.ID
	var undo sandbox.Cleanup
	defer func() {
		if err == nil {
			return
		}
		// Undo even when ctx is what failed.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if uerr := undo.Run(uctx); uerr != nil {
			p.log.Warn("sandbox creation was not fully rolled back", "sandbox", id, "err", uerr)
			err = errors.Join(err, fmt.Errorf("roll back: %w", uerr))
		}
		err = p.ensureErr(id, err)
	}()

	gvisor, err := p.runtime(ctx)
	if err != nil {
		return err
	}

	// Directories: remember the ones this call created. The rollback
	// removes them only while empty, so it never deletes files another
	// caller's sandbox put there meanwhile. The root itself is shared and
	// stays.
	if err := os.MkdirAll(p.cfg.WorkspaceRoot, 0o755); err != nil {
		return fmt.Errorf("create the workspace root: %w", err)
	}
	// Files in the checkpoint pool for a sandbox whose directory is new,
	// or that a fork made (its mark names them); not for one that kept
	// its files when its container went, which would hide them.
	_, statErr := os.Lstat(p.hostDir(id))
	_, forked := p.poolID(id)
	onPool := p.pool != nil && (errors.Is(statErr, os.ErrNotExist) || forked)
	for _, d := range p.hostDirs(id, p.agent != "") {
		dir := d.path
		if _, serr := os.Lstat(dir); serr == nil {
			continue
		}
		if err := os.Mkdir(dir, d.mode); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create the sandbox's directory: %w", err)
		}
		undo.Add("remove "+dir, func(context.Context) error {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) && !isNotEmpty(err) {
				return err
			}
			return nil
		})
	}

	// A disk limit: the workspace on a filesystem of that size (package
	// diskimage), or the files' quota in the checkpoint pool, mounted
	// before the container binds the directories.
	gib := spec.Limits.Or(p.cfg.DefaultLimits).DiskGiB
	if onPool {
		if !forked {
			undo.Add("delete the files from the checkpoint pool", func(context.Context) error {
				return errors.Join(p.unbindPool(id, true), p.pool.Delete(id), ignoreMissing(os.Remove(p.poolMark(id))))
			})
		} else {
			undo.Add("unbind the files from the checkpoint pool", func(context.Context) error { return p.unbindPool(id, true) })
		}
		if err := p.mountPool(id, gib<<30); err != nil {
			return err
		}
	} else if gib > 0 {
		if d := p.cfg.DaemonWorkspaceRoot; d != "" && filepath.Clean(d) != filepath.Clean(p.cfg.WorkspaceRoot) {
			return fmt.Errorf("a %d GiB disk limit needs the engine on the Docker daemon's host, which would not see the workspace's filesystem "+
				"(FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT is set); leave FLOWBOX_SANDBOX_DISK_GIB unset here", gib)
		}
		img := p.diskImage(id)
		undo.Add("remove the workspace's image", func(context.Context) error {
			return errors.Join(ignoreMissing(os.Remove(img)), ignoreMissing(os.Remove(img+".lock")))
		})
		if err := diskimage.Ensure(img, p.workspaceDir(id), gib); err != nil {
			return err
		}
		undo.Add("unmount the workspace", func(context.Context) error { return diskimage.Unmount(p.workspaceDir(id)) })
	}

	created, err := p.cli.ContainerCreate(ctx, p.createOptions(spec, gvisor))
	if cerrdefs.IsConflict(err) {
		// Another caller, maybe another engine, created it: use theirs.
		undo.Forget()
		return p.start(ctx, id)
	}
	if err != nil {
		err = p.apiErr("create the container", err)
		if strings.Contains(err.Error(), "bind source path does not exist") {
			// The daemon looked where this process sees the directory.
			err = fmt.Errorf("%w; when the engine runs in a container, tell it where the daemon sees its directories (FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT, FLOWBOX_DOCKER_DAEMON_FILES_DIR)", err)
		}
		return err
	}
	for _, w := range created.Warnings {
		p.log.Warn("docker warned while creating a sandbox", "sandbox", id, "warning", w)
	}
	undo.Add("remove the container", func(ctx context.Context) error {
		_, err := p.cli.ContainerRemove(ctx, created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return err
	})
	// Written by the creator only: a container is created once.
	if err := p.writeRecord(id, record{Mounts: spec.Mounts}); err != nil {
		return err
	}
	undo.Add("remove the sandbox's record", func(context.Context) error {
		return ignoreMissing(os.Remove(filepath.Join(p.hostDir(id), recordFile)))
	})
	if p.agent != "" {
		if err := p.handTokenOver(id); err != nil {
			return err
		}
	}
	if _, err := p.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil && !cerrdefs.IsNotModified(err) {
		return p.apiErr("start the container", err)
	}
	return nil
}

// diskImage is the sandbox's workspace image, when it has a disk limit:
// beside its directories, out of the container's reach.
func (p *Provider) diskImage(id string) string { return filepath.Join(p.hostDir(id), "workspace.img") }

// ignoreMissing is err unless it says the file was not there.
func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

// createOptions are the container of spec's, under gVisor if gvisor.
func (p *Provider) createOptions(spec sandbox.Spec, gvisor bool) client.ContainerCreateOptions {
	id := spec.ID
	lim := spec.Limits.Or(p.cfg.DefaultLimits)
	labels := map[string]string{LabelManaged: "true", LabelSandbox: id}
	for k, v := range ownerLabels(spec.Labels) {
		labels[LabelPrefix+k] = v
	}
	if spec.Pool {
		labels[LabelPoolMember] = "true"
	}
	// No Docker network, ever (T1): the default bridge's gateway is the
	// host, whose services bound to all addresses and whose private
	// networks a container on it reaches. A sandbox with the network
	// goes out as one with an allowlist does, through the forwarder
	// below and the engine's egress proxy, which serves it any public
	// host and nothing else (see network.go).
	network := container.NetworkMode("none")
	if spec.Network {
		labels[LabelNetwork] = "full"
	}
	mem := lim.MemoryMiB << 20
	// Under gVisor the agent is PID 1 itself: runsc (20221219) lets only
	// the main thread of PID 1 become a child subreaper, as the agent
	// does (cmd/engine runs it there); PID 1 gets the orphans anyway,
	// and the agent ends on SIGTERM by itself.
	init := !gvisor || p.agent == ""
	stopSecs := int((p.cfg.StopTimeout + time.Second - 1) / time.Second)
	cmd := keepAlive
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: filepath.Join(p.cfg.DaemonWorkspaceRoot, id, "workspace"), Target: sandbox.WorkspaceDir},
		{Type: mount.TypeBind, Source: filepath.Join(p.cfg.DaemonWorkspaceRoot, id, "state"), Target: sandbox.StateDir},
	}
	// The daemon orders the binds by target, so these land inside the
	// workspace's. They are the container's for good: a container created
	// before sandboxes had mounts has none, and it is not recreated to get
	// them, which would lose what commands changed outside /workspace
	// (installed packages).
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: daemonPath(p.cfg.DaemonPaths, m.Source), Target: m.Target, ReadOnly: m.ReadOnly})
	}
	var env []string
	if p.agent != "" {
		cmd = agentCmd(p.cfg.Shell)
		mounts = append(mounts,
			mount.Mount{Type: mount.TypeBind, Source: p.agent, Target: agentPath, ReadOnly: true},
			mount.Mount{Type: mount.TypeBind, Source: filepath.Join(p.cfg.DaemonWorkspaceRoot, id, "agent"), Target: agentRunDir},
		)
		if len(spec.Egress) > 0 || spec.Network {
			// The agent forwards egress.ListenAddr to the proxy's socket,
			// which the sandbox cannot replace: its directory is read-only.
			cmd = append(cmd, "-egress-socket", egress.SocketPath)
			env = egress.Env()
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: filepath.Join(p.cfg.DaemonWorkspaceRoot, id, "egress"), Target: egress.SocketDir, ReadOnly: true})
		}
	}
	return client.ContainerCreateOptions{
		Name: ContainerName(id),
		Config: &container.Config{
			Image:      p.cfg.Image,
			Hostname:   "sandbox",
			Labels:     labels,
			WorkingDir: sandbox.WorkspaceDir,
			// An image's entrypoint would wrap the main process;
			// sandboxes run none. [""] is the API's way to say "no
			// entrypoint".
			Entrypoint:  []string{""},
			Cmd:         cmd,
			Env:         env,
			StopTimeout: &stopSecs,
		},
		HostConfig: &container.HostConfig{
			Runtime:     p.cfg.Runtime,
			NetworkMode: network,
			CapDrop:     []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"},
			Init:        &init,
			Resources: container.Resources{
				Memory:     mem,
				MemorySwap: mem, // equal to Memory: no swap
				NanoCPUs:   int64(lim.CPUCount * 1e9),
				PidsLimit:  &lim.Pids,
			},
			Mounts:    mounts,
			LogConfig: container.LogConfig{Type: "none"},
		},
	}
}

package bwrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// Disk limits (S10, T4): a sandbox whose limits give DiskGiB has every
// writable path it keeps on one image of that size (package diskimage):
// the workspace (/workspace), the shell's state (/.flowbox) and the home
// (/root) are directories in it, so that what a command writes anywhere
// it can write stops at the limit with "No space left on device" and the
// engine's data disk stays untouched. /tmp is a tmpfs of
// Config.TmpSizeMiB, in memory (charged to the sandbox's memory group);
// /dev is bwrap's small tmpfs, likewise in memory. The image is made
// when the sandbox is created, mounted by Ensure and kept mounted while
// the sandbox is stopped, so that its files stay reachable; Delete
// unmounts it before removing the sandbox.
//
// Layouts of <Root>/<id>:
//
//	disk.img, disk/{workspace,state,home}  a disk limit (sandboxes made since T4)
//	workspace.img, workspace/, state/, home/  a disk limit on the workspace alone
//	                                          (sandboxes made before T4; kept as they are)
//	workspace/, state/, home/                 no disk limit: host directories
//
// A sandbox keeps the layout it was made with: its state and home are
// never moved under a running namespace.

// diskImage is the image of a sandbox made with a disk limit, mounted on
// diskDir.
func (p *Provider) diskImage(id string) string { return filepath.Join(p.dir(id), "disk.img") }
func (p *Provider) diskDir(id string) string   { return filepath.Join(p.dir(id), "disk") }

// legacyImage is the workspace-only image of sandboxes made before T4,
// mounted on <dir>/workspace.
func (p *Provider) legacyImage(id string) string { return filepath.Join(p.dir(id), "workspace.img") }

// onImage reports whether the sandbox's writable directories live on its
// disk image (disk.img): decided by the image file, which exists whether
// or not it is mounted.
func (p *Provider) onImage(id string) bool {
	_, err := os.Stat(p.diskImage(id))
	return err == nil
}

// base is the directory that holds the sandbox's workspace, state and
// home directories.
func (p *Provider) base(id string) string {
	if p.onImage(id) || p.onPool(id) {
		return p.diskDir(id)
	}
	return p.dir(id)
}

func (p *Provider) workspace(id string) string { return filepath.Join(p.base(id), "workspace") }
func (p *Provider) stateDir(id string) string  { return filepath.Join(p.base(id), "state") }
func (p *Provider) homeDir(id string) string   { return filepath.Join(p.base(id), "home") }

// exists reports whether the sandbox has been made: its workspace, or
// its disk image (whose directories are out of sight until it is
// mounted again, after a reboot).
func (p *Provider) exists(id string) (bool, error) {
	for _, path := range []string{p.diskImage(id), filepath.Join(p.dir(id), "workspace"), p.poolMark(id)} {
		_, err := os.Stat(path)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// mountDisk mounts the sandbox's image, making it first for a new
// sandbox with a disk limit (gib > 0), or its files in the checkpoint
// pool, put there when the sandbox is fresh and there is a pool; and then
// makes the writable directories (on the image or in the pool when there
// is one). Directories are made after the mount: made before, they would
// be on the host's disk, hidden under it.
func (p *Provider) mountDisk(id string, gib int64, fresh bool) error {
	switch {
	case (fresh && p.pool != nil) || p.onPool(id):
		if err := p.mountPool(id, gib<<30, fresh); err != nil {
			return err
		}
	case gib > 0 || p.onImage(id):
		if err := os.MkdirAll(p.diskDir(id), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", p.diskDir(id), err)
		}
		if err := diskimage.Ensure(p.diskImage(id), p.diskDir(id), gib); err != nil {
			return err
		}
	default:
		// A sandbox of before T4 with its workspace image, or none.
		if err := os.MkdirAll(filepath.Join(p.dir(id), "workspace"), 0o755); err != nil {
			return fmt.Errorf("create the workspace: %w", err)
		}
		if err := diskimage.Ensure(p.legacyImage(id), filepath.Join(p.dir(id), "workspace"), 0); err != nil {
			return err
		}
	}
	for _, d := range []string{p.workspace(id), p.stateDir(id), p.homeDir(id)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// unmountDisk unmounts whichever image the sandbox has, or its files'
// mount from the checkpoint pool; what uses it must be gone.
func (p *Provider) unmountDisk(id string) error {
	return errors.Join(diskimage.Unmount(p.diskDir(id)), diskimage.Unmount(filepath.Join(p.dir(id), "workspace")))
}

package bwrap

import (
	"path/filepath"

	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// Disk limits (S10): a sandbox whose limits give DiskGiB has its
// workspace on an image of that size (package diskimage), made when the
// sandbox is created, mounted by Ensure and kept mounted while the
// sandbox is stopped, so that its files stay reachable; Delete unmounts
// it before removing the sandbox.

func (p *Provider) diskImage(id string) string { return filepath.Join(p.dir(id), "workspace.img") }

// mountWorkspace mounts the workspace image, making it for a new
// sandbox with a disk limit (gib > 0).
func (p *Provider) mountWorkspace(id string, gib int64) error {
	return diskimage.Ensure(p.diskImage(id), p.workspace(id), gib)
}

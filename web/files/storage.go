package files

import (
	"context"
	"path"
	"strings"

	"github.com/flowbox/flowbox/sandbox"
)

// Storage is what every door that writes a chat's files checks first
// (T4): the engine's data disk has room, and a write into the chat's
// uploads or intermediate files stays within the chat's quota, whichever
// route it comes by (the upload route, the file API, the service API).
type Storage struct {
	// Disk refuses writes while the data disk is low; nil: no guard.
	Disk interface{ Check() error }
	// Quota says whether size more bytes fit in the chat's quota
	// (workspace.Store.Fits); nil: no quota.
	Quota interface {
		Fits(ctx context.Context, scope sandbox.Scope, name string, size int64) error
	}
}

// CheckWrite returns why size bytes may not be written at p (as the
// sandbox sees it, or relative to /workspace) in scope's workspace: a
// *datadisk.LowError, or a quota error matching sandbox.ErrTooLarge when
// p is in uploads or intermediate.
func (s Storage) CheckWrite(ctx context.Context, scope sandbox.Scope, p string, size int64) error {
	if s.Disk != nil {
		if err := s.Disk.Check(); err != nil {
			return err
		}
	}
	if s.Quota == nil || !inChatFiles(p) {
		return nil
	}
	return s.Quota.Fits(ctx, scope, path.Base(p), size)
}

// inChatFiles reports whether p is in the chat's uploads or intermediate
// files, which the chat quota covers.
func inChatFiles(p string) bool {
	rel, err := sandbox.WorkspaceRel(p)
	if err != nil {
		return false
	}
	for _, dir := range []string{sandbox.UploadsDir, sandbox.IntermediateDir} {
		area := strings.TrimPrefix(dir, sandbox.WorkspaceDir+"/")
		if rel == area || strings.HasPrefix(rel, area+"/") {
			return true
		}
	}
	return false
}

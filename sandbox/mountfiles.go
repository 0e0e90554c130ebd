package sandbox

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
)

// The file operations on a mount (the chat's uploads and intermediate
// files, the skills) are served from its host directory: they need no
// running sandbox, and they see the files the sandbox sees whichever
// provider runs it. They still pass the whole chain (policy, redaction,
// audit) like the rest of /workspace.

// mountFor returns the mount whose target holds p, if any.
func (m *Manager) mountFor(ctx context.Context, scope Scope, p string) (Mount, bool, error) {
	if m.cfg.MountsFor == nil {
		return Mount{}, false, nil
	}
	rel, err := WorkspaceRel(p)
	if err != nil {
		return Mount{}, false, err
	}
	mounts, err := m.cfg.MountsFor(ctx, scope)
	if err != nil {
		return Mount{}, false, fmt.Errorf("%w: prepare the sandbox's directories: %w", ErrUnavailable, err)
	}
	for _, mt := range mounts {
		at := strings.TrimPrefix(mt.Target, WorkspaceDir+"/")
		if rel == at || strings.HasPrefix(rel, at+"/") {
			return mt, true, nil
		}
	}
	return Mount{}, false, nil
}

// mountFile runs a file operation on a mount's host directory.
func mountFile(ctx context.Context, mt Mount, call *FileCall) (FileResult, error) {
	files := DirFiles{Dir: mt.Source, At: mt.Target}
	var r FileResult
	var err error
	switch call.Op {
	case FileList:
		r.Entries, err = files.List(ctx, call.Path)
	case FileStat:
		r.Info, err = files.Stat(ctx, call.Path)
	case FileRead:
		r.Data, err = files.ReadFile(ctx, call.Path, call.Max)
	case FileOpen:
		r.Reader, r.Info, err = files.Open(ctx, call.Path)
	case FileWrite:
		if mt.ReadOnly {
			return r, fmt.Errorf("write %s: %w: %s is read-only for everyone, the sandbox included; write to %s instead", call.Path, ErrReadOnly, mt.Target, IntermediateDir)
		}
		err = files.WriteFile(ctx, call.Path, call.Data)
	case FileZip:
		err = files.Zip(ctx, call.Path, call.Writer)
	default:
		err = fmt.Errorf("file operation %q: %w", call.Op, ErrUnsupported)
	}
	return r, err
}

// withMounts adds to a listing of /workspace the mounts it lacks (a
// sandbox created before they existed, or whose provider shows no
// mountpoints), so that they can be browsed.
func (m *Manager) withMounts(ctx context.Context, scope Scope, entries []FileInfo) []FileInfo {
	if m.cfg.MountsFor == nil {
		return entries
	}
	mounts, err := m.cfg.MountsFor(ctx, scope)
	if err != nil {
		return entries
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Path] = true
	}
	for _, mt := range mounts {
		if path.Dir(mt.Target) == WorkspaceDir && !have[mt.Target] {
			entries = append(entries, FileInfo{Name: path.Base(mt.Target), Path: mt.Target, Type: "directory"})
		}
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if (entries[i].Type == "directory") != (entries[j].Type == "directory") {
			return entries[i].Type == "directory"
		}
		return entries[i].Name < entries[j].Name
	})
	return entries
}

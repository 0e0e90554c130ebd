package sandbox

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
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
	if i := mountIndex(mounts, rel); i >= 0 {
		return mounts[i], true, nil
	}
	return Mount{}, false, nil
}

// mountAt returns the index of the mount whose target holds p, or -1.
func mountAt(mounts []Mount, p string) (int, error) {
	rel, err := WorkspaceRel(p)
	if err != nil {
		return -1, err
	}
	return mountIndex(mounts, rel), nil
}

// mountIndex returns the index of the mount whose target holds rel (a
// path relative to /workspace), or -1.
func mountIndex(mounts []Mount, rel string) int {
	for i, mt := range mounts {
		at := strings.TrimPrefix(mt.Target, WorkspaceDir+"/")
		if rel == at || strings.HasPrefix(rel, at+"/") {
			return i
		}
	}
	return -1
}

// mountFile runs a file operation on a mount's host directory.
func mountFile(ctx context.Context, mt Mount, call *FileCall) (FileResult, error) {
	files := DirFiles{Dir: mt.Source, At: mt.Target}
	var r FileResult
	var err error
	switch call.Op {
	case FileList:
		r.Entries, err = files.List(ctx, call.Path)
		markReadOnly(mt, r.Entries)
	case FileStat:
		r.Info, err = files.Stat(ctx, call.Path)
		r.Info.ReadOnly = mt.ReadOnly && err == nil
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

// markReadOnly marks the entries of a read-only mount (the skills) as
// such, for listings to show (E4).
func markReadOnly(mt Mount, entries []FileInfo) {
	if !mt.ReadOnly {
		return
	}
	for i := range entries {
		entries[i].ReadOnly = true
	}
}

// zip writes the ZIP of p: the sandbox's files with, inside p, the
// mounts' files from their host directories (E4).
func (m *Manager) zip(ctx context.Context, scope Scope, files Files, p string, w io.Writer) error {
	if m.cfg.MountsFor == nil {
		return files.Zip(ctx, p, w)
	}
	mounts, err := m.cfg.MountsFor(ctx, scope)
	if err != nil {
		return fmt.Errorf("%w: prepare the sandbox's directories: %w", ErrUnavailable, err)
	}
	return zipWithMounts(ctx, files, p, mounts, w)
}

// withMounts shows, in a listing of the directory at p, the mounts in it
// as their host directories are (E4): the mount point the provider shows
// is replaced, and one it lacks (a sandbox created before the mounts
// existed, or whose provider shows no mountpoints) is added, so that they
// can be browsed; a read-only mount's entry says so.
func (m *Manager) withMounts(ctx context.Context, scope Scope, p string, entries []FileInfo) []FileInfo {
	if m.cfg.MountsFor == nil {
		return entries
	}
	rel, err := WorkspaceRel(p)
	if err != nil {
		return entries
	}
	mounts, err := m.cfg.MountsFor(ctx, scope)
	if err != nil {
		return entries
	}
	dir := path.Join(WorkspaceDir, rel)
	at := map[string]int{}
	for i, e := range entries {
		at[e.Path] = i
	}
	for _, mt := range mounts {
		if path.Dir(mt.Target) != dir {
			continue
		}
		e := FileInfo{Name: path.Base(mt.Target), Path: mt.Target, Type: "directory", ReadOnly: mt.ReadOnly}
		if fi, err := os.Stat(mt.Source); err == nil {
			e.Size, e.ModTime = fi.Size(), fi.ModTime().UTC()
		}
		if i, ok := at[mt.Target]; ok {
			entries[i] = e
		} else {
			entries = append(entries, e)
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

// MountedFiles is a sandbox's /workspace as its commands see it, for a
// provider's Files: the workspace directory, and under each mount's
// target the mount's source (in the workspace directory a mount point is
// an empty directory).
type MountedFiles struct {
	Workspace Files
	Mounts    []Mount
}

var _ Files = MountedFiles{}

// at returns the files that hold p and p's mount, if it is in one.
func (f MountedFiles) at(p string) (Files, *Mount, error) {
	i, err := mountAt(f.Mounts, p)
	if err != nil || i < 0 {
		return f.Workspace, nil, err
	}
	m := &f.Mounts[i]
	return DirFiles{Dir: m.Source, At: m.Target}, m, nil
}

func (f MountedFiles) List(ctx context.Context, p string) ([]FileInfo, error) {
	files, m, err := f.at(p)
	if err != nil {
		return nil, err
	}
	entries, err := files.List(ctx, p)
	if m != nil {
		markReadOnly(*m, entries)
	}
	return entries, err
}

func (f MountedFiles) Stat(ctx context.Context, p string) (FileInfo, error) {
	files, m, err := f.at(p)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := files.Stat(ctx, p)
	fi.ReadOnly = m != nil && m.ReadOnly && err == nil
	return fi, err
}

func (f MountedFiles) Open(ctx context.Context, p string) (io.ReadCloser, FileInfo, error) {
	files, _, err := f.at(p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return files.Open(ctx, p)
}

func (f MountedFiles) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	files, _, err := f.at(p)
	if err != nil {
		return nil, err
	}
	return files.ReadFile(ctx, p, max)
}

func (f MountedFiles) WriteFile(ctx context.Context, p string, data []byte) error {
	files, m, err := f.at(p)
	if err != nil {
		return err
	}
	if m != nil && m.ReadOnly {
		return fmt.Errorf("write %s: %w: %s is mounted read-only", p, ErrReadOnly, m.Target)
	}
	return files.WriteFile(ctx, p, data)
}

// Zip archives p; a directory holding mounts holds their files, but
// the read-only ones' (E4).
func (f MountedFiles) Zip(ctx context.Context, p string, w io.Writer) error {
	files, m, err := f.at(p)
	if err != nil {
		return err
	}
	if m != nil {
		return files.Zip(ctx, p, w)
	}
	return zipWithMounts(ctx, f.Workspace, p, f.Mounts, w)
}

// zipInto adds p to zw as the sandbox sees it, leaving out skip: the
// manager, which passes the mounts it knows as skip, adds them itself.
func (f MountedFiles) zipInto(ctx context.Context, zw *zip.Writer, p, prefix string, skip []string) error {
	files, _, err := f.at(p)
	if err != nil {
		return err
	}
	if a, ok := files.(zipAdder); ok {
		return a.zipInto(ctx, zw, p, prefix, skip)
	}
	return zipCopy(ctx, files, p, zw, prefix, skip)
}

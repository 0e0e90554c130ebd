package sandbox

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// A ZIP of a directory that holds mounts (E4) holds the writable mounts'
// files at their paths (uploads/..., intermediate/...), read from their
// host directories through os.Root like every other file operation on a
// mount, whatever the provider: in the workspace directory of bwrap and
// Docker a mount point is an empty directory, and the Kubernetes agent
// would archive them from inside the sandbox. The read-only mounts (the
// skills) are left out: they are the same for every chat, installed by
// admins, not the chat's work.

// ZipSkipper is implemented by Files whose Zip can leave out directories,
// given relative to the archived path: the mount points, whose files the
// manager adds from the host itself.
type ZipSkipper interface {
	ZipSkipping(ctx context.Context, path string, w io.Writer, skip []string) error
}

// zipAdder is implemented by the Files that add a directory's entries to
// an archive being written, so that it streams.
type zipAdder interface {
	zipInto(ctx context.Context, zw *zip.Writer, p, prefix string, skip []string) error
}

var (
	_ ZipSkipper = DirFiles{}
	_ zipAdder   = DirFiles{}
	_ zipAdder   = MountedFiles{}
)

// mountsUnder returns the mounts strictly inside rel (a path relative to
// /workspace), with their targets relative to rel.
func mountsUnder(mounts []Mount, rel string) ([]Mount, []string) {
	var inner []Mount
	var paths []string
	for _, mt := range mounts {
		at := strings.TrimPrefix(mt.Target, WorkspaceDir+"/")
		sub := at
		if rel != "." {
			var ok bool
			if sub, ok = strings.CutPrefix(at, rel+"/"); !ok {
				continue
			}
		}
		inner = append(inner, mt)
		paths = append(paths, sub)
	}
	return inner, paths
}

// zipWithMounts writes to w the ZIP of p as files has it, with the mounts
// inside p replaced by their host directories' files, the read-only ones
// left out.
func zipWithMounts(ctx context.Context, files Files, p string, mounts []Mount, w io.Writer) error {
	rel, err := WorkspaceRel(p)
	if err != nil {
		return err
	}
	inner, skip := mountsUnder(mounts, rel)
	if len(inner) == 0 {
		return files.Zip(ctx, p, w)
	}
	base := path.Base(path.Join(WorkspaceDir, rel))
	zw := zip.NewWriter(w)
	if a, ok := files.(zipAdder); ok {
		err = a.zipInto(ctx, zw, p, base, skip)
	} else {
		err = zipCopy(ctx, files, p, zw, base, skip)
	}
	if err != nil {
		return err
	}
	for i, mt := range inner {
		if mt.ReadOnly {
			continue
		}
		mf := DirFiles{Dir: mt.Source, At: mt.Target}
		if err := mf.zipInto(ctx, zw, mt.Target, base+"/"+skip[i], nil); err != nil {
			return err
		}
	}
	return zw.Close()
}

// zipCopy adds to zw the entries of files' own ZIP of p, but those under
// skip. The archive is spooled to an unlinked temporary file, since a ZIP
// is read from its end. A Files that cannot skip (an older Kubernetes
// agent) sends the mounts, and they are dropped here; so are entries named
// outside base, which an archive made in the sandbox could hold.
func zipCopy(ctx context.Context, files Files, p string, zw *zip.Writer, base string, skip []string) error {
	tmp, err := os.CreateTemp("", "flowbox-zip-*")
	if err != nil {
		return fmt.Errorf("zip %s: spool the sandbox's archive: %w", p, err)
	}
	_ = os.Remove(tmp.Name())
	defer tmp.Close()
	if s, ok := files.(ZipSkipper); ok {
		err = s.ZipSkipping(ctx, p, tmp, skip)
	} else {
		err = files.Zip(ctx, p, tmp)
	}
	if err != nil {
		return err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("zip %s: %w", p, err)
	}
	zr, err := zip.NewReader(tmp, size)
	if err != nil {
		return fmt.Errorf("zip %s: the sandbox's archive is not a ZIP: %w", p, err)
	}
	for _, f := range zr.File {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !zipNameKept(f.Name, base, skip) {
			continue
		}
		if err := zw.Copy(f); err != nil {
			return fmt.Errorf("zip %s: %w", p, err)
		}
	}
	return nil
}

// zipNameKept says whether an archive entry belongs in the ZIP: under
// base, with no ".." nor empty segment, and not under skip.
func zipNameKept(name, base string, skip []string) bool {
	name = strings.TrimSuffix(name, "/")
	if name != base && !strings.HasPrefix(name, base+"/") {
		return false
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	for _, s := range skip {
		at := base + "/" + s
		if name == at || strings.HasPrefix(name, at+"/") {
			return false
		}
	}
	return true
}

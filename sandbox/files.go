package sandbox

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WorkspaceRel turns a path given by a user or the model into a path
// relative to /workspace ("." for /workspace itself). It accepts paths
// relative to /workspace and absolute paths inside it, and refuses "..",
// NUL bytes and anything outside /workspace.
func WorkspaceRel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: the path contains a NUL byte", ErrInvalidPath)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q: \"..\" is not allowed; give a path inside %s", ErrInvalidPath, p, WorkspaceDir)
		}
	}
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		clean := path.Clean(p)
		if clean == WorkspaceDir {
			return ".", nil
		}
		rel, ok := strings.CutPrefix(clean, WorkspaceDir+"/")
		if !ok {
			return "", fmt.Errorf("%w: %q is outside %s", ErrInvalidPath, p, WorkspaceDir)
		}
		return rel, nil
	}
	return path.Clean(p), nil
}

// at is where the directory appears in the sandbox.
func (d DirFiles) at() string {
	if d.At == "" {
		return WorkspaceDir
	}
	return d.At
}

// rel turns a path given by a caller into one relative to the directory
// ("." for the directory itself): as WorkspaceRel, and inside At.
func (d DirFiles) rel(p string) (string, error) {
	rel, err := WorkspaceRel(p)
	if err != nil || d.at() == WorkspaceDir {
		return rel, err
	}
	at := strings.TrimPrefix(d.at(), WorkspaceDir+"/")
	if rel == at {
		return ".", nil
	}
	inner, ok := strings.CutPrefix(rel, at+"/")
	if !ok {
		return "", fmt.Errorf("%w: %q is outside %s", ErrInvalidPath, p, d.at())
	}
	return inner, nil
}

// path is the inverse of rel.
func (d DirFiles) path(rel string) string {
	if rel == "." {
		return d.at()
	}
	return d.at() + "/" + rel
}

// DirFiles implements Files on a host directory that is the sandbox's
// /workspace. Every operation goes through os.Root, so no link the sandbox
// plants can lead outside the directory; FIFOs and devices are refused
// without being opened for blocking I/O.
type DirFiles struct {
	Dir string
	// At is where Dir appears inside the sandbox: WorkspaceDir when
	// empty, or a mount's target below it (the chat's uploads).
	At string
}

var _ Files = DirFiles{}

func (d DirFiles) root() (*os.Root, error) {
	r, err := os.OpenRoot(d.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open workspace: %w", ErrNotFound)
	}
	return r, err
}

// fileErr maps os errors to the package's sentinels with a message a user
// can act on.
func (d DirFiles) fileErr(op, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", op, p, ErrNotFound)
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		return fmt.Errorf("%s %s: %w: it leads outside %s through a link", op, p, ErrInvalidPath, d.at())
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s %s: %w: a parent is not a directory", op, p, ErrInvalidPath)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %s: %w: too many links", op, p, ErrInvalidPath)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

func (d DirFiles) infoOf(rel string, fi fs.FileInfo) FileInfo {
	t := "other"
	switch {
	case fi.Mode().IsRegular():
		t = "file"
	case fi.IsDir():
		t = "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	}
	return FileInfo{Name: path.Base(d.path(rel)), Path: d.path(rel), Type: t, Size: fi.Size(), ModTime: fi.ModTime().UTC()}
}

// List lists a directory, directories first, then by name. Entries are
// described without following links.
func (d DirFiles) List(ctx context.Context, p string) ([]FileInfo, error) {
	rel, err := d.rel(p)
	if err != nil {
		return nil, err
	}
	r, err := d.root()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return nil, d.fileErr("list", d.path(rel), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, d.fileErr("list", d.path(rel), err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("list %s: %w: not a directory", d.path(rel), ErrInvalidPath)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, d.fileErr("list", d.path(rel), err)
	}
	out := make([]FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, d.infoOf(path.Join(rel, e.Name()), fi))
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Type == "directory") != (out[j].Type == "directory") {
			return out[i].Type == "directory"
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Stat describes the entry at p, following links that stay inside.
func (d DirFiles) Stat(ctx context.Context, p string) (FileInfo, error) {
	rel, err := d.rel(p)
	if err != nil {
		return FileInfo{}, err
	}
	r, err := d.root()
	if err != nil {
		return FileInfo{}, err
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		return FileInfo{}, d.fileErr("stat", d.path(rel), err)
	}
	return d.infoOf(rel, fi), nil
}

// openRegular opens rel for reading only if it is a regular file. The
// open is non-blocking so that a FIFO swapped in after a check cannot
// hang the engine; the type is checked on the opened descriptor.
func (d DirFiles) openRegular(r *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, d.fileErr("open", d.path(rel), err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, d.fileErr("open", d.path(rel), err)
	}
	switch {
	case st.IsDir():
		f.Close()
		return nil, nil, fmt.Errorf("open %s: %w: it is a directory", d.path(rel), ErrInvalidPath)
	case !st.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("open %s: %w: not a regular file (%s)", d.path(rel), ErrInvalidPath, st.Mode().Type())
	}
	return f, st, nil
}

// Open opens a regular file for streaming.
func (d DirFiles) Open(ctx context.Context, p string) (io.ReadCloser, FileInfo, error) {
	rel, err := d.rel(p)
	if err != nil {
		return nil, FileInfo{}, err
	}
	r, err := d.root()
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer r.Close() // the opened file stays valid
	f, st, err := d.openRegular(r, rel)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return f, d.infoOf(rel, st), nil
}

// ReadFile reads a regular file of at most max bytes (max <= 0: no bound).
func (d DirFiles) ReadFile(ctx context.Context, p string, max int64) ([]byte, error) {
	rc, fi, err := d.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if max > 0 && fi.Size > max {
		return nil, fmt.Errorf("read %s: %w: %d bytes, the limit is %d; download it instead", fi.Path, ErrTooLarge, fi.Size, max)
	}
	lr := io.Reader(rc)
	if max > 0 {
		lr = io.LimitReader(rc, max+1)
	}
	data, err := io.ReadAll(lr)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", fi.Path, err)
	}
	if max > 0 && int64(len(data)) > max {
		return nil, fmt.Errorf("read %s: %w: it grew past the limit of %d bytes", fi.Path, ErrTooLarge, max)
	}
	return data, nil
}

// WriteFile writes data to a temporary file beside p and renames it over
// p, so readers see the old content or the new, never half of it.
func (d DirFiles) WriteFile(ctx context.Context, p string, data []byte) error {
	rel, err := d.rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("write %s: %w: it is a directory", d.at(), ErrInvalidPath)
	}
	r, err := d.root()
	if err != nil {
		return err
	}
	defer r.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return d.fileErr("write", d.path(rel), err)
		}
	}
	if fi, err := r.Lstat(rel); err == nil && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("write %s: %w: it exists and is not a regular file", d.path(rel), ErrInvalidPath)
	}
	tmp := path.Join(path.Dir(rel), ".flowbox-write-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return d.fileErr("write", d.path(rel), err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = r.Rename(tmp, rel)
	}
	if werr != nil {
		_ = r.Remove(tmp)
		return d.fileErr("write", d.path(rel), werr)
	}
	return nil
}

// Zip streams the directory (or single file) at p to w. Entries are named
// from the base name of p down; links, FIFOs and devices are left out.
func (d DirFiles) Zip(ctx context.Context, p string, w io.Writer) error {
	return d.ZipSkipping(ctx, p, w, nil)
}

// ZipSkipping is Zip leaving out the directories at skip, paths relative
// to p (the mount points the caller adds from elsewhere, E4).
func (d DirFiles) ZipSkipping(ctx context.Context, p string, w io.Writer, skip []string) error {
	zw := zip.NewWriter(w)
	if err := d.zipInto(ctx, zw, p, "", skip); err != nil {
		return err
	}
	return zw.Close()
}

// zipInto adds the directory (or single file) at p to zw, named from
// prefix down (from the base name of p when prefix is empty), leaving
// out skip (paths relative to p).
func (d DirFiles) zipInto(ctx context.Context, zw *zip.Writer, p, prefix string, skip []string) error {
	rel, err := d.rel(p)
	if err != nil {
		return err
	}
	r, err := d.root()
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil {
		return d.fileErr("zip", d.path(rel), err)
	}
	base := prefix
	if base == "" {
		base = path.Base(d.path(rel))
	}
	addFile := func(fileRel, name string) error {
		f, fi, err := d.openRegular(r, fileRel)
		if err != nil {
			if errors.Is(err, ErrInvalidPath) {
				return nil // became something else while walking: leave it out
			}
			return err
		}
		defer f.Close()
		hdr, err := zip.FileInfoHeader(fi)
		if err != nil {
			return err
		}
		hdr.Name = name
		hdr.Method = zip.Deflate
		zf, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		_, err = io.Copy(zf, f)
		return err
	}
	if !st.IsDir() {
		return addFile(rel, base)
	}
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[path.Join(rel, s)] = true
	}
	err = fs.WalkDir(r.FS(), rel, func(walked string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if skipped[walked] {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		name := base
		if walked != rel {
			name = base + "/" + strings.TrimPrefix(strings.TrimPrefix(walked, rel), "/")
			if rel == "." {
				name = base + "/" + walked
			}
		}
		switch {
		case e.IsDir():
			_, err := zw.Create(name + "/")
			return err
		case e.Type().IsRegular():
			return addFile(walked, name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("zip %s: %w", d.path(rel), err)
	}
	return nil
}

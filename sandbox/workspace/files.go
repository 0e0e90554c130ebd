package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Entry is one entry of a workspace directory, described without
// following links.
type Entry struct {
	Name string `json:"name"`
	// Path is relative to the area ("reports/q1.csv").
	Path string `json:"path"`
	// SandboxPath is where the sandbox sees it
	// ("/workspace/uploads/reports/q1.csv").
	SandboxPath string    `json:"sandboxPath"`
	Size        int64     `json:"size"`
	IsDir       bool      `json:"isDir"`
	Link        bool      `json:"link,omitempty"`
	ModTime     time.Time `json:"modTime"`
}

// openArea opens the area of the chat as a root nothing resolves out of.
// fs.ErrNotExist when the chat has no workspace yet.
func (s *Store) openArea(id string, area Area) (*os.Root, error) {
	if err := s.attach(id, false); err != nil {
		return nil, err
	}
	return os.OpenRoot(filepath.Join(s.chatDir(id), string(area)))
}

// fileErr maps what os.Root and the system say into the sandbox package's
// sentinels, with a message a user can act on.
func fileErr(op string, area Area, rel string, err error) error {
	p := sandboxPath(area, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w", op, p, sandbox.ErrNotFound)
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		return fmt.Errorf("%s %s: %w: it leads outside %s through a link", op, p, sandbox.ErrInvalidPath, area.Target())
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%s %s: %w: it or a parent is not a directory", op, p, sandbox.ErrInvalidPath)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s %s: %w: too many links", op, p, sandbox.ErrInvalidPath)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%s %s: %w: a name in it is too long", op, p, sandbox.ErrInvalidPath)
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

func entryOf(area Area, rel string, fi fs.FileInfo) Entry {
	return Entry{
		Name:        path.Base(rel),
		Path:        rel,
		SandboxPath: sandboxPath(area, rel),
		Size:        fi.Size(),
		IsDir:       fi.IsDir(),
		Link:        fi.Mode()&fs.ModeSymlink != 0,
		ModTime:     fi.ModTime().UTC(),
	}
}

// List lists one directory of the area (dir relative to it, or absolute as
// the sandbox sees it; "" for the area itself), directories first, then by
// name. A chat with no workspace yet has an empty area.
func (s *Store) List(ctx context.Context, scope sandbox.Scope, area Area, dir string) ([]Entry, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	if err := area.check(); err != nil {
		return nil, err
	}
	rel, err := relPath(area, dir)
	if err != nil {
		return nil, err
	}
	root, err := s.openArea(scope.SandboxID(), area)
	if errors.Is(err, fs.ErrNotExist) && rel == "." {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fileErr("list", area, rel, err)
	}
	defer root.Close()
	f, err := root.OpenFile(rel, dirFlags, 0)
	if err != nil {
		return nil, fileErr("list", area, rel, err)
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, fileErr("list", area, rel, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed while listing
		}
		child := de.Name()
		if rel != "." {
			child = rel + "/" + child
		}
		out = append(out, entryOf(area, child, fi))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].IsDir != out[j].IsDir {
			return out[i].IsDir
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Open opens a regular file of the area for reading (a download). Links
// are followed only while they stay inside the area; directories, FIFOs
// and devices are refused without blocking.
func (s *Store) Open(ctx context.Context, scope sandbox.Scope, area Area, p string) (*os.File, fs.FileInfo, error) {
	if err := checkScope(scope); err != nil {
		return nil, nil, err
	}
	if err := area.check(); err != nil {
		return nil, nil, err
	}
	rel, err := relPath(area, p)
	if err != nil {
		return nil, nil, err
	}
	root, err := s.openArea(scope.SandboxID(), area)
	if err != nil {
		return nil, nil, fileErr("open", area, rel, err)
	}
	defer root.Close() // the opened file stays valid
	f, err := root.OpenFile(rel, readFlags, 0)
	if err != nil {
		return nil, nil, fileErr("open", area, rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fileErr("open", area, rel, err)
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, nil, fmt.Errorf("open %s: %w: it is a directory; list it or download it as a ZIP", sandboxPath(area, rel), sandbox.ErrInvalidPath)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("open %s: %w: not a regular file (%s)", sandboxPath(area, rel), sandbox.ErrInvalidPath, fi.Mode().Type())
	}
	return f, fi, nil
}

// Delete removes one entry of the area: a file, a link (never what it
// points at) or a directory with everything in it. The area itself cannot
// be deleted; a missing entry is sandbox.ErrNotFound.
func (s *Store) Delete(ctx context.Context, scope sandbox.Scope, area Area, p string) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	if err := area.check(); err != nil {
		return err
	}
	rel, err := relPath(area, p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("delete %s: %w: give a file or folder inside it", area.Target(), sandbox.ErrInvalidPath)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := s.openArea(scope.SandboxID(), area)
	if err != nil {
		return fileErr("delete", area, rel, err)
	}
	defer root.Close()
	// Remove takes a file, a link or an empty directory; only a directory
	// with something in it needs RemoveAll, which does not follow links.
	err = root.Remove(rel)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		err = root.RemoveAll(rel)
	}
	if err != nil {
		return fileErr("delete", area, rel, err)
	}
	return nil
}

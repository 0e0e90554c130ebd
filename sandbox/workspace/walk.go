package workspace

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// maxWalkDepth bounds how deep a walk descends. Deeper entries are not
// seen: not listed in the summary and not counted against the quota
// (they still count against the sandbox's own disk limit).
const maxWalkDepth = 128

// walker visits a tree beneath an os.Root depth-first in name order,
// without following links. Every directory is opened through the root,
// with O_DIRECTORY|O_NONBLOCK, so an entry swapped for a link or a FIFO
// while walking is skipped instead of followed or blocking.
type walker struct {
	root *os.Root
	// budget is how many more entries may be read; negative: no bound.
	// cut is set when the budget stopped the walk early.
	budget int
	cut    bool
	visit  func(rel string, de fs.DirEntry) error
}

// errStop ends a walk early without being an error.
var errStop = errors.New("stop walking")

func (w *walker) walk(ctx context.Context) error {
	err := w.dir(ctx, ".", 0)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

func (w *walker) dir(ctx context.Context, rel string, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if depth > maxWalkDepth {
		return nil
	}
	f, err := w.root.OpenFile(rel, dirFlags, 0)
	if err != nil {
		if rel == "." {
			return err
		}
		return nil // replaced or removed since its parent was read
	}
	var des []fs.DirEntry
	for {
		n := 1024
		if w.budget >= 0 {
			if w.budget == 0 {
				w.cut = true
				break
			}
			n = min(n, w.budget)
		}
		batch, err := f.ReadDir(n)
		des = append(des, batch...)
		if w.budget >= 0 {
			w.budget -= len(batch)
		}
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, de := range des {
		child := de.Name()
		if rel != "." {
			child = path.Join(rel, child)
		}
		if err := w.visit(child, de); err != nil {
			return err
		}
		if de.IsDir() {
			if err := w.dir(ctx, child, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

//go:build unix

package workspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory without blocking on whatever was swapped in
// for it: O_DIRECTORY fails on a FIFO before it could block.
const dirFlags = os.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK

// readFlags open a file for reading without blocking on a FIFO or taking
// a terminal; its type is checked on the opened descriptor.
const readFlags = os.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY

// linkAt gives the file oldName in oldDir the new name newName in newDir.
// It never replaces an entry: an existing newName, a link included, is
// fs.ErrExist, and newName is not followed.
func linkAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	if err := unix.Linkat(int(oldDir.Fd()), oldName, int(newDir.Fd()), newName, 0); err != nil {
		return &os.LinkError{Op: "link", Old: oldName, New: newName, Err: err}
	}
	return nil
}

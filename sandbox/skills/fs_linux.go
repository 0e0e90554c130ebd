package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// exchange swaps two directories in one step (renameat2 RENAME_EXCHANGE):
// at no instant does either name resolve to nothing or to a partial tree.
func exchange(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return renameErr("exchange", a, b, err)
	}
	return nil
}

// renameNoReplace moves a to b unless b exists (renameat2
// RENAME_NOREPLACE), so that a tree placed by hand meanwhile is not lost.
func renameNoReplace(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE); err != nil {
		return renameErr("rename", a, b, err)
	}
	return nil
}

func renameErr(op, a, b string, err error) error {
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%s %s and %s: the filesystem does not support renameat2 with RENAME_EXCHANGE/RENAME_NOREPLACE (%v); put the skills root on ext4, xfs, btrfs or tmpfs", op, a, b, err)
	}
	return &os.LinkError{Op: op, Old: a, New: b, Err: err}
}

// tryLock takes an exclusive flock(2) on f without blocking; busy reports
// that another open file (another process or goroutine) holds it.
func tryLock(f *os.File) (busy bool, err error) {
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return true, nil
		}
		return false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
}

// fileID identifies a directory across renames.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// nonBlock opens FIFOs without waiting for a writer; the file is refused
// right after as not regular.
const nonBlock = syscall.O_NONBLOCK

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// MinImageBytes is the smallest pool image made: btrfs refuses less.
const MinImageBytes = 256 << 20

// MountImage gives dir a btrfs filesystem of its own for a pool, when it
// is on another filesystem: a sparse image file at img of size bytes,
// made when missing (mkfs.btrfs, from btrfs-progs) and loop-mounted on
// dir. The image takes on the host only what is written. It is
// idempotent and serialised by a lock beside the image, like
// diskimage.Ensure; a dir already on btrfs (a directory of a btrfs
// filesystem the operator made) is used as it is.
func MountImage(img, dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if onBtrfs(dir) {
		return nil // a btrfs filesystem's directory, or the image mounted
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(img+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if mounted, err := diskimage.IsMountPoint(dir); err != nil || mounted {
		if err == nil && !onBtrfs(dir) {
			err = fmt.Errorf("checkpoint pool: %s is a mount point of another filesystem than btrfs", dir)
		}
		return err
	}
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		if err := makeImage(img, max(size, MinImageBytes)); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	out, err := exec.Command("mount", "-o", "loop,noatime,nosuid,nodev", img, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount the checkpoint pool's filesystem (%s) on %s: %v: %s", img, dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeImage makes a sparse btrfs image: one copy of data and metadata
// (the host's disk keeps them once; a second copy on one file guards
// against nothing).
func makeImage(img string, size int64) error {
	return diskimage.MakeFile(img, size, "the checkpoint pool", "btrfs-progs", "mkfs.btrfs", "-q", "-f", "-d", "single", "-m", "single")
}

// Usable says why this process cannot make and use a pool on an image
// (nil: it can): it needs root, for the loop mount and the ioctls, and
// btrfs-progs' mkfs.btrfs.
func Usable() error {
	if os.Geteuid() != 0 {
		return errors.New("the checkpoint pool's loop mount and ioctls need root")
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		return fmt.Errorf("mkfs.btrfs: %w (apt-get install btrfs-progs)", err)
	}
	return nil
}

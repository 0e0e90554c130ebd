// Package diskimage gives a directory a filesystem of its own (S10, T4):
// a sparse ext4 image of a limit's size, loop-mounted on the directory
// (a sandbox's writable directories, a chat's uploads and intermediate
// files). A command that fills it fails with "No space
// left on device"; the host and the other sandboxes are untouched. The
// image takes on the host only what is written (and gives back what is
// deleted: the mount discards). Mounts live in the host's mount table, so
// an engine restart keeps them; Mount is idempotent and mounts again after
// a reboot. The providers make the image with the sandbox, mount it when
// it starts and unmount it when they delete it. It needs root,
// mkfs.ext4 (e2fsprogs) and loop devices.
package diskimage

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// Make makes a sparse ext4 image of gib GiB at path: no blocks reserved
// for root (the sandbox is root), and the inode tables left to initialise
// lazily, so that making even a large one takes a moment.
func Make(path string, gib int64) error { return MakeBytes(path, gib<<30) }

// MakeBytes is Make for a size in bytes (at least MinBytes).
func MakeBytes(path string, size int64) error {
	return MakeFile(path, max(size, MinBytes), "a disk limit", "e2fsprogs", "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1")
}

// MakeFile makes a sparse file of size bytes at path holding the
// filesystem mkfs (a command and its arguments, the file's path last)
// makes, for what it is (said in errors, with the package to install).
// The file appears whole or not at all: it is made beside path, renamed
// into place.
func MakeFile(path string, size int64, what, pkg string, mkfs ...string) error {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var out []byte
		out, err = exec.Command(mkfs[0], append(mkfs[1:], tmp)...).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("make a filesystem of %d MiB for %s: %v: %s; install %s", size>>20, what, err, strings.TrimSpace(string(out)), pkg)
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Ensure mounts the image at img on dir, making it first when it is
// missing and gib > 0 (a new sandbox with a disk limit); a missing image
// and gib 0 is a sandbox without one: nothing to do. Concurrent calls,
// also from other processes, are serialised by a lock file beside the
// image: two mounts of one image would corrupt it.
func Ensure(img, dir string, gib int64) error { return EnsureBytes(img, dir, gib<<30) }

// MinBytes is the smallest image made: ext4's own structures (journal,
// inode tables) need a few MiB before any file fits.
const MinBytes = 4 << 20

// EnsureBytes is Ensure for a size in bytes: a new image is made of that
// size (at least MinBytes) when size > 0.
func EnsureBytes(img, dir string, size int64) error {
	if size <= 0 {
		if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
			return nil // no disk limit: no lock file either
		}
	}
	lock, err := os.OpenFile(img+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		if size <= 0 {
			return nil
		}
		if err := MakeBytes(img, size); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	mounted, err := IsMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	out, err := exec.Command("mount", "-o", "loop,nosuid,nodev,discard", img, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount the filesystem of a disk limit (%s): %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Move moves the filesystem mounted on from to to (an empty directory):
// a bind of it at to, then from unmounted. The filesystem is the same
// (no second mount of the image, which would corrupt it), so that a
// namespace that bound a directory of it before keeps writing into what
// to now shows. Unlike mount --move, it works under a shared parent
// mount (systemd's default).
func Move(from, to string) error {
	if out, err := exec.Command("mount", "--bind", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("mount the filesystem of %s on %s: %v: %s", from, to, err, strings.TrimSpace(string(out)))
	}
	if err := Unmount(from); err != nil {
		_ = Unmount(to)
		return err
	}
	return nil
}

// Unmount unmounts dir when it is a mount point; what uses it must be
// gone.
func Unmount(dir string) error {
	mounted, err := IsMountPoint(dir)
	if err != nil || !mounted {
		return err
	}
	out, err := exec.Command("umount", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount the filesystem of a disk limit on %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IsMountPoint reports whether dir is a mount point in this process's
// mount table.
func IsMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

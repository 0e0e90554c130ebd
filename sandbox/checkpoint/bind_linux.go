package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// Bind binds sub, a directory of sandbox id's files ("" for all of
// them), on target, a directory made if it is missing, unless something
// is mounted there already. A provider binds the files where its
// sandboxes find them; a restore unbinds them first (Unbind) and binds
// the restored ones after. The mount point itself is made immutable:
// while a restore has the files unbound, nothing can be written under
// it, where it would hide.
func (p *Pool) Bind(id, sub, target string) error {
	if err := checkID(id); err != nil {
		return err
	}
	src := p.Dir(id)
	if sub != "" {
		src = filepath.Join(src, sub)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return fmt.Errorf("checkpoint pool: %w", err)
		}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	// Two binds at once (concurrent Ensures, maybe in two processes)
	// would stack two mounts: one at a time.
	lock, err := os.OpenFile(target+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", target, err)
	}
	defer lock.Close() // releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", target, err)
	}
	if mounted, err := diskimage.IsMountPoint(target); err != nil || mounted {
		return err
	}
	SetImmutable(target, true)
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the sandbox's files from the checkpoint pool on %s: %w", target, err)
	}
	return nil
}

// Unbind undoes Bind: the files are unmounted from target, which stays
// immutable and empty until they are bound again (or Release). Mounts
// stacked there (by an engine of before Bind's lock) go too.
func Unbind(target string) error {
	for range 8 {
		if mounted, err := diskimage.IsMountPoint(target); err != nil || !mounted {
			return err
		}
		if err := diskimage.Unmount(target); err != nil {
			return err
		}
	}
	return fmt.Errorf("unbind %s: still mounted after 8 unmounts", target)
}

// Release unbinds target for good, and makes it a plain directory again
// that can be removed.
func Release(target string) error {
	if err := Unbind(target); err != nil {
		return err
	}
	SetImmutable(target, false)
	return ignoreMissing(os.Remove(target + ".lock"))
}

// ReadMark reads a mark file, which a provider keeps in a sandbox's
// directory to name its files in the pool (its own id, or the warm pool
// member's it was adopted from).
func ReadMark(path string) (string, bool) {
	b, err := os.ReadFile(path)
	id := strings.TrimSpace(string(b))
	return id, err == nil && sandbox.ValidID(id)
}

// WriteMark writes a mark file naming files id in the pool, atomically.
func WriteMark(path, id string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// SetImmutable sets or clears a directory's immutable attribute (as
// chattr +i does), where its filesystem has one.
func SetImmutable(dir string, on bool) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		return
	}
	if on {
		flags |= fsImmutable
	} else {
		flags &^= fsImmutable
	}
	_ = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags)
}

// fsImmutable is FS_IMMUTABLE_FL (linux/fs.h).
const fsImmutable = 0x10

// SandboxErr marks the pool's errors with the sandbox package's kinds,
// for a provider to return.
func SandboxErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoCheckpoint):
		return fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	case errors.Is(err, ErrNotInPool):
		return fmt.Errorf("%w: %w", sandbox.ErrUnsupported, err)
	}
	return err
}

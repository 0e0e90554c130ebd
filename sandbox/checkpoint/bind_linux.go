package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

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
// immutable and empty until they are bound again (or Release).
func Unbind(target string) error { return diskimage.Unmount(target) }

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

// Files is a provider's sandboxes' files in a pool: In names sandbox
// id's files there, or says why it has none (an error of the sandbox
// package's kinds). Its methods are what sandbox.CheckpointProvider asks
// of the pool, errors marked with the provider's name and the sandbox.
type Files struct {
	Pool     *Pool
	Provider string
	In       func(id string) (string, error)
}

func (f Files) fail(id string, err error) error {
	return fmt.Errorf("%s sandbox %s: %w", f.Provider, id, SandboxErr(err))
}

// Checkpoint takes checkpoint name of sandbox id's files.
func (f Files) Checkpoint(id, name string) (Info, error) {
	pid, err := f.In(id)
	if err != nil {
		return Info{}, err
	}
	in, err := f.Pool.Checkpoint(pid, name)
	if err != nil {
		return Info{}, f.fail(id, err)
	}
	return in, nil
}

// Drop deletes checkpoint name of sandbox id.
func (f Files) Drop(id, name string) error {
	pid, err := f.In(id)
	if err != nil {
		return err
	}
	if err := f.Pool.Drop(pid, name); err != nil {
		return f.fail(id, err)
	}
	return nil
}

// List lists sandbox id's checkpoints.
func (f Files) List(id string) ([]Info, error) {
	pid, err := f.In(id)
	if err != nil {
		return nil, err
	}
	list, err := f.Pool.Checkpoints(pid)
	if err != nil {
		return nil, f.fail(id, err)
	}
	return list, nil
}

// Off is what a provider without a pool answers for sandbox id.
func Off(provider, id string) error {
	return fmt.Errorf("%s sandbox %s: %w: checkpoints are off (no checkpoint pool is configured)", provider, id, sandbox.ErrUnsupported)
}

// Unmarked is what a provider answers for sandbox id whose files no mark
// names: exists says whether the sandbox exists (then it was made before
// checkpoints were on).
func Unmarked(provider, id string, exists bool) error {
	if !exists {
		return fmt.Errorf("%s sandbox %s: %w", provider, id, sandbox.ErrNotFound)
	}
	return fmt.Errorf("%s sandbox %s: %w: it was made before checkpoints were turned on", provider, id, sandbox.ErrUnsupported)
}

// Sweep removes what no sandbox owns any more and is older than old
// (R4), for a provider whose sandboxes' directories are root/<id>, each
// with a mark file mark(id) naming its files in the pool: the pool's
// files and checkpoints that no mark names, and the directories of
// unmarked sandboxes that unfinished reports as never made whole (a fork
// an engine was killed in the middle of). It returns how many of both it
// removed.
func (f Files) Sweep(root string, mark func(id string) string, unfinished func(id string) bool, old time.Time) (int, error) {
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s sweep: %w", f.Provider, err)
	}
	removed := 0
	var errs []error
	owned := map[string]bool{}
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || !sandbox.ValidID(id) {
			continue
		}
		if pid, ok := ReadMark(mark(id)); ok {
			owned[pid] = true
			continue
		}
		if info, err := e.Info(); err != nil || !info.ModTime().Before(old) || !unfinished(id) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, id)); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	n, err := f.Pool.DeleteUnowned(owned, old)
	return removed + n, errors.Join(append(errs, err)...)
}

package bwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// The stage: where bwrap, run as the sandbox's host user (idmap_linux.go),
// finds the sandbox's directories, ID-mapped, and the files every sandbox
// binds, at paths that user may reach. One directory per running sandbox
// under Config.StageDir, made by Ensure or the first command, moved with
// an adopted pool member, removed by Stop and Delete.

// stageDir is where a running sandbox's directory is mounted, ID-mapped.
func (p *Provider) stageDir(id string) string { return filepath.Join(p.ids.stage, id) }

// stageRoot is the stage directory of a provider whose root is root.
func stageRoot(stageDir, root string) string {
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(stageDir, "bwrap-"+hex.EncodeToString(sum[:6]))
}

// privateMount makes dir a mount of its own with private propagation,
// unless it is one already: the stages' mounts must not propagate to
// other mount namespaces of the machine (a host whose / is shared, as
// systemd makes it), and a shared parent would refuse moveStage.
func privateMount(dir string) error {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(info), "\n") {
		// ID parent major:minor root mountpoint options [optional fields] - ...
		f := strings.Fields(line)
		if len(f) > 6 && f[4] == dir {
			pre, _, _ := strings.Cut(strings.Join(f[6:], " "), " - ")
			if !strings.Contains(pre, "shared:") {
				return nil // a mount of its own, not shared
			}
			return unix.Mount("", dir, "", unix.MS_PRIVATE, "")
		}
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", dir, "", unix.MS_PRIVATE, "")
}

// sweepStage removes the stage's mounts of sandboxes that no longer
// exist (deleted while this engine did not run), and the stages of other
// roots left empty for a while (a root that is gone; a provider that just
// made its own has it fresh).
func (p *Provider) sweepStage() {
	if others, err := filepath.Glob(filepath.Join(p.cfg.StageDir, "bwrap-*")); err == nil {
		for _, dir := range others {
			if fi, err := os.Stat(dir); err == nil && dir != p.ids.stage && time.Since(fi.ModTime()) > 10*time.Minute {
				_ = os.Remove(dir) // only when empty
			}
		}
	}
	entries, err := os.ReadDir(p.ids.stage)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(p.dir(e.Name())); errors.Is(err, fs.ErrNotExist) {
			_ = unstageAt(filepath.Join(p.ids.stage, e.Name()))
		}
	}
}

// staged reports whether dir shows the directory src: a mount of it (the
// same inode on the same device), not the empty mount point.
func staged(dir, src string) bool {
	var a, b unix.Stat_t
	return unix.Stat(dir, &a) == nil && unix.Stat(src, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// stageBind is where the stage shows the sandbox's i-th mount's source: a
// mount point in the sandbox's directory, which only the stage's mount of
// it ever covers.
func (p *Provider) stageBind(id string, i int) string {
	return filepath.Join(p.stageDir(id), "binds", strconv.Itoa(i))
}

// stage makes sure the sandbox's stage is mounted: its directory, and
// over it each mount's source. It takes the sandbox's lock when there is
// work to do.
func (p *Provider) stage(id string, m meta) error {
	if p.ids == nil || p.isStaged(id, m) {
		return nil
	}
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return err
	}
	defer unlock()
	return p.stageLocked(id, m)
}

// isStaged reports whether the sandbox's stage shows its directory and
// each mount's source as they are now (a source the engine made anew
// since is mounted anew).
func (p *Provider) isStaged(id string, m meta) bool {
	if !staged(p.stageDir(id), p.dir(id)) {
		return false
	}
	for i, mnt := range m.Mounts {
		if !staged(p.stageBind(id, i), mnt.Source) {
			return false
		}
	}
	return true
}

// stageLocked is stage under the sandbox's lock.
func (p *Provider) stageLocked(id string, m meta) error {
	if p.ids == nil || p.isStaged(id, m) {
		return nil
	}
	dir := p.stageDir(id)
	// What is left of an earlier stage (a mount of a directory since
	// replaced) goes first.
	if err := unstageAt(dir); err != nil {
		return err
	}
	// The sandbox's directory is its host user's alone through the
	// stage: no other sandbox's user may enter it.
	if err := os.Chmod(p.dir(id), 0o700); err != nil {
		return fmt.Errorf("stage %s: %w", id, err)
	}
	for i := range m.Mounts {
		if err := os.MkdirAll(filepath.Join(p.dir(id), "binds", strconv.Itoa(i)), 0o700); err != nil {
			return fmt.Errorf("stage %s: %w", id, err)
		}
	}
	// The stage's own directory again: another provider's sweep
	// (sweepStage) may have removed it while it was empty.
	if err := os.MkdirAll(p.ids.stage, 0o711); err != nil {
		return fmt.Errorf("stage %s: %w", id, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("stage %s: %w", id, err)
	}
	ns, err := p.ids.namespaceFor(p, m.hostUser(id))
	if err != nil {
		os.Remove(dir)
		return fmt.Errorf("stage %s: %w", id, err)
	}
	defer ns.Close()
	if err := idMapped(p.dir(id), dir, ns); err != nil {
		os.Remove(dir)
		return fmt.Errorf("stage %s: %w", id, err)
	}
	for i, mnt := range m.Mounts {
		if err := idMapped(mnt.Source, p.stageBind(id, i), ns); err != nil {
			_ = unstageAt(dir)
			return fmt.Errorf("stage %s: %w", id, err)
		}
	}
	return nil
}

// unstage removes the sandbox's stage, its processes ended or ending.
func (p *Provider) unstage(id string) error {
	if p.ids == nil {
		return nil
	}
	return unstageAt(p.stageDir(id))
}

// Close unmounts the stages of this provider's sandboxes, when the engine
// stops: a running namespace keeps the mounts it started with, and a
// sandbox's next command stages it again (stage). Left mounted, a stage
// would keep its sandbox's directories from being removed (a mount point
// in the engine's mount namespace is busy).
func (p *Provider) Close() error {
	if p.ids == nil {
		return nil
	}
	entries, err := os.ReadDir(p.ids.stage)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		unlock, err := p.lockNamespace(e.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, unstageAt(filepath.Join(p.ids.stage, e.Name())))
		unlock()
	}
	return errors.Join(errs...)
}

// moveStage moves the stage of a pool member adopted as id to its new
// name (keep: with the same mounts); otherwise it removes it.
func (p *Provider) moveStage(poolID, id string, keep bool) error {
	if p.ids == nil {
		return nil
	}
	from, to := p.stageDir(poolID), p.stageDir(id)
	if keep {
		if err := os.Mkdir(to, 0o700); err == nil {
			if err := unix.MoveMount(unix.AT_FDCWD, from, unix.AT_FDCWD, to, 0); err == nil {
				return unstageAt(from)
			}
			_ = os.Remove(to)
		}
	}
	return unstageAt(from)
}

// unstageAt detaches whatever is mounted on dir, with its submounts, and
// removes the mount point.
func unstageAt(dir string) error {
	for {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			break // nothing (more) mounted there
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// source is the path bwrap binds from for the host path src of the
// sandbox: on the stage when sandboxes have users of their own.
func (p *Provider) source(id, src string) string {
	if p.ids == nil {
		return src
	}
	rel, err := filepath.Rel(p.dir(id), src)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return src
	}
	return filepath.Join(p.stageDir(id), rel)
}

// stagedMounts are the sandbox's mounts with their sources on the stage.
func (p *Provider) stagedMounts(id string, mounts []sandbox.Mount) []sandbox.Mount {
	if p.ids == nil {
		return mounts
	}
	out := make([]sandbox.Mount, len(mounts))
	for i, mnt := range mounts {
		mnt.Source = p.stageBind(id, i)
		out[i] = mnt
	}
	return out
}

// sharedFiles are the copies of host files every sandbox binds read-only
// (the agent's and forwarder's binaries) that their own paths do not let
// a sandbox's user reach: path → copy.
var sharedFiles sync.Map

// reachable is path itself when every directory on the way lets any user
// pass, else a copy of it under Config.StageDir, made once.
func (p *Provider) reachable(path string) (string, error) {
	if p.ids == nil || passable(path) {
		return path, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st := fi.Sys().(*syscall.Stat_t)
	key := fmt.Sprintf("%s\x00%d\x00%d\x00%d\x00%d", path, st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
	if c, ok := sharedFiles.Load(key); ok {
		return c.(string), nil
	}
	sum := sha256.Sum256([]byte(key))
	dst := filepath.Join(p.cfg.StageDir, "files", hex.EncodeToString(sum[:8])+"-"+filepath.Base(path))
	if _, err := os.Stat(dst); err != nil {
		if err := copyFile(path, dst); err != nil {
			return "", fmt.Errorf("copy %s where sandboxes reach it: %w", path, err)
		}
	}
	sharedFiles.Store(key, dst)
	return dst, nil
}

// passable reports whether every directory above path lets any user
// through (o+x).
func passable(path string) bool {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if dir == "/" {
			return true
		}
	}
}

// copyFile copies src to dst (mode 0755) by a rename, its directory made
// passable.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o711); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(dst), ".copy-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(0o755)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	if err != nil {
		os.Remove(out.Name())
	}
	return err
}

package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/sandbox"
)

// Pool is a directory of a btrfs filesystem holding sandboxes' writable
// files and their checkpoints:
//
//	live/<id>                 the sandbox's files, a subvolume
//	checkpoints/<id>/<name>   its checkpoints, read-only snapshots of it
//	trash/                    subvolumes on their way out
//
// A checkpoint shares every block with the files it was taken of, so it
// costs what changes after it, and taking one costs a btrfs transaction,
// whatever the number and size of the files. The pool does not lock: its
// caller takes, restores and deletes a sandbox's checkpoints one at a
// time, with no process of the sandbox running during a Restore.
type Pool struct {
	root  string
	level uint64 // of its quota groups
}

// Errors.
var (
	// ErrNotBtrfs: the pool's directory is not on a btrfs filesystem.
	ErrNotBtrfs = errors.New("not on a btrfs filesystem")
	// ErrNoCheckpoint: no checkpoint of that name for that sandbox.
	ErrNoCheckpoint = errors.New("no such checkpoint")
	// ErrExists: the sandbox or checkpoint is there already.
	ErrExists = errors.New("already exists")
	// ErrNotInPool: the sandbox's files are not in the pool.
	ErrNotInPool = errors.New("the sandbox's files are not in the checkpoint pool")
)

// Open opens the pool at root, a directory on btrfs (made when missing),
// and finishes what an engine that stopped in the middle left: the
// subvolumes in trash are deleted, a restore's or fork's unfinished copy
// too.
func Open(root string) (*Pool, error) { return open(root, 1) }

// OpenChats opens the pool of the chats' files (package workspace) at
// root, which may share a filesystem with a sandboxes' pool: its quota
// groups are of another level (2), so that a chat and a sandbox of the
// same id never share one.
func OpenChats(root string) (*Pool, error) { return open(root, 2) }

func open(root string, level uint64) (*Pool, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint pool: %w", err)
	}
	if !onBtrfs(root) {
		return nil, fmt.Errorf("checkpoint pool %s: %w (format one with MountImage, or mount a btrfs filesystem there)", root, ErrNotBtrfs)
	}
	p := &Pool{root: root, level: level}
	for _, d := range []string{p.liveDir(), p.checkpointsDir(), p.trashDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("checkpoint pool: %w", err)
		}
	}
	if err := enableQuotas(root); err != nil {
		return nil, fmt.Errorf("checkpoint pool: %w", err)
	}
	if err := p.recover(); err != nil {
		return nil, fmt.Errorf("checkpoint pool %s: %w", root, err)
	}
	return p, nil
}

// groupOf is sandbox id's quota group: of the pool's level, numbered by
// the id's first 48 bits. Its members are the sandbox's files and
// checkpoints.
func (p *Pool) groupOf(id string) uint64 {
	n, _ := strconv.ParseUint(id[:12], 16, 64)
	return p.level<<48 | n
}

func (p *Pool) liveDir() string        { return filepath.Join(p.root, "live") }
func (p *Pool) checkpointsDir() string { return filepath.Join(p.root, "checkpoints") }
func (p *Pool) trashDir() string       { return filepath.Join(p.root, "trash") }

// Root is the pool's directory.
func (p *Pool) Root() string { return p.root }

// Dir is where sandbox id's files are: the directory its provider uses as
// the base of its writable directories.
func (p *Pool) Dir(id string) string { return filepath.Join(p.liveDir(), id) }

func (p *Pool) checkpoint(id, name string) string {
	return filepath.Join(p.checkpointsDir(), id, name)
}

// temp names are hidden (a dot) and unique; recover deletes the ones an
// engine left behind.
func temp(dir, what string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return filepath.Join(dir, "."+what+"-"+hex.EncodeToString(b))
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func checkID(id string) error {
	if !sandbox.ValidID(id) {
		return fmt.Errorf("checkpoint pool: %w: invalid sandbox id %q", sandbox.ErrNotFound, id)
	}
	return nil
}

func checkName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("checkpoint pool: invalid checkpoint name %q (letters, digits, - and _, at most 64)", name)
	}
	return nil
}

// Create makes sandbox id's files' subvolume, empty, with limit bytes
// for its files and checkpoints together (0: no limit); one that exists
// is kept, with its limit.
func (p *Pool) Create(id string, limit int64) error {
	if err := checkID(id); err != nil {
		return err
	}
	if p.Exists(id) {
		return nil
	}
	if err := p.newGroup(id, limit); err != nil {
		return err
	}
	if err := subvolCreate(p.Dir(id), p.groupOf(id)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("checkpoint pool: %w", err)
	}
	return nil
}

// newGroup makes sandbox id's quota group, with limit bytes.
func (p *Pool) newGroup(id string, limit int64) error {
	if err := createGroup(p.root, p.groupOf(id)); err != nil {
		return fmt.Errorf("checkpoint pool: %w", err)
	}
	if err := limitGroup(p.root, p.groupOf(id), limit); err != nil {
		return fmt.Errorf("checkpoint pool: %w", err)
	}
	return nil
}

// Usage is what sandbox id's files and checkpoints take on the disk:
// each block once, charged to the sandbox that wrote it (a fork is not
// charged for what it shares with the checkpoint it came from). -1 when
// it cannot be read.
func (p *Pool) Usage(id string) int64 {
	if !sandbox.ValidID(id) {
		return -1
	}
	return groupUsage(p.root, p.groupOf(id))
}

// Exists reports whether sandbox id's files are in the pool.
func (p *Pool) Exists(id string) bool { return isSubvolume(p.Dir(id)) }

// Info describes a checkpoint: its name and when it was taken.
type Info = sandbox.Checkpoint

// Checkpoint takes a checkpoint of sandbox id's files now, named name.
func (p *Pool) Checkpoint(id, name string) (Info, error) {
	if err := checkID(id); err != nil {
		return Info{}, err
	}
	if err := checkName(name); err != nil {
		return Info{}, err
	}
	if !p.Exists(id) {
		return Info{}, fmt.Errorf("checkpoint of sandbox %s: %w", id, ErrNotInPool)
	}
	dst := p.checkpoint(id, name)
	if _, err := os.Lstat(dst); err == nil {
		return Info{}, fmt.Errorf("checkpoint %s of sandbox %s: %w", name, id, ErrExists)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return Info{}, fmt.Errorf("checkpoint of sandbox %s: %w", id, err)
	}
	if err := snapshot(p.Dir(id), dst, true, p.groupOf(id)); err != nil {
		return Info{}, fmt.Errorf("checkpoint of sandbox %s: %w", id, err)
	}
	return p.info(id, name)
}

func (p *Pool) info(id, name string) (Info, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p.checkpoint(id, name), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Info{}, fmt.Errorf("checkpoint %s of sandbox %s: %w", name, id, ErrNoCheckpoint)
		}
		return Info{}, fmt.Errorf("checkpoint %s of sandbox %s: %w", name, id, err)
	}
	t := st.Btime
	if st.Mask&unix.STATX_BTIME == 0 {
		t = st.Ctime
	}
	return Info{Name: name, Created: time.Unix(t.Sec, int64(t.Nsec)).UTC()}, nil
}

// Checkpoints lists sandbox id's checkpoints, oldest first.
func (p *Pool) Checkpoints(id string) ([]Info, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(p.checkpointsDir(), id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoints of sandbox %s: %w", id, err)
	}
	var out []Info
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !nameRe.MatchString(e.Name()) {
			continue
		}
		in, err := p.info(id, e.Name())
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Info) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Restore makes sandbox id's files what they were at checkpoint name,
// byte for byte; the checkpoint stays. The files are replaced at once
// (the old and the restored subvolume exchange their names): a crash
// leaves one or the other, whole. A process of the sandbox still
// running sees the old files until it ends: the caller stops them first.
func (p *Pool) Restore(id, name string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	src := p.checkpoint(id, name)
	if !isSubvolume(src) {
		return fmt.Errorf("restore sandbox %s: checkpoint %s: %w", id, name, ErrNoCheckpoint)
	}
	return p.replace(id, src)
}

// Reset makes sandbox id's files empty, as before its first command;
// its checkpoints stay. Like Restore, at once.
func (p *Pool) Reset(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return p.replace(id, "")
}

// replace makes sandbox id's files a writable snapshot of src, or an
// empty subvolume when src is "".
func (p *Pool) replace(id, src string) error {
	tmp := temp(p.liveDir(), id)
	var err error
	if src == "" {
		err = subvolCreate(tmp, p.groupOf(id))
	} else {
		err = snapshot(src, tmp, false, p.groupOf(id))
	}
	if err != nil {
		return fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	if !p.Exists(id) {
		if err := os.Rename(tmp, p.Dir(id)); err != nil {
			_ = subvolDelete(tmp)
			return fmt.Errorf("restore sandbox %s: %w", id, err)
		}
		return nil
	}
	if err := exchange(tmp, p.Dir(id)); err != nil {
		_ = subvolDelete(tmp)
		return fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	// tmp is now the files before the restore.
	return p.discard(tmp)
}

// discard moves a writable subvolume to the trash and deletes it. (A
// read-only one cannot move; its deletion is one step: subvolDelete.)
func (p *Pool) discard(path string) error {
	gone := temp(p.trashDir(), "gone")
	if err := os.Rename(path, gone); err != nil {
		return fmt.Errorf("checkpoint pool: discard %s: %w", path, err)
	}
	return subvolDelete(gone)
}

// Fork makes sandbox dst's files a copy of sandbox src's checkpoint name
// (src goes on untouched), with limit bytes (0: none); dst must not have
// files in the pool yet. The copy shares the checkpoint's blocks.
func (p *Pool) Fork(src, name, dst string, limit int64) error {
	for _, id := range []string{src, dst} {
		if err := checkID(id); err != nil {
			return err
		}
	}
	if err := checkName(name); err != nil {
		return err
	}
	from := p.checkpoint(src, name)
	if !isSubvolume(from) {
		return fmt.Errorf("fork sandbox %s: checkpoint %s of sandbox %s: %w", dst, name, src, ErrNoCheckpoint)
	}
	if _, err := os.Lstat(p.Dir(dst)); err == nil {
		return fmt.Errorf("fork sandbox %s: %w", dst, ErrExists)
	}
	if err := p.newGroup(dst, limit); err != nil {
		return err
	}
	tmp := temp(p.liveDir(), dst)
	if err := snapshot(from, tmp, false, p.groupOf(dst)); err != nil {
		return fmt.Errorf("fork sandbox %s: %w", dst, err)
	}
	// Not over a sandbox that appeared meanwhile: renameat2 without
	// replacing.
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, p.Dir(dst), unix.RENAME_NOREPLACE); err != nil {
		_ = subvolDelete(tmp)
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("fork sandbox %s: %w", dst, ErrExists)
		}
		return fmt.Errorf("fork sandbox %s: %w", dst, err)
	}
	return nil
}

// Drop deletes checkpoint name of sandbox id; one that is not there is
// no error.
func (p *Pool) Drop(id, name string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	if err := subvolDelete(p.checkpoint(id, name)); err != nil {
		return err
	}
	return p.settle()
}

// settle has the filesystem free deleted subvolumes' blocks soon, so
// that their sandbox's quota has them back.
func (p *Pool) settle() error {
	if err := syncFS(p.root); err != nil {
		return fmt.Errorf("checkpoint pool: sync: %w", err)
	}
	return nil
}

// Delete deletes sandbox id's files and every checkpoint of it.
func (p *Pool) Delete(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	var errs []error
	if _, err := os.Lstat(p.Dir(id)); err == nil {
		errs = append(errs, p.discard(p.Dir(id)))
	}
	cps := filepath.Join(p.checkpointsDir(), id)
	entries, err := os.ReadDir(cps)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		errs = append(errs, subvolDelete(filepath.Join(cps, e.Name())))
	}
	if err := os.Remove(cps); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, p.settle())
	// Its quota group goes once the cleaner freed what it was charged
	// for; until then (EBUSY) it stays, empty of members, and is taken
	// again by a sandbox whose id starts alike.
	_ = destroyGroup(p.root, p.groupOf(id))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete sandbox %s from the checkpoint pool: %w", id, err)
	}
	return nil
}

// Sandboxes lists the sandboxes with files or checkpoints in the pool.
func (p *Pool) Sandboxes() ([]string, error) {
	seen := map[string]bool{}
	for _, d := range []string{p.liveDir(), p.checkpointsDir()} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, fmt.Errorf("checkpoint pool: %w", err)
		}
		for _, e := range entries {
			if sandbox.ValidID(e.Name()) {
				seen[e.Name()] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// DeleteUnowned deletes the files and checkpoints of the sandboxes in
// the pool that owned does not hold and that were all last changed
// before old: what an engine killed in the middle of a fork or a delete
// leaves (R4). It returns how many sandboxes' it deleted.
func (p *Pool) DeleteUnowned(owned map[string]bool, old time.Time) (int, error) {
	ids, err := p.Sandboxes()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		if owned[id] || !p.changedBefore(id, old) {
			continue
		}
		if err := p.Delete(id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// changedBefore reports whether sandbox id's files and checkpoints in
// the pool were all last changed before old.
func (p *Pool) changedBefore(id string, old time.Time) bool {
	for _, path := range []string{p.Dir(id), filepath.Join(p.checkpointsDir(), id)} {
		if info, err := os.Stat(path); err == nil && !info.ModTime().Before(old) {
			return false
		}
	}
	return true
}

// Limit sets the limit of sandbox id's files and checkpoints together,
// in bytes (0: none).
func (p *Pool) Limit(id string, limit int64) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := limitGroup(p.root, p.groupOf(id), limit); err != nil {
		return fmt.Errorf("checkpoint pool: %w", err)
	}
	return nil
}

// recover deletes what an interrupted operation left: subvolumes in the
// trash, unfinished copies in live/ and checkpoints/.
func (p *Pool) recover() error {
	var errs []error
	sweep := func(dir string, hidden bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, e := range entries {
			if hidden && !strings.HasPrefix(e.Name(), ".") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if isSubvolume(path) {
				errs = append(errs, subvolDelete(path))
			} else {
				errs = append(errs, os.RemoveAll(path))
			}
		}
	}
	sweep(p.trashDir(), false)
	sweep(p.liveDir(), true)
	return errors.Join(errs...)
}

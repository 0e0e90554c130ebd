package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs ioctls the pool uses (linux/btrfs.h). Each takes a 4096-byte
// argument, so their numbers are _IOW(0x94, nr, 4096).
const (
	iocSubvolCreate = 0x5000940e // BTRFS_IOC_SUBVOL_CREATE
	iocSnapDestroy  = 0x5000940f // BTRFS_IOC_SNAP_DESTROY
	iocSnapCreateV2 = 0x50009417 // BTRFS_IOC_SNAP_CREATE_V2

	subvolReadOnly = 1 << 1 // BTRFS_SUBVOL_RDONLY

	btrfsMagic = 0x9123683e // BTRFS_SUPER_MAGIC
)

// volArgs is struct btrfs_ioctl_vol_args: an fd and a name.
type volArgs struct {
	fd   int64
	name [4088]byte
}

// volArgsV2 is struct btrfs_ioctl_vol_args_v2; with the inherit flag,
// unused[0] and [1] are the size of and a pointer to a struct
// btrfs_qgroup_inherit (see inheritOf).
type volArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [4040]byte
}

var (
	_ [4096 - unsafe.Sizeof(volArgs{})]byte
	_ [unsafe.Sizeof(volArgs{}) - 4096]byte
	_ [4096 - unsafe.Sizeof(volArgsV2{})]byte
	_ [unsafe.Sizeof(volArgsV2{}) - 4096]byte
)

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// openDir opens a directory for an ioctl on it.
func openDir(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
}

// subvolCreate makes an empty subvolume at path, a member of qgroup grp
// when grp is not 0.
func subvolCreate(path string, grp uint64) error {
	dir, name := filepath.Split(path)
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var a volArgsV2
	in := inheritOf(&a, grp)
	copy(a.name[:len(a.name)-1], name)
	err = ioctl(fd, iocSubvolCreate2, unsafe.Pointer(&a))
	runtime.KeepAlive(in)
	if err != nil {
		return fmt.Errorf("create subvolume %s: %w", path, err)
	}
	return nil
}

// inheritOf makes a's new subvolume a member of qgroup grp (0: none).
// The caller keeps the answer alive until the ioctl returned.
func inheritOf(a *volArgsV2, grp uint64) *inherit {
	if grp == 0 {
		return nil
	}
	in := &inherit{numQgroups: 1, qgroups: [1]uint64{grp}}
	a.flags |= subvolInherit
	a.unused[0] = uint64(unsafe.Sizeof(*in))
	a.unused[1] = uint64(uintptr(unsafe.Pointer(in)))
	return in
}

// snapshot makes dst a snapshot of the subvolume src, read-only when
// readOnly, a member of qgroup grp when grp is not 0. Both must be in
// the same btrfs filesystem.
func snapshot(src, dst string, readOnly bool, grp uint64) error {
	sfd, err := openDir(src)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	dir, name := filepath.Split(dst)
	dfd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	a := volArgsV2{fd: int64(sfd)}
	if readOnly {
		a.flags = subvolReadOnly
	}
	in := inheritOf(&a, grp)
	copy(a.name[:len(a.name)-1], name)
	err = ioctl(dfd, iocSnapCreateV2, unsafe.Pointer(&a))
	runtime.KeepAlive(in)
	if err != nil {
		return fmt.Errorf("snapshot %s as %s: %w", src, dst, err)
	}
	return nil
}

// subvolDelete deletes the subvolume at path; the filesystem frees its
// blocks in the background. A path that is not there is no error.
func subvolDelete(path string) error {
	dir, name := filepath.Split(path)
	fd, err := openDir(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var a volArgs
	copy(a.name[:len(a.name)-1], name)
	switch err := ioctl(fd, iocSnapDestroy, unsafe.Pointer(&a)); {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("delete subvolume %s: %w", path, err)
	}
	return nil
}

// isSubvolume reports whether path is a subvolume's root (inode 256).
func isSubvolume(path string) bool {
	var st unix.Stat_t
	return unix.Lstat(path, &st) == nil && st.Ino == 256 && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// onBtrfs reports whether path is on a btrfs filesystem.
func onBtrfs(path string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(path, &fs) == nil && uint32(fs.Type) == btrfsMagic
}

// exchange swaps the entries a and b of one directory atomically.
func exchange(a, b string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
	}
	return nil
}

// Quotas: simple quotas (kernel 6.7+) charge each extent to the
// subvolume that wrote it, so a snapshot costs its group nothing until
// blocks change, and no operation rescans the filesystem.
const (
	iocQuotaCtl      = 0xc0109428 // BTRFS_IOC_QUOTA_CTL, _IOWR(0x94, 40, 16)
	iocQgroupCreate  = 0x4010942a // BTRFS_IOC_QGROUP_CREATE, _IOW(0x94, 42, 16)
	iocQgroupLimit   = 0x8030942b // BTRFS_IOC_QGROUP_LIMIT, _IOR(0x94, 43, 48)
	iocSubvolCreate2 = 0x50009418 // BTRFS_IOC_SUBVOL_CREATE_V2
	iocInoLookup     = 0xd0009412 // BTRFS_IOC_INO_LOOKUP, _IOWR(0x94, 18, 4096)
	iocTreeSearch    = 0xd0009411 // BTRFS_IOC_TREE_SEARCH, _IOWR(0x94, 17, 4096)
	iocSync          = 0x9408     // BTRFS_IOC_SYNC, _IO(0x94, 8)

	quotaEnableSimple = 4      // BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
	subvolInherit     = 1 << 2 // BTRFS_SUBVOL_QGROUP_INHERIT
	limitMaxRfer      = 1 << 0 // BTRFS_QGROUP_LIMIT_MAX_RFER

	quotaTree      = 8   // BTRFS_QUOTA_TREE_OBJECTID
	qgroupInfoKey  = 242 // BTRFS_QGROUP_INFO_KEY
	firstFreeObjID = 256 // BTRFS_FIRST_FREE_OBJECTID
)

type qgroupLimit struct {
	flags, maxRfer, maxExcl, rsvRfer, rsvExcl uint64
}

// inherit is struct btrfs_qgroup_inherit with room for one qgroup.
type inherit struct {
	flags, numQgroups, numRefCopies, numExclCopies uint64
	lim                                            qgroupLimit
	qgroups                                        [1]uint64
}

// enableQuotas turns simple quotas on for the filesystem of dir (a no-op
// when they are on).
func enableQuotas(dir string) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := struct{ cmd, status uint64 }{cmd: quotaEnableSimple}
	if err := ioctl(fd, iocQuotaCtl, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("enable simple quotas on %s (kernel 6.7 or later): %w", dir, err)
	}
	return nil
}

// createGroup makes qgroup id in the filesystem of dir; one that exists
// is no error.
func createGroup(dir string, id uint64) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := struct{ create, qgroupid uint64 }{1, id}
	if err := ioctl(fd, iocQgroupCreate, unsafe.Pointer(&a)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create qgroup %d/%d: %w", id>>48, id&(1<<48-1), err)
	}
	return nil
}

// destroyGroup removes qgroup id; it must be empty and have no members
// (the caller ignores EBUSY: the cleaner has not freed its blocks yet).
func destroyGroup(dir string, id uint64) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := struct{ create, qgroupid uint64 }{0, id}
	if err := ioctl(fd, iocQgroupCreate, unsafe.Pointer(&a)); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// limitGroup bounds what qgroup id's members may take (0: no bound).
func limitGroup(dir string, id uint64, bytes int64) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a := struct {
		qgroupid uint64
		lim      qgroupLimit
	}{qgroupid: id, lim: qgroupLimit{flags: limitMaxRfer, maxRfer: uint64(bytes)}}
	if bytes <= 0 {
		a.lim.maxRfer = ^uint64(0)
	}
	if err := ioctl(fd, iocQgroupLimit, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("limit qgroup %d/%d: %w", id>>48, id&(1<<48-1), err)
	}
	return nil
}

// groupUsage is what qgroup id's members take now (referenced bytes);
// -1 when it cannot be read.
func groupUsage(dir string, id uint64) int64 {
	fd, err := openDir(dir)
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	var a struct {
		treeID, minObj, maxObj, minOff, maxOff, minTrans, maxTrans uint64
		minType, maxType, nrItems, _                               uint32
		_                                                          [4]uint64
		buf                                                        [4096 - 104]byte
	}
	a.treeID, a.minObj, a.maxObj = quotaTree, 0, 0
	a.minOff, a.maxOff = id, id
	a.maxTrans = ^uint64(0)
	a.minType, a.maxType, a.nrItems = qgroupInfoKey, qgroupInfoKey, 1
	if err := ioctl(fd, iocTreeSearch, unsafe.Pointer(&a)); err != nil || a.nrItems < 1 {
		return -1
	}
	// struct btrfs_ioctl_search_header (32 bytes), then the item:
	// generation, rfer, rfer_cmpr, excl, excl_cmpr (little-endian).
	rfer := *(*uint64)(unsafe.Pointer(&a.buf[32+8]))
	return int64(rfer)
}

// subvolID is the id of the subvolume whose root is dir.
func subvolID(dir string) (uint64, error) {
	fd, err := openDir(dir)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var a struct {
		treeID, objectID uint64
		name             [4080]byte
	}
	a.objectID = firstFreeObjID
	if err := ioctl(fd, iocInoLookup, unsafe.Pointer(&a)); err != nil {
		return 0, fmt.Errorf("subvolume id of %s: %w", dir, err)
	}
	return a.treeID, nil
}

// syncFS commits the filesystem of dir and wakes its cleaner, which
// frees the blocks of deleted subvolumes (and their quota groups'
// charge) in the background.
func syncFS(dir string) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return ioctl(fd, iocSync, nil)
}

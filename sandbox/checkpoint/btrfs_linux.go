package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// volArgsV2 is struct btrfs_ioctl_vol_args_v2, without the qgroup
// inheritance the pool does not use.
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

// subvolCreate makes an empty subvolume at path.
func subvolCreate(path string) error {
	dir, name := filepath.Split(path)
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var a volArgs
	copy(a.name[:len(a.name)-1], name)
	if err := ioctl(fd, iocSubvolCreate, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("create subvolume %s: %w", path, err)
	}
	return nil
}

// snapshot makes dst a snapshot of the subvolume src, read-only when
// readOnly. Both must be in the same btrfs filesystem.
func snapshot(src, dst string, readOnly bool) error {
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
	copy(a.name[:len(a.name)-1], name)
	if err := ioctl(dfd, iocSnapCreateV2, unsafe.Pointer(&a)); err != nil {
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

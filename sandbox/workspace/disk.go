package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/diskimage"
)

// A chat's disk (T4): with Config.ChatDisk, a new chat's directory is a
// filesystem of its own, a sparse ext4 image of MaxChatBytes
// (package diskimage) loop-mounted on Root/chats/{sandboxId}, so that
// uploads, intermediate files and unfinished uploads together stop at
// the chat's quota whoever writes them: the upload route, the file APIs,
// and the sandbox's own commands, which no check before a write can
// stop. The images live in Root/disks/{sandboxId}.img, out of the
// sandbox's reach. A chat made before keeps its host directory (no image
// is put over files that exist).
const disksDir = "disks"

// diskSize is the size of a chat's image: the quota, and room for ext4's
// own structures (its journal and inode tables take about 6% of 1 GiB and
// nearly 2 MiB of 10 MiB), so that files of the whole quota fit. What the
// sandbox writes may then pass the quota by up to that room (an eighth
// and 4 MiB), never more; the routes still refuse writes past the quota
// itself.
func (s *Store) diskSize() int64 { return s.maxChat + s.maxChat/8 + 4<<20 }

func (s *Store) diskImage(id string) string { return filepath.Join(s.root, disksDir, id+".img") }

// attach mounts the chat's image on its directory when it has one (after
// a reboot, or in another engine process), and with create makes one for
// a chat whose directory is still empty. Once attached in this process, a
// chat is not looked at again. Concurrent callers, also in other
// processes, are serialised by a lock file beside the image.
func (s *Store) attach(id string, create bool) error {
	if _, ok := s.attached.Load(id); ok {
		return nil
	}
	img := s.diskImage(id)
	if !s.chatDisk || !create {
		// Images made while the setting was on stay in use; without
		// create, there is nothing to do for a chat that has none.
		if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return fmt.Errorf("create the chats' disks directory: %w", err)
	}
	// Not img+".lock": diskimage.EnsureBytes takes that one, and a
	// second flock of one file in one process waits for the first.
	lock, err := os.OpenFile(img+".attach", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock the chat's disk: %w", err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock the chat's disk: %w", err)
	}
	dir := s.chatDir(id)
	switch _, err := os.Stat(img); {
	case err == nil:
		if err := diskimage.EnsureBytes(img, dir, 0); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case !create || !s.chatDisk || s.maxChat < 0:
		return nil
	default:
		empty, err := isEmptyDir(dir)
		if err != nil {
			return err
		}
		if !empty {
			// A chat of before: its files stay where they are, for good.
			s.attached.Store(id, true)
			return nil
		}
		if err := diskimage.EnsureBytes(img, dir, s.diskSize()); err != nil {
			return fmt.Errorf("give the chat a disk of its quota (FLOWBOX_FILES_CHAT_DISK): %w", err)
		}
		// The filesystem's root is the chat's directory: its mode, not
		// mkfs's.
		mode := os.FileMode(0o755)
		if err := os.Chmod(dir, mode); err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(dir, "lost+found"))
	}
	s.attached.Store(id, true)
	return nil
}

// detach unmounts the chat's disk and removes its image; the chat's
// directory is then an empty mount point for the caller to remove.
func (s *Store) detach(id string) error {
	s.attached.Delete(id)
	img := s.diskImage(id)
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := diskimage.Unmount(s.chatDir(id)); err != nil {
		return err
	}
	if err := os.Remove(img); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_ = os.Remove(img + ".lock")
	_ = os.Remove(img + ".attach")
	return nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// memberImage is a warm pool member's disk, made with the member so that
// a new chat's first command does not wait for mkfs: the chat that adopts
// the member takes the disk with the member's directory (moveMemberDisk).
func (s *Store) memberImage(poolID string) string {
	return filepath.Join(s.root, disksDir, poolDir, poolID+".img")
}

// attachMember gives a new member's directory a disk of the chat quota.
func (s *Store) attachMember(poolID string) error {
	if !s.chatDisk || s.maxChat < 0 {
		return nil
	}
	img, dir := s.memberImage(poolID), s.memberDir(poolID)
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return fmt.Errorf("create the warm pool's disks directory: %w", err)
	}
	if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
		if empty, err := isEmptyDir(dir); err != nil || !empty {
			return err // a member of before: its directories stay
		}
	}
	if err := diskimage.EnsureBytes(img, dir, s.diskSize()); err != nil {
		return fmt.Errorf("give a warm pool member a disk of the chat quota (FLOWBOX_FILES_CHAT_DISK): %w", err)
	}
	_ = os.Remove(filepath.Join(dir, "lost+found"))
	return os.Chmod(dir, 0o755)
}

func (s *Store) memberOnDisk(poolID string) bool {
	_, err := os.Stat(s.memberImage(poolID))
	return err == nil
}

// moveMemberDisk is moveMember for a member with a disk: the chat's
// directory is made, the member's filesystem moved onto it
// (diskimage.Move) and its image renamed after the chat. It reports false,
// having changed nothing, when the chat has a directory already.
func (s *Store) moveMemberDisk(scope sandbox.Scope, poolID string) (bool, error) {
	id := scope.SandboxID()
	chat, member := s.chatDir(id), s.memberDir(poolID)
	lock, err := os.OpenFile(s.diskImage(id)+".attach", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, fmt.Errorf("lock the chat's disk: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return false, fmt.Errorf("lock the chat's disk: %w", err)
	}
	if err := os.Mkdir(chat, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("create the chat's workspace directory: %w", err)
	}
	if err := renameNoReplace(s.memberImage(poolID), s.diskImage(id)); err != nil {
		_ = os.Remove(chat)
		return false, fmt.Errorf("give the chat warm pool member %s's disk: %w", poolID, err)
	}
	if err := diskimage.Move(member, chat); err != nil {
		_ = renameNoReplace(s.diskImage(id), s.memberImage(poolID))
		_ = os.Remove(chat)
		return false, fmt.Errorf("give the chat warm pool member %s's disk: %w", poolID, err)
	}
	s.attached.Store(id, true)
	if err := os.Remove(member); err != nil {
		return true, fmt.Errorf("replace the member's directory with a link: %w", err)
	}
	return true, nil
}

// detachMember unmounts a member's disk and removes its image.
func (s *Store) detachMember(poolID string) error {
	if !s.memberOnDisk(poolID) {
		return nil
	}
	if err := diskimage.Unmount(s.memberDir(poolID)); err != nil {
		return err
	}
	return os.Remove(s.memberImage(poolID))
}

// adoptOntoChatDisk adopts a member with a disk for a chat that has a
// directory already (files uploaded before its first command): the two
// disks cannot be exchanged, so the chat keeps its own and the member's,
// which a new member's sandbox has written nothing to, is removed with
// the member's directory. The provider then finds the chat's mounts
// different from the member's and binds the chat's (bwrap ends the
// member's namespace; the next command starts one). A Docker container's binds cannot change: with chat disks, run
// Docker without a warm pool (the configuration refuses both).
func (s *Store) adoptOntoChatDisk(scope sandbox.Scope, poolID string) error {
	if _, err := s.ensure(scope); err != nil {
		return err
	}
	member := s.memberDir(poolID)
	for _, a := range []Area{Uploads, Intermediate} {
		if err := os.Remove(filepath.Join(member, string(a))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("warm pool member %s's directory is not empty (%w): not adopted", poolID, err)
		}
	}
	if err := s.detachMember(poolID); err != nil {
		return err
	}
	// No link at the member's path: the provider must see that the
	// member's mounts are gone (bwrap compares the files they lead to)
	// and bind the chat's.
	if err := os.Remove(member); err != nil {
		return fmt.Errorf("remove the member's directory: %w", err)
	}
	return nil
}

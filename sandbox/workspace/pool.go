package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// The warm pool's members (sandbox.PoolWorkspace) get directories of
// their own under Root/pool/<poolId>, mounted where a chat's are. A chat
// that adopts a member takes those very directories (the member's
// mounts keep working): a chat without a directory yet takes the
// member's whole directory, renamed into its place; in a chat that has
// one, each is exchanged with the chat's own and the chat's files are
// moved into it. Root/pool/<poolId> then becomes a link to the chat's
// directory, for providers that find a mount's source by its path again
// when they restart the sandbox. The links go once their chat's
// directory is gone (Sweep).

const (
	poolDir = "pool"
	// adoptingFile marks a chat directory an adoption is moving files
	// in; a second adoption of the same chat is refused while it exists.
	adoptingFile = "adopting"
	// sweepAfter is how old an unknown member directory must be before
	// Sweep removes it: its member may just be being created.
	sweepAfter = 10 * time.Minute
)

var _ sandbox.PoolWorkspace = (*Store)(nil)

func (s *Store) memberDir(poolID string) string { return filepath.Join(s.root, poolDir, poolID) }

// MemberMounts creates a member's uploads and intermediate directories and
// returns their mounts.
func (s *Store) MemberMounts(ctx context.Context, poolID string) ([]sandbox.Mount, error) {
	if !sandbox.ValidID(poolID) {
		return nil, fmt.Errorf("%w: %q is not a pool id", sandbox.ErrInvalidPath, poolID)
	}
	s.chatsOnce.Do(func() { s.chatsErr = s.makeChats() })
	if s.chatsErr != nil {
		return nil, s.chatsErr
	}
	mode := os.FileMode(0o755)
	if s.worldWritable {
		mode = 0o700
	}
	if err := mkdir(filepath.Join(s.root, poolDir), mode); err != nil {
		return nil, fmt.Errorf("create the warm pool's directory: %w", err)
	}
	dir := s.memberDir(poolID)
	if s.pool != nil {
		// Its files in the pool, under its own id: the chat that adopts it
		// links to them (chatpool.go).
		if err := os.Symlink(s.pool.Dir(poolID), dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create a warm pool member's directory: %w", err)
		}
		if fid, ok := s.linkedID(dir); !ok || fid != poolID {
			return nil, fmt.Errorf("create a warm pool member's directory: %s is in the way; move it away", dir)
		}
		if err := s.createPooled(poolID); err != nil {
			return nil, fmt.Errorf("create a warm pool member's files: %w", err)
		}
	} else if err := mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create a warm pool member's directory: %w", err)
	}
	if err := s.attachMember(poolID); err != nil {
		return nil, err
	}
	var mounts []sandbox.Mount
	for _, a := range []Area{Uploads, Intermediate} {
		if err := mkdir(filepath.Join(dir, string(a)), s.areaMode()); err != nil {
			return nil, fmt.Errorf("create a warm pool member's directory: %w", err)
		}
		mounts = append(mounts, sandbox.Mount{Source: filepath.Join(dir, string(a)), Target: a.Target()})
	}
	return mounts, nil
}

// Adopt gives the chat of scope the member's directories: afterwards the
// chat's uploads and intermediate directories are the member's, holding
// the chat's files, and the member's path links to the chat's directory.
// On failure nothing is deleted: a file not moved stays where it was.
func (s *Store) Adopt(ctx context.Context, scope sandbox.Scope, poolID string) error {
	if !sandbox.ValidID(poolID) {
		return fmt.Errorf("%w: %q is not a pool id", sandbox.ErrInvalidPath, poolID)
	}
	if err := checkScope(scope); err != nil {
		return err
	}
	if s.pool != nil {
		return s.adoptPooled(scope, poolID)
	}
	if moved, err := s.moveMember(scope, poolID); moved || err != nil {
		return err
	}
	if s.memberOnDisk(poolID) {
		return s.adoptOntoChatDisk(scope, poolID)
	}
	chat, err := s.ensure(scope)
	if err != nil {
		return err
	}
	mark := filepath.Join(chat, adoptingFile)
	f, err := os.OpenFile(mark, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("mark the chat's directory as being adopted: %w", err)
	}
	f.Close()
	defer os.Remove(mark)
	member := s.memberDir(poolID)
	// Never through a link: an adopted member's path leads to its chat.
	if fi, err := os.Lstat(member); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("it is no directory (adopted already)")
		}
		return fmt.Errorf("warm pool member %s's directory: %w", poolID, err)
	}
	for _, a := range []Area{Uploads, Intermediate} {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := exchange(filepath.Join(member, string(a)), filepath.Join(chat, string(a))); err != nil {
			return err
		}
	}
	// Both areas now live in the chat's directory; the member's holds
	// nothing more and becomes the link.
	if err := os.Remove(member); err != nil {
		return fmt.Errorf("replace the member's directory with a link: %w", err)
	}
	// Relative, so that it leads there for a Docker daemon that sees the
	// files at another path too.
	if err := os.Symlink(filepath.Join("..", chatsDir, filepath.Base(chat)), member); err != nil {
		return fmt.Errorf("link the member's directory to the chat's: %w", err)
	}
	return nil
}

// moveMember gives a chat that has no directory yet the member's whole:
// owner.json and staging are added to it, it is renamed into the chat's
// place (never over a directory that appeared meanwhile) and a link
// left at its path. It reports false, having changed nothing, when the
// chat has a directory already; Adopt then moves the directories one by
// one. One rename instead of creating the chat's directories and
// exchanging them: the first command of a new chat waits for it.
func (s *Store) moveMember(scope sandbox.Scope, poolID string) (bool, error) {
	s.chatsOnce.Do(func() { s.chatsErr = s.makeChats() })
	if s.chatsErr != nil {
		return false, s.chatsErr
	}
	chat, member := s.chatDir(scope.SandboxID()), s.memberDir(poolID)
	if _, err := os.Lstat(chat); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false, nil // the chat has a directory, or Adopt reports why it cannot be read
	}
	// Never through a link: an adopted member's path leads to its chat.
	if fi, err := os.Lstat(member); err != nil || !fi.IsDir() {
		return false, nil // Adopt says what is wrong with it
	}
	undo := func() {
		_ = os.Remove(filepath.Join(member, ownerFile))
		_ = os.Remove(filepath.Join(member, stagingDir))
	}
	// owner.json before the directory appears among the chats (see the
	// package comment); one left by an adoption that crashed names
	// another chat.
	if err := os.Remove(filepath.Join(member, ownerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("record the owner of the chat's workspace: %w", err)
	}
	if _, err := s.writeOwner(member, scope); err != nil {
		undo()
		return false, fmt.Errorf("record the owner of the chat's workspace: %w", err)
	}
	if err := mkdir(filepath.Join(member, stagingDir), 0o700); err != nil {
		undo()
		return false, fmt.Errorf("create the chat's workspace directory: %w", err)
	}
	if s.memberOnDisk(poolID) {
		// A mount point cannot be renamed: its filesystem moves instead.
		moved, err := s.moveMemberDisk(scope, poolID)
		if !moved {
			undo()
			return false, err
		}
		if err != nil {
			return true, err
		}
	} else if err := renameNoReplace(member, chat); err != nil {
		undo()
		if errors.Is(err, fs.ErrExist) {
			return false, nil // the chat's directory appeared meanwhile
		}
		return false, fmt.Errorf("move warm pool member %s's directory to the chat: %w", poolID, err)
	}
	s.syncOwner(scope.SandboxID(), filepath.Join(chat, ownerFile))
	// Relative, so that it leads there for a Docker daemon that sees the
	// files at another path too.
	if err := os.Symlink(filepath.Join("..", chatsDir, filepath.Base(chat)), member); err != nil {
		return true, fmt.Errorf("link the member's directory to the chat's: %w", err)
	}
	return true, nil
}

// exchange swaps the directories from (the member's, empty) and to (the
// chat's) atomically, then moves what the chat had into the directory
// now at to, and removes the emptied one. A file saved into the old
// directory while this runs is moved too; one saved after it was removed
// fails, and its upload says so.
func exchange(from, to string) error {
	if err := renameExchange(from, to); err != nil {
		return fmt.Errorf("exchange %s with %s: %w", from, to, err)
	}
	for range 10 {
		entries, err := os.ReadDir(from)
		if err != nil {
			return fmt.Errorf("read %s: %w", from, err)
		}
		for _, e := range entries {
			if err := renameNoReplace(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return fmt.Errorf("move %s into %s: %w", e.Name(), to, err)
			}
		}
		err = os.Remove(from)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("remove %s: %w", from, err)
		}
	}
	return fmt.Errorf("remove %s: files keep arriving in it", from)
}

// Discard removes a member's directories, which its sandbox never used
// for a chat, or its link once the chat's directory is gone. It deletes
// no file: a directory that is not
// empty stays, and the error names it.
func (s *Store) Discard(ctx context.Context, poolID string) error {
	if !sandbox.ValidID(poolID) {
		return fmt.Errorf("%w: %q is not a pool id", sandbox.ErrInvalidPath, poolID)
	}
	dir := s.memberDir(poolID)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("discard a warm pool member's directory: %w", err)
	case s.pool != nil && fi.Mode()&fs.ModeSymlink != 0 && s.isMemberLink(poolID):
		return s.discardPooled(poolID)
	case fi.Mode()&fs.ModeSymlink != 0:
		// An adopted member's link stays while its chat's directory
		// exists: a Docker sandbox finds its mounts through it.
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return os.Remove(dir)
		}
		return nil
	}
	for _, name := range []string{string(Uploads), string(Intermediate), ""} {
		if name == "" {
			if err := s.detachMember(poolID); err != nil {
				return fmt.Errorf("discard a warm pool member's disk (left in place): %w", err)
			}
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("discard a warm pool member's directory (left in place): %w", err)
		}
	}
	return nil
}

// Sweep removes the links whose chat directory is gone, and the
// directories of members that keep does not know and that are older
// than ten minutes; with the pool, also the files in it that no link
// leads to, as old. It returns how many it removed.
func (s *Store) Sweep(ctx context.Context, keep func(poolID string) bool) (int, error) {
	root := filepath.Join(s.root, poolDir)
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("sweep the warm pool's directories: %w", err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			break
		}
		path := filepath.Join(root, e.Name())
		if s.pool != nil && e.Type()&fs.ModeSymlink != 0 && sandbox.ValidID(e.Name()) && s.isMemberLink(e.Name()) {
			// A member's files in the pool: discarded like its
			// directory, unless a chat took them.
			if keep(e.Name()) || s.adoptedPooled(e.Name()) {
				continue
			}
			if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) < sweepAfter {
				continue
			}
			if err := s.discardPooled(e.Name()); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				if err := os.Remove(path); err == nil {
					removed++
				}
			}
			continue
		}
		if !sandbox.ValidID(e.Name()) || keep(e.Name()) {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < sweepAfter {
			continue
		}
		if err := s.Discard(ctx, e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if s.pool != nil && ctx.Err() == nil {
		n, err := s.sweepPooled(ctx)
		removed += n
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// isMemberLink reports whether member poolID's path links to its own
// files in the pool.
func (s *Store) isMemberLink(poolID string) bool {
	fid, ok := s.linkedID(s.memberDir(poolID))
	return ok && fid == poolID
}

package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/flowbox/flowbox/sandbox"
)

// Checkpointed files (R1). With Config.Pool, a chat's directory is a link
// to a subvolume of the pool, Pool.Dir(fid), which holds owner.json,
// uploads, intermediate and staging as a directory would:
//
//	R/chats/{sandboxId} -> {pool}/live/{fid}
//
// fid is the chat's sandbox ID, or the warm pool member's ID whose
// directories the chat adopted (a member's directory is such a link too,
// R/pool/{poolId}). A checkpoint of the chat's files is a snapshot of the
// subvolume, taken, restored, forked and dropped with its sandbox's under
// the same name (sandbox.FileCheckpoints): a rewind brings back the
// uploads and intermediate files of that turn, a fork copies them. The
// subvolume's quota group bounds what the files and their checkpoints
// take together, so that what the sandbox writes stops there too (EDQUOT;
// an upload meets it as a *QuotaError).
//
// The link is made before the subvolume and removed after it, so that
// the pool never holds a chat's files without a link that Dirs finds: a
// link whose files are missing is a directory whose owner is unknown,
// which reconciliation removes. A chat made before the pool keeps its
// directory, and its files have no checkpoints (sandbox.ErrUnsupported).
//
// A chat that has files cannot take a warm pool member's: their
// directories cannot be exchanged across subvolumes. Adoptable says so,
// and the manager creates that chat's sandbox instead.

// Pool keeps the chats' files in subvolumes, one per chat, with their
// checkpoints (package checkpoint's Pool, opened with OpenChats).
type Pool interface {
	// Create makes files id, empty, with limit bytes (0: none); one that
	// exists is kept.
	Create(id string, limit int64) error
	// Dir is where files id are.
	Dir(id string) string
	// Exists reports whether files id are in the pool.
	Exists(id string) bool
	Checkpoint(id, name string) (sandbox.Checkpoint, error)
	// Checkpoints lists files id's, oldest first.
	Checkpoints(id string) ([]sandbox.Checkpoint, error)
	// Restore makes files id what they were at checkpoint name; Reset
	// empties them.
	Restore(id, name string) error
	Reset(id string) error
	// Fork makes files dst a copy of files src's checkpoint name.
	Fork(src, name, dst string, limit int64) error
	// Drop deletes one checkpoint; Delete the files and all of theirs.
	Drop(id, name string) error
	Delete(id string) error
	// Sandboxes lists the ids with files or checkpoints in the pool.
	Sandboxes() ([]string, error)
}

// poolLimit is the quota of a chat's files in the pool: the chat's quota
// and the room a chat's disk has besides (diskSize), or none.
func (s *Store) poolLimit() int64 {
	if s.maxChat < 0 {
		return 0
	}
	return s.diskSize()
}

// makePooled makes chat id's link and files in the pool when missing.
func (s *Store) makePooled(id string) error {
	dir := s.chatDir(id)
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil // a chat of before the pool: its directory stays
	case err == nil && fi.Mode()&fs.ModeSymlink == 0:
		return fmt.Errorf("%s exists and is not a directory; move it away", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err != nil:
		if err := os.Symlink(s.pool.Dir(id), dir); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	fid, ok := s.pooledID(id)
	if !ok {
		return fmt.Errorf("%s is a link that does not lead into the checkpoint pool; move it away", dir)
	}
	if s.pool.Exists(fid) {
		return nil
	}
	return s.createPooled(fid)
}

// createPooled makes files fid in the pool, its root with the mode of a
// chat's directory whatever the umask.
func (s *Store) createPooled(fid string) error {
	if err := s.pool.Create(fid, s.poolLimit()); err != nil {
		return err
	}
	return os.Chmod(s.pool.Dir(fid), 0o755)
}

// linkedID is the id of the files in the pool that the link at path
// leads to.
func (s *Store) linkedID(path string) (string, bool) {
	if s.pool == nil {
		return "", false
	}
	target, err := os.Readlink(path)
	if err != nil {
		return "", false
	}
	fid := filepath.Base(target)
	if !sandbox.ValidID(fid) || s.pool.Dir(fid) != target {
		return "", false
	}
	return fid, true
}

// pooledID is the id of chat id's files in the pool, when its directory
// is a link there.
func (s *Store) pooledID(id string) (string, bool) { return s.linkedID(s.chatDir(id)) }

// pooledEntry reports whether a chat directory's entry is a link into
// the pool (Dirs lists them with the directories).
func (s *Store) pooledEntry(e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	_, ok := s.pooledID(e.Name())
	return ok
}

// Adoptable reports whether the chat of sandbox id may take a warm pool
// member's directories: always, unless its files are in the pool and it
// has some already.
func (s *Store) Adoptable(id string) bool {
	if s.pool == nil {
		return true
	}
	_, err := os.Lstat(s.chatDir(id))
	return errors.Is(err, fs.ErrNotExist)
}

// adoptPooled is Adopt with the pool: the chat's link leads to the
// member's files, which owner.json and staging make the chat's.
func (s *Store) adoptPooled(scope sandbox.Scope, poolID string) error {
	fid, ok := s.linkedID(s.memberDir(poolID))
	if !ok || fid != poolID || !s.pool.Exists(fid) {
		return fmt.Errorf("warm pool member %s has no files in the checkpoint pool", poolID)
	}
	files := s.pool.Dir(fid)
	// One left by an adoption that crashed names another chat.
	if err := os.Remove(filepath.Join(files, ownerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("record the owner of the chat's workspace: %w", err)
	}
	if _, err := s.writeOwner(files, scope); err != nil {
		return fmt.Errorf("record the owner of the chat's workspace: %w", err)
	}
	if err := mkdir(filepath.Join(files, stagingDir), 0o700); err != nil {
		return fmt.Errorf("create the chat's workspace directory: %w", err)
	}
	if err := os.Symlink(files, s.chatDir(scope.SandboxID())); err != nil {
		_ = os.Remove(filepath.Join(files, ownerFile))
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("the chat has files of its own: warm pool member %s cannot take them", poolID)
		}
		return fmt.Errorf("link the chat's directory to warm pool member %s's: %w", poolID, err)
	}
	s.syncOwner(scope.SandboxID(), filepath.Join(files, ownerFile))
	return nil
}

// adoptedPooled reports whether member poolID's files are a chat's: the
// chat owner.json names links to them.
func (s *Store) adoptedPooled(poolID string) bool {
	data, err := os.ReadFile(filepath.Join(s.pool.Dir(poolID), ownerFile))
	if err != nil {
		return false
	}
	var doc ownerDoc
	if json.Unmarshal(data, &doc) != nil || doc.AppID == "" {
		return false
	}
	scope := sandbox.Scope{AppID: doc.AppID, UserID: doc.UserID, ChatID: doc.ChatID}
	fid, ok := s.pooledID(scope.SandboxID())
	return ok && fid == poolID
}

// discardPooled removes a member's files and link, unless a chat took
// them.
func (s *Store) discardPooled(poolID string) error {
	if s.adoptedPooled(poolID) {
		return nil
	}
	if err := s.pool.Delete(poolID); err != nil {
		return fmt.Errorf("discard a warm pool member's files: %w", err)
	}
	if err := os.Remove(s.memberDir(poolID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("discard a warm pool member's directory: %w", err)
	}
	return nil
}

// sweepPooled deletes the files in the pool that no chat's or member's
// link leads to, once older than sweepAfter: what a crash between a
// member's or a fork's steps may leave.
func (s *Store) sweepPooled(ctx context.Context) (int, error) {
	ids, err := s.pool.Sandboxes()
	if err != nil {
		return 0, err
	}
	linked := map[string]bool{}
	for _, d := range []string{chatsDir, poolDir} {
		entries, err := os.ReadDir(filepath.Join(s.root, d))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		for _, e := range entries {
			if fid, ok := s.linkedID(filepath.Join(s.root, d, e.Name())); ok {
				linked[fid] = true
			}
		}
	}
	n := 0
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil || linked[id] {
			continue
		}
		if fi, err := os.Stat(s.pool.Dir(id)); err == nil && s.now().Sub(fi.ModTime()) < sweepAfter {
			continue
		}
		if err := s.pool.Delete(id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// filesOf is the id of the scope's files in the pool; sandbox.ErrNotFound
// when the chat has none, sandbox.ErrUnsupported when they are kept
// without checkpoints.
func (s *Store) filesOf(scope sandbox.Scope) (string, error) {
	if err := checkScope(scope); err != nil {
		return "", err
	}
	if s.pool == nil {
		return "", fmt.Errorf("%w: the chats' files are kept without checkpoints here", sandbox.ErrUnsupported)
	}
	id := scope.SandboxID()
	if _, err := os.Lstat(s.chatDir(id)); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: chat %s has no files", sandbox.ErrNotFound, scope.ChatID)
	}
	fid, ok := s.pooledID(id)
	if !ok {
		return "", fmt.Errorf("%w: chat %s's files were made before they were checkpointed", sandbox.ErrUnsupported, scope.ChatID)
	}
	return fid, nil
}

var (
	_ sandbox.FileCheckpoints = (*Store)(nil)
	_ sandbox.FilesReceiving  = (*Store)(nil)
)

// Receiving reports whether an upload to the scope's files is in flight
// in this process.
func (s *Store) Receiving(scope sandbox.Scope) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quotas[scope.SandboxID()] != nil
}

// Checkpoint keeps the scope's files as they are now, under name.
func (s *Store) Checkpoint(ctx context.Context, scope sandbox.Scope, name string) (sandbox.Checkpoint, error) {
	fid, err := s.filesOf(scope)
	if err != nil {
		return sandbox.Checkpoint{}, err
	}
	return s.pool.Checkpoint(fid, name)
}

// Checkpoints lists the scope's files' checkpoints, oldest first.
func (s *Store) Checkpoints(ctx context.Context, scope sandbox.Scope) ([]sandbox.Checkpoint, error) {
	fid, err := s.filesOf(scope)
	if err != nil {
		return nil, err
	}
	return s.pool.Checkpoints(fid)
}

// DropCheckpoint deletes one of the scope's files' checkpoints.
func (s *Store) DropCheckpoint(ctx context.Context, scope sandbox.Scope, name string) error {
	fid, err := s.filesOf(scope)
	if err != nil {
		return err
	}
	return s.pool.Drop(fid, name)
}

// RestoreCheckpoint makes the scope's files what they were at checkpoint
// name, or empty (its uploads and intermediate directories without a
// file) when they have none of that name: the chat had no files then.
// While an upload to the chat is received it refuses
// (sandbox.ErrRewindBusy); an upload that begins meanwhile waits for it.
func (s *Store) RestoreCheckpoint(ctx context.Context, scope sandbox.Scope, name string) error {
	fid, err := s.filesOf(scope)
	if err != nil {
		return err
	}
	done, err := s.restoreAlone(scope.SandboxID())
	if err != nil {
		return err
	}
	defer done()
	list, err := s.pool.Checkpoints(fid)
	if err != nil {
		return err
	}
	if name != "" && slices.ContainsFunc(list, func(c sandbox.Checkpoint) bool { return c.Name == name }) {
		return s.pool.Restore(fid, name)
	}
	owner, _ := os.ReadFile(filepath.Join(s.pool.Dir(fid), ownerFile))
	if err := s.pool.Reset(fid); err != nil {
		return err
	}
	if err := os.Chmod(s.pool.Dir(fid), 0o755); err != nil {
		return err
	}
	// The directory as ensure makes it, with the owner it had.
	if len(owner) > 0 {
		if err := os.WriteFile(filepath.Join(s.pool.Dir(fid), ownerFile), owner, 0o644); err != nil {
			return fmt.Errorf("record the owner of the chat's workspace: %w", err)
		}
	}
	_, err = s.ensure(scope)
	return err
}

// ForkCheckpoint makes the files of chat to a copy of the scope's files'
// checkpoint name, owned by to.
func (s *Store) ForkCheckpoint(ctx context.Context, scope sandbox.Scope, name string, to sandbox.Scope) (err error) {
	fid, err := s.filesOf(scope)
	if err != nil {
		return err
	}
	if err := checkScope(to); err != nil {
		return err
	}
	id := to.SandboxID()
	link := s.chatDir(id)
	if err := os.Symlink(s.pool.Dir(id), link); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("copy the chat's files: chat %s has files already", to.ChatID)
		}
		return fmt.Errorf("copy the chat's files: %w", err)
	}
	defer func() {
		if err != nil {
			_ = s.pool.Delete(id)
			_ = os.Remove(link)
		}
	}()
	if err := s.pool.Fork(fid, name, id, s.poolLimit()); err != nil {
		return fmt.Errorf("copy the chat's files: %w", err)
	}
	// Its owner, and none of the uploads that were arriving.
	files := s.pool.Dir(id)
	for _, name := range []string{ownerFile, stagingDir} {
		if err := os.RemoveAll(filepath.Join(files, name)); err != nil {
			return fmt.Errorf("copy the chat's files: %w", err)
		}
	}
	if _, err := s.ensure(to); err != nil {
		return fmt.Errorf("copy the chat's files: %w", err)
	}
	return nil
}

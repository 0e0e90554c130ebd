package workspace

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// Defaults of Config's limits.
const (
	DefaultMaxFileBytes int64 = 100 << 20
	DefaultMaxChatBytes int64 = 1 << 30
)

// Config configures a Store. Zero values take the documented defaults.
type Config struct {
	// Root holds every chat's directories (see the package comment).
	// Required; created when first needed.
	Root string
	// MaxFileBytes bounds one upload; 0 means DefaultMaxFileBytes, a
	// negative value no bound.
	MaxFileBytes int64
	// MaxChatBytes bounds what one chat's uploads and intermediate files
	// take together; 0 means DefaultMaxChatBytes, a negative value no
	// bound.
	MaxChatBytes int64
	// ChatDisk gives each new chat's directory (uploads, intermediate,
	// unfinished uploads) a filesystem of MaxChatBytes of its own, so that
	// what the sandbox writes there stops at the quota too (see disk.go).
	// It needs root, mkfs.ext4 and loop devices, and a provider whose
	// sandboxes see the engine's mounts (bwrap; Docker with the engine on
	// the daemon's host).
	ChatDisk bool
	// WorldWritable makes the mounted directories 0777 and the files the
	// engine writes 0666, for a sandbox whose root is neither the engine's
	// user nor allowed to override permissions (see the package comment).
	WorldWritable bool
	// Pool, when set, keeps each new chat's directory in a subvolume of
	// its own, checkpointed with its sandbox (see chatpool.go); ChatDisk
	// is then left out for new chats: the subvolume's quota bounds what
	// the sandbox writes.
	Pool Pool
	// Now is the clock of owner.json's createdAt; time.Now when nil.
	Now func() time.Time
}

// Area is one of the two directories of a chat's workspace.
type Area string

const (
	// Uploads is /workspace/uploads: what the user uploaded.
	Uploads Area = "uploads"
	// Intermediate is /workspace/intermediate: what the agent and the
	// skills' scripts wrote.
	Intermediate Area = "intermediate"
)

// Target is where the area appears inside the sandbox.
func (a Area) Target() string {
	if a == Intermediate {
		return sandbox.IntermediateDir
	}
	return sandbox.UploadsDir
}

func (a Area) check() error {
	if a != Uploads && a != Intermediate {
		return fmt.Errorf("%w: unknown workspace area %q; use %q or %q", sandbox.ErrInvalidPath, string(a), Uploads, Intermediate)
	}
	return nil
}

const (
	chatsDir   = "chats"
	ownerFile  = "owner.json"
	stagingDir = "staging"
	// staleAfter is how long a staging file may go unwritten before a
	// usage walk takes it for the leftover of a crashed upload.
	staleAfter = time.Hour
)

// Store manages the chats' workspace directories under one root. Its
// methods are safe for concurrent use.
type Store struct {
	root          string
	maxFile       int64
	maxChat       int64
	worldWritable bool
	chatDisk      bool
	pool          Pool
	now           func() time.Time

	// attached holds the chats whose disk this process has mounted or
	// found mounted (disk.go).
	attached sync.Map // sandbox ID → true

	chatsOnce sync.Once
	chatsErr  error

	mu     sync.Mutex
	quotas map[string]*chatQuota // by sandbox ID, while uploads are in flight
	// restoring holds the chats whose files a restore replaces, by
	// sandbox ID; closed when it ends (restoreAlone).
	restoring map[string]chan struct{}

	// ownerSyncs holds the syncs of owner.json still running or failed,
	// by sandbox ID (syncOwner).
	ownerSyncs sync.Map // sandbox ID → *ownerSync
	// syncFile syncs the file at a path to the disk (syncFileAt; tests
	// hold it).
	syncFile func(name string) error
}

// New returns a Store for cfg. It touches no file: directories are created
// when a chat first needs them.
func New(cfg Config) (*Store, error) {
	if cfg.Root == "" {
		return nil, errors.New("workspace: Config.Root is empty; give the directory that holds the chats' uploads and intermediate files")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace: resolve Config.Root %q: %w", cfg.Root, err)
	}
	s := &Store{
		root:          root,
		maxFile:       orDefault(cfg.MaxFileBytes, DefaultMaxFileBytes),
		maxChat:       orDefault(cfg.MaxChatBytes, DefaultMaxChatBytes),
		worldWritable: cfg.WorldWritable,
		chatDisk:      cfg.ChatDisk && cfg.Pool == nil,
		pool:          cfg.Pool,
		now:           cfg.Now,
		quotas:        map[string]*chatQuota{},
		restoring:     map[string]chan struct{}{},
		syncFile:      syncFileAt,
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// Limits returns the effective bounds per file and per chat (negative:
// none).
func (s *Store) Limits() (maxFileBytes, maxChatBytes int64) { return s.maxFile, s.maxChat }

func (s *Store) areaMode() os.FileMode {
	if s.worldWritable {
		return 0o777
	}
	return 0o755
}

func (s *Store) fileMode() os.FileMode {
	if s.worldWritable {
		return 0o666
	}
	return 0o644
}

func (s *Store) chatDir(id string) string { return filepath.Join(s.root, chatsDir, id) }

func checkScope(scope sandbox.Scope) error {
	if scope.AppID == "" || scope.UserID == "" || scope.ChatID == "" {
		return fmt.Errorf("a chat's workspace needs appId, userId and chatId (got %q, %q, %q)", scope.AppID, scope.UserID, scope.ChatID)
	}
	return nil
}

// Mounts creates the chat's directories when they are missing and returns
// its two mounts, uploads then intermediate, both read-write. The skills
// mount is the caller's. Safe to call concurrently and repeatedly.
func (s *Store) Mounts(ctx context.Context, scope sandbox.Scope) ([]sandbox.Mount, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	dir, err := s.ensure(scope)
	if err != nil {
		return nil, err
	}
	return []sandbox.Mount{
		{Source: filepath.Join(dir, string(Uploads)), Target: sandbox.UploadsDir},
		{Source: filepath.Join(dir, string(Intermediate)), Target: sandbox.IntermediateDir},
	}, nil
}

// ensure creates what is missing of the chat's directory, owner.json
// before the mounted directories (see the package comment), and returns
// the chat's directory.
func (s *Store) ensure(scope sandbox.Scope) (string, error) {
	s.chatsOnce.Do(func() { s.chatsErr = s.makeChats() })
	if s.chatsErr != nil {
		return "", s.chatsErr
	}
	id := scope.SandboxID()
	dir := s.chatDir(id)
	if s.pool != nil {
		if err := s.makePooled(id); err != nil {
			return "", fmt.Errorf("create the chat's workspace directory: %w", err)
		}
	} else if target, err := os.Readlink(dir); err == nil {
		return "", fmt.Errorf("the chat's files are kept in the checkpoint pool (%s), which this engine has not opened: start it with FLOWBOX_CHECKPOINTS=on", target)
	} else if err := mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the chat's workspace directory: %w", err)
	}
	if err := s.attach(id, true); err != nil {
		return "", err
	}
	if written, err := s.writeOwner(dir, scope); err != nil {
		return "", fmt.Errorf("record the owner of the chat's workspace: %w", err)
	} else if written {
		s.syncOwner(id, filepath.Join(dir, ownerFile))
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{string(Uploads), s.areaMode()}, {string(Intermediate), s.areaMode()}, {stagingDir, 0o700}} {
		if err := mkdir(filepath.Join(dir, d.name), d.mode); err != nil {
			return "", fmt.Errorf("create the chat's workspace directory: %w", err)
		}
	}
	return dir, nil
}

// makeChats creates Root and Root/chats. With WorldWritable the latter is
// 0700, whoever created it, so that the 0777 directories beneath are
// reachable only by the engine and by the sandboxes they are mounted in.
func (s *Store) makeChats() error {
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return fmt.Errorf("create the workspace root %s: %w", s.root, err)
	}
	chats := filepath.Join(s.root, chatsDir)
	mode := os.FileMode(0o755)
	if s.worldWritable {
		mode = 0o700
	}
	if err := mkdir(chats, mode); err != nil {
		return fmt.Errorf("create the workspace root: %w", err)
	}
	if s.worldWritable {
		if err := os.Chmod(chats, mode); err != nil {
			return fmt.Errorf("restrict the workspace root %s to the engine: %w", chats, err)
		}
	}
	return nil
}

// mkdir creates dir with exactly mode, whatever the umask, or accepts an
// existing directory. Only the engine writes where it is used.
func mkdir(dir string, mode os.FileMode) error {
	err := os.Mkdir(dir, mode)
	if err == nil {
		return os.Chmod(dir, mode)
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, lerr := os.Lstat(dir)
	if lerr != nil {
		return lerr
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory; move it away", dir)
	}
	return nil
}

// ownerDoc is owner.json.
type ownerDoc struct {
	AppID     string    `json:"appId"`
	UserID    string    `json:"userId"`
	ChatID    string    `json:"chatId"`
	CreatedAt time.Time `json:"createdAt"`
}

// writeOwner writes owner.json once: the first writer's createdAt stays.
// The file appears whole or not at all (written aside, then linked).
// written says that this call wrote it: the caller then has it reach the
// disk (syncOwner) where it will stay, without waiting for it, so that a
// new chat's first command does not.
func (s *Store) writeOwner(dir string, scope sandbox.Scope) (written bool, err error) {
	name := filepath.Join(dir, ownerFile)
	if _, err := os.Lstat(name); err == nil {
		return false, nil
	}
	data, err := json.Marshal(ownerDoc{AppID: scope.AppID, UserID: scope.UserID, ChatID: scope.ChatID, CreatedAt: s.now().UTC()})
	if err != nil {
		return false, err
	}
	tmp := filepath.Join(dir, ".owner-"+rand.Text()+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if err := os.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// ownerSync is the sync of one chat's owner.json to the disk.
type ownerSync struct {
	name string
	once sync.Once
	done chan struct{}
	err  error // set before done is closed
}

// ownerSyncDelay is how long after its writing a chat's owner.json is
// synced, unless the chat's first upload asks sooner: a sync forces a
// journal commit, which the first command's own file operations (the
// provider's renames, the shell's state) would otherwise wait behind.
const ownerSyncDelay = time.Second

// syncOwner syncs the owner.json at name in the background, a moment
// later (ownerSyncDelay). Until it has reached the disk, a power cut
// could leave the chat's directory with an empty owner.json, which
// reconciliation removes as a directory nobody owns: so the first file
// the engine itself makes durable there (an upload) waits for it
// (ownerDurable). What commands write is not synced by anyone: a power
// cut loses no file of theirs that a sync would have kept.
func (s *Store) syncOwner(sandboxID, name string) {
	o := &ownerSync{name: name, done: make(chan struct{})}
	s.ownerSyncs.Store(sandboxID, o)
	time.AfterFunc(ownerSyncDelay, func() { s.runOwnerSync(sandboxID, o) })
}

// runOwnerSync syncs o's owner.json, once, whoever asks first.
func (s *Store) runOwnerSync(sandboxID string, o *ownerSync) {
	o.once.Do(func() {
		o.err = s.syncFile(o.name)
		close(o.done)
		if o.err == nil {
			s.ownerSyncs.CompareAndDelete(sandboxID, o)
		}
	})
}

// ownerDurable returns once the chat's owner.json is on the disk: it
// syncs it now if its sync has not begun, waits for it if it runs, and
// syncs it again if that one failed.
func (s *Store) ownerDurable(ctx context.Context, sandboxID string) error {
	v, ok := s.ownerSyncs.Load(sandboxID)
	if !ok {
		return nil
	}
	o := v.(*ownerSync)
	go s.runOwnerSync(sandboxID, o)
	select {
	case <-o.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if o.err == nil {
		return nil
	}
	if err := s.syncFile(filepath.Join(s.chatDir(sandboxID), ownerFile)); err != nil {
		return fmt.Errorf("write the owner of the chat's workspace to the disk: %w", err)
	}
	s.ownerSyncs.CompareAndDelete(sandboxID, o)
	return nil
}

// syncFileAt syncs the file at name.
func syncFileAt(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Owner is whose a chat's directory is, as Dirs finds it.
type Owner struct {
	// SandboxID is the directory's name.
	SandboxID string
	// AppID, UserID and ChatID are empty when owner.json is missing or
	// does not match the directory's name: a creation that crashed before
	// writing it, or a file damaged by hand. DeleteID removes such a
	// directory.
	AppID, UserID, ChatID string
	// CreatedAt is owner.json's, or the directory's modification time when
	// the owner is unknown.
	CreatedAt time.Time
}

// Known reports whether owner.json named the owner.
func (o Owner) Known() bool { return o.AppID != "" }

// Scope is the owner's scope (meaningful only when Known).
func (o Owner) Scope() sandbox.Scope {
	return sandbox.Scope{AppID: o.AppID, UserID: o.UserID, ChatID: o.ChatID}
}

// Dirs lists every chat directory with its owner, for reconciliation:
// the caller compares them with the chats that exist and deletes the
// others. Entries that are not chat directories are left out.
func (s *Store) Dirs(ctx context.Context) ([]Owner, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, chatsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the chats' workspace directories: %w", err)
	}
	var out []Owner
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !sandbox.ValidID(e.Name()) || !e.IsDir() && !s.pooledEntry(e) {
			continue
		}
		o, err := s.owner(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read the owner of workspace %s: %w", e.Name(), err)
		}
		out = append(out, o)
	}
	return out, nil
}

// ownedBy reports whether directory id is scope's: its ID now, or the S1
// ID it was made under before IDs became unambiguous (sandbox.IDFor), which
// the engine keeps for it.
func ownedBy(scope sandbox.Scope, id string) bool {
	return scope.SandboxID() == id || sandbox.LegacyOwner(scope, id)
}

func (s *Store) owner(id string) (Owner, error) {
	dir := s.chatDir(id)
	o := Owner{SandboxID: id}
	// Unmounted (after a reboot), a chat's disk would look like a
	// directory nobody owns.
	if err := s.attach(id, false); err != nil {
		return o, err
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	var doc ownerDoc
	if err == nil && json.Unmarshal(data, &doc) == nil && doc.AppID != "" && ownedBy(sandbox.Scope{AppID: doc.AppID, UserID: doc.UserID, ChatID: doc.ChatID}, id) {
		o.AppID, o.UserID, o.ChatID, o.CreatedAt = doc.AppID, doc.UserID, doc.ChatID, doc.CreatedAt
		return o, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return o, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return o, err
	}
	o.CreatedAt = fi.ModTime().UTC()
	return o, nil
}

// DeleteChat removes the chat's whole directory. A missing directory is
// not an error. Delete the chat's sandbox first: a running one still
// writes into what is being removed. A Save or Mounts racing with
// DeleteChat may create the directory again; Dirs then finds it.
func (s *Store) DeleteChat(ctx context.Context, scope sandbox.Scope) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	return s.DeleteID(ctx, scope.SandboxID())
}

// DeleteID removes the chat directory named sandboxID, as Dirs reports it;
// for directories whose owner is unknown. A missing directory is not an
// error.
func (s *Store) DeleteID(ctx context.Context, sandboxID string) error {
	if !sandbox.ValidID(sandboxID) {
		return fmt.Errorf("delete a chat's workspace: %w: %q is not a sandbox ID", sandbox.ErrInvalidPath, sandboxID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.ownerSyncs.Delete(sandboxID)
	dir := s.chatDir(sandboxID)
	if err := s.detach(sandboxID); err != nil {
		return fmt.Errorf("delete the workspace of sandbox %s: %w; delete the sandbox first", sandboxID, err)
	}
	// Files in the pool go at once, with their checkpoints; the link
	// after them (below), so that a deletion cut short leaves a link
	// Dirs finds.
	if fid, ok := s.pooledID(sandboxID); ok {
		if err := s.pool.Delete(fid); err != nil {
			return fmt.Errorf("delete the workspace of sandbox %s: %w", sandboxID, err)
		}
	}
	// owner.json goes last, so that a deletion cut short still says whose
	// the rest is. os.RemoveAll never follows links.
	for _, name := range []string{string(Uploads), string(Intermediate), stagingDir, ownerFile, ""} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			if errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("delete the workspace of sandbox %s: %w; something still mounts it: delete the sandbox first", sandboxID, err)
			}
			return fmt.Errorf("delete the workspace of sandbox %s: %w", sandboxID, err)
		}
	}
	return nil
}

// DeleteApp removes every chat directory whose owner.json names appID.
// It goes on after a failure and returns every error, joined.
func (s *Store) DeleteApp(ctx context.Context, appID string) error {
	if appID == "" {
		return errors.New("delete an app's workspaces: the appId is empty")
	}
	dirs, err := s.Dirs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range dirs {
		if o.AppID != appID {
			continue
		}
		if err := s.DeleteID(ctx, o.SandboxID); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// CheckpointProvider is a provider that keeps checkpoints of its
// sandboxes (R1–R3, docs/CHECKPOINTS.md): what a sandbox keeps across
// commands, its workspace, shell state and home, as it was at a moment,
// restored byte for byte or copied into a new sandbox. The caller
// serialises a sandbox's checkpoint operations with its commands.
// Delete deletes a sandbox's checkpoints with it.
type CheckpointProvider interface {
	// Checkpoint keeps sandbox id's files as they are now, under name
	// (letters, digits, - and _; at most 64). ErrUnsupported: the
	// sandbox was made without checkpoints.
	Checkpoint(ctx context.Context, id, name string) (Checkpoint, error)
	// RestoreCheckpoint makes sandbox id's files what they were at
	// checkpoint name, running or stopped; with name "", empty, as
	// before its first command. Its processes end first (its background
	// processes and terminal too): they belong to the discarded files.
	// The checkpoint stays. mounts, when not nil, restores what the
	// sandbox mounts from the host (Manager's Files): it is called once
	// the processes have ended, before the sandbox's own files are
	// restored and before it starts again, so that no process sees a
	// mount's old files; its error fails the restore with the sandbox's
	// files untouched.
	RestoreCheckpoint(ctx context.Context, id, name string, mounts func() error) error
	// ForkCheckpoint makes a new, stopped sandbox newID whose files are
	// sandbox id's checkpoint name, with id's limits; Ensure starts it.
	ForkCheckpoint(ctx context.Context, id, name, newID string) error
	// DropCheckpoint deletes one; one that is not there is no error.
	DropCheckpoint(ctx context.Context, id, name string) error
	// Checkpoints lists sandbox id's, oldest first.
	Checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
}

// FileCheckpoints keeps checkpoints of the host files a sandbox mounts
// (a chat's uploads and intermediate files, package workspace), taken,
// restored, forked and dropped with the sandbox's under the same names
// (Config.Files), so that a rewind brings back both.
type FileCheckpoints interface {
	// Checkpoint keeps the scope's files as they are now under name.
	// ErrNotFound: the scope has no files; ErrUnsupported: they are
	// kept without checkpoints. Either leaves the sandbox's alone.
	Checkpoint(ctx context.Context, scope Scope, name string) (Checkpoint, error)
	Checkpoints(ctx context.Context, scope Scope) ([]Checkpoint, error)
	// RestoreCheckpoint makes them what they were at name, or empty
	// when they have no checkpoint of that name (there were none then).
	RestoreCheckpoint(ctx context.Context, scope Scope, name string) error
	// ForkCheckpoint makes scope to's files a copy of checkpoint name.
	ForkCheckpoint(ctx context.Context, scope Scope, name string, to Scope) error
	DropCheckpoint(ctx context.Context, scope Scope, name string) error
	// DeleteChat removes scope's files, with their checkpoints.
	DeleteChat(ctx context.Context, scope Scope) error
}

// FilesReceiving is FileCheckpoints that can say a file is being
// received into the scope's files (an upload), during which their
// restore refuses: Restore asks it first, so that a rewind refused for
// it does not end the sandbox's processes.
type FilesReceiving interface {
	Receiving(scope Scope) bool
}

// noFiles reports whether err says the scope has no files with
// checkpoints: none at all, or kept without.
func noFiles(err error) bool { return errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnsupported) }

// CheckpointSweeper is a checkpoint provider that can find what no
// sandbox owns any more (R4): reconciliation calls it with the grace's
// start, and it removes what is older.
type CheckpointSweeper interface {
	SweepCheckpoints(ctx context.Context, old time.Time) (int, error)
}

// SweepCheckpoints has the provider remove the checkpoints and files no
// sandbox owns, older than old; 0 when it has none to sweep.
func (m *Manager) SweepCheckpoints(ctx context.Context, old time.Time) (int, error) {
	sw, ok := m.cfg.Provider.(CheckpointSweeper)
	if !ok {
		return 0, nil
	}
	return sw.SweepCheckpoints(ctx, old)
}

// Checkpoint describes one checkpoint of a sandbox.
type Checkpoint struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// ErrRewindBusy: a command of the sandbox ran all the time a restore
// waited for it.
var ErrRewindBusy = errors.New("a command of this chat's sandbox is running")

// files is the lock between a sandbox's commands (shared) and a restore
// of its files (exclusive): a command never meets half-restored files.
func (m *Manager) files(id string) *sync.RWMutex {
	l, _ := m.fileLocks.LoadOrStore(id, &sync.RWMutex{})
	return l.(*sync.RWMutex)
}

// checkpointer is the provider's checkpoints, or why there are none.
func (m *Manager) checkpointer() (CheckpointProvider, error) {
	cp, ok := m.cfg.Provider.(CheckpointProvider)
	if !ok || !m.cfg.Provider.Capabilities().Checkpoints {
		return nil, fmt.Errorf("%w: the %s sandboxes have no checkpoints here (docs/CHECKPOINTS.md)", ErrUnsupported, m.cfg.Provider.Name())
	}
	return cp, nil
}

// Checkpoint keeps the scope's sandbox's files and its host files
// (Config.Files) as they are now under name; ErrNotFound when it has
// neither yet. A checkpoint is taken of both or neither: one of the two
// without the other would restore the other as empty.
func (m *Manager) Checkpoint(ctx context.Context, scope Scope, name string) (Checkpoint, error) {
	cp, err := m.checkpointer()
	if err != nil {
		return Checkpoint{}, err
	}
	id := scope.SandboxID()
	c, err := cp.Checkpoint(ctx, id, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Checkpoint{}, err
	}
	if m.cfg.Files == nil {
		return c, err
	}
	took := err == nil
	fc, ferr := m.cfg.Files.Checkpoint(ctx, scope, name)
	switch {
	case ferr == nil && !took:
		return fc, nil
	case ferr == nil || noFiles(ferr) && took:
		return c, nil
	case noFiles(ferr):
		return Checkpoint{}, err // neither has files: the sandbox's ErrNotFound
	}
	if took {
		if derr := cp.DropCheckpoint(context.WithoutCancel(ctx), id, name); derr != nil {
			m.log.Warn("checkpoint of a sandbox whose files' checkpoint failed not dropped", "sandboxId", id, "checkpoint", name, "err", derr)
		}
	}
	return Checkpoint{}, ferr
}

// lists is the names of the checkpoints of the scope's sandbox and of its
// host files; has says whether each exists at all.
type lists struct {
	sandbox, files       []Checkpoint
	hasSandbox, hasFiles bool
}

func (l lists) inSandbox(name string) bool { return hasCheckpoint(l.sandbox, name) }
func (l lists) inFiles(name string) bool   { return hasCheckpoint(l.files, name) }

func hasCheckpoint(list []Checkpoint, name string) bool {
	return slices.ContainsFunc(list, func(c Checkpoint) bool { return c.Name == name })
}

func (m *Manager) lists(ctx context.Context, cp CheckpointProvider, scope Scope) (lists, error) {
	var l lists
	var err error
	l.sandbox, err = cp.Checkpoints(ctx, scope.SandboxID())
	switch {
	case err == nil:
		l.hasSandbox = true
	case !errors.Is(err, ErrNotFound):
		return l, err
	}
	if m.cfg.Files != nil {
		l.files, err = m.cfg.Files.Checkpoints(ctx, scope)
		switch {
		case err == nil:
			l.hasFiles = true
		case !noFiles(err):
			return l, err
		}
	}
	return l, nil
}

// Restore makes the scope's sandbox's files and its host files what they
// were at checkpoint name (empty for ""; either part empty when it has no
// checkpoint of that name: it did not exist then), running or stopped,
// once no command of it runs: it waits up to Config.RestoreWait for them,
// then gives up with ErrRewindBusy. Its processes end (a restore is a
// stop and a start of what it runs). The host files are restored while
// its processes are ended (CheckpointProvider.RestoreCheckpoint's
// mounts), so that the sandbox, started again, mounts them restored.
func (m *Manager) Restore(ctx context.Context, scope Scope, name string) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	id := scope.SandboxID()
	l := m.files(id)
	wait := m.cfg.RestoreWait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	for deadline := time.Now().Add(wait); !l.TryLock(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("restore sandbox %s: %w; try again when it has ended", id, ErrRewindBusy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	defer l.Unlock()
	have, err := m.lists(ctx, cp, scope)
	if err != nil {
		return err
	}
	if name != "" && !have.inSandbox(name) && !have.inFiles(name) {
		return fmt.Errorf("restore sandbox %s: %w: it has no checkpoint %q", id, ErrNotFound, name)
	}
	if r, ok := m.cfg.Files.(FilesReceiving); ok && have.hasFiles && r.Receiving(scope) {
		return fmt.Errorf("restore sandbox %s: %w: a file is being uploaded to the chat; try again when it has been received", id, ErrRewindBusy)
	}
	var mounts func() error
	if have.hasFiles {
		mounts = func() error {
			if err := m.cfg.Files.RestoreCheckpoint(ctx, scope, name); err != nil {
				return fmt.Errorf("restore the files of sandbox %s: %w", id, err)
			}
			return nil
		}
	}
	if !have.hasSandbox {
		if mounts == nil {
			return nil
		}
		return mounts()
	}
	m.warm.Delete(id) // its processes end: the next command finds out anew
	own := name
	if !have.inSandbox(name) {
		own = ""
	}
	return cp.RestoreCheckpoint(ctx, id, own, mounts)
}

// Fork makes the sandbox of scope to a copy of the scope's sandbox's
// checkpoint name, recorded, stopped, started by its first command, and
// its host files a copy of theirs; either is left out when it has no
// checkpoint of that name.
func (m *Manager) Fork(ctx context.Context, scope Scope, name string, to Scope) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	if err := to.validate(); err != nil {
		return err
	}
	have, err := m.lists(ctx, cp, scope)
	if err != nil {
		return err
	}
	if !have.inSandbox(name) && !have.inFiles(name) {
		return fmt.Errorf("fork sandbox %s: %w: it has no checkpoint %q", scope.SandboxID(), ErrNotFound, name)
	}
	if have.inFiles(name) {
		if err := m.cfg.Files.ForkCheckpoint(ctx, scope, name, to); err != nil {
			return fmt.Errorf("fork the files of sandbox %s: %w", scope.SandboxID(), err)
		}
	}
	if !have.inSandbox(name) {
		return nil
	}
	if err := m.forkSandbox(ctx, cp, scope, name, to); err != nil {
		if have.inFiles(name) {
			if derr := m.cfg.Files.DeleteChat(context.WithoutCancel(ctx), to); derr != nil {
				m.log.Warn("files of a failed fork left; reconciliation removes them", "chatId", to.ChatID, "err", derr)
			}
		}
		return err
	}
	return nil
}

// forkSandbox is Fork of the sandbox itself.
func (m *Manager) forkSandbox(ctx context.Context, cp CheckpointProvider, scope Scope, name string, to Scope) error {
	id := to.SandboxID()
	// The record first, as for any sandbox; stopped, so that the first
	// command starts it as it is (and no warm pool member is adopted in
	// its place).
	inst := m.instance(to, id)
	inst.Limit = m.limitsFor(ctx, to)
	created, err := m.cfg.Store.Create(ctx, inst, m.cfg.Now())
	if err != nil {
		return fmt.Errorf("fork into sandbox %s: %w", id, err)
	}
	if !created {
		return fmt.Errorf("fork into sandbox %s: it exists already", id)
	}
	if err := m.cfg.Store.SetStatus(ctx, m.cfg.Provider.Name(), id, StatusStopped); err != nil {
		return fmt.Errorf("fork into sandbox %s: %w", id, err)
	}
	if err := cp.ForkCheckpoint(ctx, scope.SandboxID(), name, id); err != nil {
		if derr := m.cfg.Store.Delete(context.WithoutCancel(ctx), m.cfg.Provider.Name(), id); derr != nil {
			m.log.Warn("record of a failed fork left; reconciliation removes it", "sandboxId", id, "err", derr)
		}
		return err
	}
	return nil
}

// DropCheckpoint deletes checkpoint name of the scope's sandbox and of
// its host files.
func (m *Manager) DropCheckpoint(ctx context.Context, scope Scope, name string) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	err = cp.DropCheckpoint(ctx, scope.SandboxID(), name)
	if errors.Is(err, ErrNotFound) {
		err = nil
	}
	if m.cfg.Files != nil {
		if ferr := m.cfg.Files.DropCheckpoint(ctx, scope, name); ferr != nil && !noFiles(ferr) {
			err = errors.Join(err, ferr)
		}
	}
	return err
}

// Checkpoints lists the checkpoints of the scope's sandbox and of its
// host files, each name once, oldest first; ErrNotFound when it has
// neither.
func (m *Manager) Checkpoints(ctx context.Context, scope Scope) ([]Checkpoint, error) {
	cp, err := m.checkpointer()
	if err != nil {
		return nil, err
	}
	have, err := m.lists(ctx, cp, scope)
	if err != nil {
		return nil, err
	}
	if !have.hasSandbox && !have.hasFiles {
		return nil, fmt.Errorf("checkpoints of sandbox %s: %w", scope.SandboxID(), ErrNotFound)
	}
	out := slices.Clone(have.sandbox)
	for _, c := range have.files {
		if !have.inSandbox(c.Name) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Checkpoint) int { return a.Created.Compare(b.Created) })
	return out, nil
}

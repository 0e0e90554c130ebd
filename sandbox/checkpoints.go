package sandbox

import (
	"context"
	"errors"
	"fmt"
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
	// The checkpoint stays.
	RestoreCheckpoint(ctx context.Context, id, name string) error
	// ForkCheckpoint makes a new, stopped sandbox newID whose files are
	// sandbox id's checkpoint name, with id's limits; Ensure starts it.
	ForkCheckpoint(ctx context.Context, id, name, newID string) error
	// DropCheckpoint deletes one; one that is not there is no error.
	DropCheckpoint(ctx context.Context, id, name string) error
	// Checkpoints lists sandbox id's, oldest first.
	Checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
}

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

// Checkpoint keeps the scope's sandbox's files as they are now under
// name; ErrNotFound when it has none yet.
func (m *Manager) Checkpoint(ctx context.Context, scope Scope, name string) (Checkpoint, error) {
	cp, err := m.checkpointer()
	if err != nil {
		return Checkpoint{}, err
	}
	return cp.Checkpoint(ctx, scope.SandboxID(), name)
}

// Restore makes the scope's sandbox's files what they were at checkpoint
// name (empty for ""), running or stopped, once no command of it runs: it waits up to
// Config.RestoreWait for them, then gives up with ErrRewindBusy. Its processes
// end (a restore is a stop and a start of what it runs).
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
	m.warm.Delete(id) // its processes end: the next command finds out anew
	return cp.RestoreCheckpoint(ctx, id, name)
}

// Fork makes the sandbox of scope to a copy of the scope's sandbox's
// checkpoint name: recorded, stopped, started by its first command.
func (m *Manager) Fork(ctx context.Context, scope Scope, name string, to Scope) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	if err := to.validate(); err != nil {
		return err
	}
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

// DropCheckpoint deletes checkpoint name of the scope's sandbox.
func (m *Manager) DropCheckpoint(ctx context.Context, scope Scope, name string) error {
	cp, err := m.checkpointer()
	if err != nil {
		return err
	}
	return cp.DropCheckpoint(ctx, scope.SandboxID(), name)
}

// Checkpoints lists the scope's sandbox's checkpoints, oldest first.
func (m *Manager) Checkpoints(ctx context.Context, scope Scope) ([]Checkpoint, error) {
	cp, err := m.checkpointer()
	if err != nil {
		return nil, err
	}
	return cp.Checkpoints(ctx, scope.SandboxID())
}

package sandbox

import (
	"context"
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
	// checkpoint name, running or stopped. Its processes end first (its
	// background processes and terminal too): they belong to the
	// discarded files. The checkpoint stays.
	RestoreCheckpoint(ctx context.Context, id, name string) error
	// ForkCheckpoint makes a new, stopped sandbox newID whose files are
	// sandbox id's checkpoint name, with id's limits; Ensure starts it.
	ForkCheckpoint(ctx context.Context, id, name, newID string) error
	// DropCheckpoint deletes one; one that is not there is no error.
	DropCheckpoint(ctx context.Context, id, name string) error
	// Checkpoints lists sandbox id's, oldest first.
	Checkpoints(ctx context.Context, id string) ([]Checkpoint, error)
}

// Checkpoint describes one checkpoint of a sandbox.
type Checkpoint struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

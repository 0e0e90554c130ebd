package workers

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// StopSandbox stops one sandbox for an operator, under a claim as the
// stop scan does: commands of its chat wait while the claim is held and
// then start the sandbox again, so none is lost and none runs into a stop
// half done. A sandbox already claimed (the stop scan, reconciliation or
// another operator is at it) is refused with an error wrapping
// sandbox.ErrBusy; one without a record with sandbox.ErrNotFound.
func (w *Workers) StopSandbox(ctx context.Context, sandboxID string) error {
	provider := w.cfg.Manager.Provider().Name()
	claimed, err := w.cfg.Store.Claim(ctx, provider, []string{sandboxID}, w.owner, "admin-stop", w.cfg.Now())
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	if len(claimed) == 0 {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, sandbox.ErrBusy)
	}
	defer w.release(ctx, provider, claimed)
	inst, err := w.cfg.Store.Get(ctx, provider, sandboxID)
	if err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	if inst.Status == sandbox.StatusDeleting {
		return fmt.Errorf("stop sandbox %s: it is being deleted: %w", sandboxID, sandbox.ErrDeleted)
	}
	if err := w.cfg.Manager.Stop(ctx, sandboxID); err != nil {
		return err
	}
	w.m.stopped.Inc()
	return nil
}

// DeleteSandbox deletes one sandbox for an operator through the deletion
// path of its chat: the intent is recorded first, durably, so that from
// then on no command of the chat can bring the sandbox back (its late
// commands are told the chat's sandbox was deleted), and the deletion is
// queued; it returns without waiting for the provider. A sandbox without
// a record is refused with an error wrapping sandbox.ErrNotFound
// (reconciliation removes provider resources that have none).
func (w *Workers) DeleteSandbox(ctx context.Context, sandboxID string) error {
	inst, err := w.cfg.Store.Get(ctx, w.cfg.Manager.Provider().Name(), sandboxID)
	if err != nil {
		return fmt.Errorf("delete sandbox %s: %w", sandboxID, err)
	}
	return w.DeleteChats(ctx, []sandbox.Scope{inst.Scope()})
}

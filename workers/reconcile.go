package workers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// requeueAfter is how old a pending deletion must be before
// reconciliation looks for its task: its task is queued milliseconds
// after the intent is recorded.
const requeueAfter = time.Minute

// HandleReconcile brings the records, the provider and the queue back
// into agreement (S12), unless another worker already did for this
// period.
func (w *Workers) HandleReconcile(ctx context.Context, t *asynq.Task) error {
	won, err := w.lease(ctx, TypeReconcile, w.cfg.ReconcileEvery)
	if err != nil || !won {
		return err
	}
	return w.reconcile(ctx)
}

// reconcile runs every repair; one failing does not keep the others from
// running.
func (w *Workers) reconcile(ctx context.Context) error {
	start := time.Now()
	err := errors.Join(
		w.requeueDeletions(ctx),
		w.dropStaleClaims(ctx),
		w.reconcileProvider(ctx),
		w.purgeTombstones(ctx),
		w.removeOrphanedData(ctx),
		w.sweepCheckpoints(ctx),
	)
	w.log.Info("reconciliation done", "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// sweepCheckpoints removes the sandbox files and checkpoints that no
// sandbox owns (a fork or a delete the engine did not finish), older
// than the grace period.
func (w *Workers) sweepCheckpoints(ctx context.Context) error {
	n, err := w.cfg.Manager.SweepCheckpoints(ctx, w.cfg.Now().Add(-w.cfg.Grace))
	if n > 0 {
		w.m.repairs.WithLabelValues(repairCheckpoint).Add(float64(n))
		w.log.Warn("reconciliation removed checkpoints no sandbox owns", "count", n)
	}
	if err != nil {
		return fmt.Errorf("reconcile checkpoints: %w", err)
	}
	return nil
}

// requeueDeletions queues again the pending deletions whose task Redis
// lost. A deletion whose task exhausted its retries stays archived, for an
// operator to see and run again from the dashboard.
func (w *Workers) requeueDeletions(ctx context.Context) error {
	pending, err := w.cfg.Store.PendingDeletions(ctx, w.cfg.Now().Add(-requeueAfter), 0)
	if err != nil {
		return fmt.Errorf("reconcile deletions: %w", err)
	}
	var lostChats = map[string][]sandbox.Scope{} // app → chats
	var lostApps []string
	for _, d := range pending {
		info, err := w.inspector.GetTaskInfo(QueueDeletions, d.TaskID)
		switch {
		case err == nil && info.State == asynq.TaskStateArchived:
			w.log.Warn("deletion failed for good; run it again from the queue dashboard", "task", d.TaskID, "app", d.AppID, "chat", d.ChatID, "lastError", info.LastErr)
			continue
		case err == nil:
			continue // waiting, running or due for a retry
		case !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound):
			return fmt.Errorf("reconcile deletions: look up task %s: %w", d.TaskID, err)
		}
		if d.ChatID != "" {
			lostChats[d.AppID] = append(lostChats[d.AppID], d.Chat())
		} else {
			lostApps = append(lostApps, d.AppID)
		}
	}
	var errs []error
	requeue := func(task *asynq.Task, keys []string) {
		taskID := newTaskID(task.Type())
		// The intent names its new task first: if queueing fails, the
		// next reconciliation finds the task missing again.
		if err := w.cfg.Store.SetDeletionTask(ctx, keys, taskID); err != nil {
			errs = append(errs, err)
			return
		}
		if _, err := w.client.EnqueueContext(ctx, task, asynq.TaskID(taskID)); err != nil {
			errs = append(errs, fmt.Errorf("reconcile deletions: queue %s: %w", task.Type(), err))
			return
		}
		w.m.repairs.WithLabelValues(repairRequeued).Add(float64(len(keys)))
		w.log.Info("deletion queued again", "type", task.Type(), "task", taskID, "intents", len(keys))
	}
	for _, appID := range slices.Sorted(maps.Keys(lostChats)) {
		for chunk := range slices.Chunk(lostChats[appID], chatBatch) {
			task, err := NewDeleteChatTask(appID, chunk)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			keys := make([]string, len(chunk))
			for i, chat := range chunk {
				keys[i] = mongostore.ChatDeletionKey(chat)
			}
			requeue(task, keys)
		}
	}
	for _, appID := range lostApps {
		task, err := NewDeleteAppTask(appID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		requeue(task, []string{mongostore.AppDeletionKey(appID)})
	}
	return errors.Join(errs...)
}

// dropStaleClaims drops the claims whose holder died or hangs, and the
// warm pool's claims left as tombstones. The record
// of its sandbox gets the status the sandbox has (a scan that died may have
// stopped it without marking the record); if that is running and the
// sandbox is still idle, the next scan stops it.
func (w *Workers) dropStaleClaims(ctx context.Context) error {
	stale, err := w.cfg.Store.StaleClaims(ctx, w.cfg.Now().Add(-w.cfg.StaleClaim))
	if err != nil {
		return fmt.Errorf("reconcile claims: %w", err)
	}
	p := w.cfg.Manager.Provider()
	var errs []error
	for _, c := range stale {
		if c.Provider == p.Name() {
			if _, err := w.settle(ctx, c.SandboxID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := w.cfg.Store.DropClaim(ctx, c); err != nil {
			errs = append(errs, err)
			continue
		}
		if sandbox.IsPoolClaim(c.Reason) {
			// Warm pool members' claims are left to be dropped here once
			// their adoption or removal is done (sandbox.PoolStore): no
			// repair. A member whose adopter died is ReconcilePool's.
			w.log.Debug("warm pool claim dropped", "poolId", c.SandboxID, "owner", c.Owner, "reason", c.Reason, "claimedAt", c.ClaimedAt)
			continue
		}
		w.m.repairs.WithLabelValues(repairStaleClaim).Inc()
		w.log.Warn("stale claim dropped", "sandboxId", c.SandboxID, "owner", c.Owner, "reason", c.Reason, "claimedAt", c.ClaimedAt)
	}
	return errors.Join(errs...)
}

// settle gives a record that a stop which never ended may have left
// wrong the status its sandbox has: running or stopping (written by
// earlier versions) while the sandbox is stopped or gone becomes stoped,
// stopping while it runs becomes running. The caller holds the claim, or
// the stale claim still keeps commands out. It reports whether it changed
// the record.
func (w *Workers) settle(ctx context.Context, id string) (bool, error) {
	p := w.cfg.Manager.Provider()
	inst, err := w.cfg.Store.Get(ctx, p.Name(), id)
	if errors.Is(err, sandbox.ErrNotFound) || (err == nil && inst.Status != sandbox.StatusStopping && inst.Status != sandbox.StatusRunning) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	st, err := p.Status(ctx, id)
	if err != nil {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	status := sandbox.StatusStopped
	if st == sandbox.StatusRunning {
		status = sandbox.StatusRunning
	}
	if status == inst.Status {
		return false, nil
	}
	if err := w.cfg.Store.SetStatus(ctx, p.Name(), id, status); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	return true, nil
}

// reconcileProvider compares the provider's resources with the records:
// a resource without a record (an orphan) is removed; a record that says
// running while its resource is gone says stoped, so that the next
// command creates the sandbox again; a record left stopping (by an
// earlier version's stop that never ended) gets its sandbox's status. All must be older than
// Config.Grace.
func (w *Workers) reconcileProvider(ctx context.Context) error {
	p := w.cfg.Manager.Provider()
	// Resources first: the manager writes a record before it creates the
	// resource, so every resource listed here has its record in the list
	// read next, unless the record was removed since.
	resources, err := p.List(ctx)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", p.Name(), err)
	}
	records, err := w.cfg.Store.ByProvider(ctx, p.Name())
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", p.Name(), err)
	}
	// The records just read also repair the stop scan's activity index,
	// where a write beside a command failed. It is a cache: failing to
	// refresh it keeps no repair of the records from running.
	missing, refreshErr := w.cfg.Store.RefreshActivity(ctx, p.Name(), records)
	if refreshErr != nil {
		refreshErr = fmt.Errorf("reconcile %s: %w", p.Name(), refreshErr)
	}
	if missing > 0 {
		w.m.repairs.WithLabelValues(repairActivity).Add(float64(missing))
		w.log.Warn("reconciliation put running sandboxes back into the activity index", "count", missing)
	}
	old := w.cfg.Now().Add(-w.cfg.Grace)
	recorded := make(map[string]bool, len(records))
	for _, r := range records {
		recorded[r.SandboxID] = true
	}
	listed := make(map[string]bool, len(resources))
	var orphans, vanished, stuck []string
	// Warm pool members have no record: the pool reconciles them.
	pooled, poolErr := w.cfg.Manager.ReconcilePool(ctx, resources, old)
	if pooled > 0 {
		w.m.repairs.WithLabelValues(repairPool).Add(float64(pooled))
		w.log.Warn("reconciliation removed warm pool members", "count", pooled)
	}
	for _, r := range resources {
		listed[r.ID] = true
		if !r.Pool && !recorded[r.ID] && r.CreatedAt.Before(old) {
			orphans = append(orphans, r.ID)
		}
	}
	for _, r := range records {
		switch {
		case !r.LastActiveAt.Before(old):
		case r.Status == sandbox.StatusRunning && !listed[r.SandboxID]:
			vanished = append(vanished, r.SandboxID)
		case r.Status == sandbox.StatusStopping:
			stuck = append(stuck, r.SandboxID)
		}
	}
	return errors.Join(
		refreshErr, poolErr,
		w.claimed(ctx, orphans, repairOrphan, w.removeOrphan),
		w.claimed(ctx, vanished, repairVanished, func(ctx context.Context, id string) (bool, error) {
			return w.repairVanished(ctx, id, old)
		}),
		// Under the claim no scan is stopping it: scans claim first.
		w.claimed(ctx, stuck, repairStaleClaim, w.settle),
	)
}

// claimed runs fix on each of ids while holding its claim, and counts the
// repairs fix reports.
func (w *Workers) claimed(ctx context.Context, ids []string, kind string, fix func(ctx context.Context, id string) (bool, error)) error {
	provider := w.cfg.Manager.Provider().Name()
	var errs []error
	for chunk := range slices.Chunk(ids, 4*w.cfg.ProviderConcurrency) {
		got, err := w.cfg.Store.Claim(ctx, provider, chunk, w.owner, kind, w.cfg.Now())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		results := make([]error, len(got))
		w.each(len(got), func(i int) {
			fixed, err := fix(ctx, got[i])
			results[i] = err
			if fixed {
				w.m.repairs.WithLabelValues(kind).Inc()
				w.log.Warn("reconciliation repaired a sandbox", "kind", kind, "sandboxId", got[i])
			}
		})
		w.release(ctx, provider, got)
		errs = append(errs, results...)
	}
	return errors.Join(errs...)
}

// removeOrphan removes a resource that has no record, after checking
// again, under the claim, that no command created one since the listing.
func (w *Workers) removeOrphan(ctx context.Context, id string) (bool, error) {
	p := w.cfg.Manager.Provider()
	_, err := w.cfg.Store.Get(ctx, p.Name(), id)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, sandbox.ErrNotFound):
		return false, fmt.Errorf("reconcile orphan %s: %w", id, err)
	}
	if err := p.Delete(ctx, id); err != nil {
		return false, fmt.Errorf("reconcile orphan %s: %w", id, err)
	}
	return true, nil
}

// repairVanished marks stoped a record whose resource is gone, after
// checking again, under the claim, that it was not used since old and that
// the provider still has nothing.
func (w *Workers) repairVanished(ctx context.Context, id string, old time.Time) (bool, error) {
	p := w.cfg.Manager.Provider()
	inst, err := w.cfg.Store.Get(ctx, p.Name(), id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	if inst.Status != sandbox.StatusRunning || !inst.LastActiveAt.Before(old) {
		return false, nil
	}
	st, err := p.Status(ctx, id)
	if err != nil {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	if st != sandbox.StatusMissing {
		return false, nil
	}
	if err := w.cfg.Store.SetStatus(ctx, p.Name(), id, sandbox.StatusStopped); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, fmt.Errorf("reconcile record %s: %w", id, err)
	}
	return true, nil
}

// purgeTombstones removes deletions done longer ago than TombstoneTTL.
func (w *Workers) purgeTombstones(ctx context.Context) error {
	n, err := w.cfg.Store.PurgeDeletions(ctx, w.cfg.Now().Add(-w.cfg.TombstoneTTL))
	if err != nil {
		return fmt.Errorf("reconcile deletions: %w", err)
	}
	if n > 0 {
		w.log.Info("old deletions purged", "count", n)
	}
	return nil
}

// OrphanedData is a ChatData that can find what it keeps of chats that
// no longer exist (a deletion that crashed before its task was recorded,
// files of a chat whose first message never completed) and remove it.
type OrphanedData interface {
	// RemoveOrphans removes what belongs to no chat and is older than
	// before; it returns how much it removed.
	RemoveOrphans(ctx context.Context, before time.Time) (int, error)
}

// removeOrphanedData removes the chat data no chat owns, past Grace (K6).
func (w *Workers) removeOrphanedData(ctx context.Context) error {
	var errs []error
	for _, d := range w.cfg.ChatData {
		o, ok := d.(OrphanedData)
		if !ok {
			continue
		}
		n, err := o.RemoveOrphans(ctx, w.cfg.Now().Add(-w.cfg.Grace))
		if n > 0 {
			w.log.Info("orphaned chat data removed", "count", n)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reconcile chat data: %w", err))
		}
	}
	return errors.Join(errs...)
}

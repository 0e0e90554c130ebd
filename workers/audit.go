package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// TypeAuditPrune deletes the audit records older than
// Config.AuditRetention. The scheduler enqueues it daily.
const TypeAuditPrune = "audit:prune"

// auditPruneTimeout bounds one prune.
const auditPruneTimeout = time.Hour

// AuditPruner deletes old audit records (audit.Store).
type AuditPruner interface {
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// NewAuditPruneTask returns the prune's task. It has no payload: the
// prune reads the time and the retention when it runs. Not retried: the
// next day's prune deletes what this one left.
func NewAuditPruneTask() *asynq.Task {
	return asynq.NewTask(TypeAuditPrune, nil,
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(0), asynq.Timeout(auditPruneTimeout))
}

// HandleAuditPrune deletes the audit records older than
// Config.AuditRetention; with no retention or no store it keeps them
// all. Several workers pruning the same day delete the same records:
// the second finds none.
func (w *Workers) HandleAuditPrune(ctx context.Context, t *asynq.Task) error {
	if w.cfg.Audit == nil || w.cfg.AuditRetention <= 0 {
		return nil
	}
	before := w.cfg.Now().Add(-w.cfg.AuditRetention)
	n, err := w.cfg.Audit.Prune(ctx, before)
	if err != nil {
		return fmt.Errorf("audit prune: %w", err)
	}
	w.log.Info("audit records pruned", "deleted", n, "before", before.UTC().Format(time.RFC3339))
	return nil
}

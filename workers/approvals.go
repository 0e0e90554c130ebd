package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// TypeApprovalExpire settles the approvals nobody answered in time as
// rejected (P10), so that the audit and the pending count say so without
// waiting for the chat's next message. The scheduler enqueues it every
// minute.
const TypeApprovalExpire = "approval:expire"

// approvalExpireTimeout bounds one sweep.
const approvalExpireTimeout = 5 * time.Minute

// ApprovalExpirer settles lapsed approvals (an adapter over
// approval.Store.Expire that also audits them).
type ApprovalExpirer interface {
	ExpireApprovals(ctx context.Context, now time.Time) (int, error)
}

// NewApprovalExpireTask returns the sweep's task. Not retried: the next
// minute's sweep finds what this one left.
func NewApprovalExpireTask() *asynq.Task {
	return asynq.NewTask(TypeApprovalExpire, nil,
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(0), asynq.Timeout(approvalExpireTimeout))
}

// HandleApprovalExpire settles the approvals that expired before now.
func (w *Workers) HandleApprovalExpire(ctx context.Context, t *asynq.Task) error {
	if w.cfg.Approvals == nil {
		return nil
	}
	n, err := w.cfg.Approvals.ExpireApprovals(ctx, w.cfg.Now())
	if n > 0 {
		w.log.Info("approvals expired", "count", n)
	}
	if err != nil {
		return fmt.Errorf("expire approvals: %w", err)
	}
	return nil
}

package workers

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"
)

// TypePoolRefill creates warm pool members until the pool is full
// (sandbox.Manager.RefillPool). The scheduler enqueues it every
// PoolRefillEvery, and the engine after each adoption.
const TypePoolRefill = "sandbox:pool_refill"

// PoolRefillEvery is the refill's period: a pool emptied faster than its
// adoptions' own refills fill it is filled again this soon.
const PoolRefillEvery = 30 * time.Second

// poolRefillTimeout bounds one refill: a few sandbox creations.
const poolRefillTimeout = 5 * time.Minute

// NewPoolRefillTask returns the refill's task.
func NewPoolRefillTask() *asynq.Task {
	return asynq.NewTask(TypePoolRefill, nil,
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(0), asynq.Timeout(poolRefillTimeout))
}

// HandlePoolRefill refills the warm pool. Refills of several workers
// exclude each other through a claim in the database, so a task that
// finds it taken does nothing.
func (w *Workers) HandlePoolRefill(ctx context.Context, _ *asynq.Task) error {
	start := time.Now()
	n, err := w.cfg.Manager.RefillPool(ctx)
	if n > 0 {
		w.log.Info("warm pool refilled", "created", n, "took", time.Since(start).Round(time.Millisecond))
	}
	return err
}

// RequestPoolRefill queues a refill now, without waiting for it: the
// engine calls it when a chat adopted a member. Requests within a few
// seconds of each other make one task.
func (w *Workers) RequestPoolRefill() {
	go func() {
		_, err := w.client.Enqueue(NewPoolRefillTask(), asynq.Unique(2*time.Second))
		if err != nil && !errors.Is(err, asynq.ErrDuplicateTask) {
			w.log.Warn("warm pool refill not queued; the periodic one will refill it", "err", err)
		}
	}()
}

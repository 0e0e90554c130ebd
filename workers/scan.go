package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flowbox/flowbox/sandbox"
)

// scanPage bounds the records one Idle query returns.
const scanPage = 1000

// releaseTimeout bounds giving claims back once a task's context is done.
const releaseTimeout = 30 * time.Second

// HandleStopIdle runs the stop scan (S7), unless another worker already
// ran it for this period.
func (w *Workers) HandleStopIdle(ctx context.Context, t *asynq.Task) error {
	won, err := w.lease(ctx, TypeStopIdle, w.cfg.MinIdle)
	if err != nil {
		return err
	}
	if !won {
		w.m.scans.WithLabelValues("skipped").Inc()
		w.log.Debug("stop scan of this period already taken by another worker")
		return nil
	}
	w.m.scans.WithLabelValues("scanned").Inc()
	start := time.Now()
	stopped, err := w.stopIdle(ctx)
	w.m.scanDuration.Observe(time.Since(start).Seconds())
	w.log.Info("stop scan done", "stopped", stopped, "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// stopIdle stops every running sandbox of the manager's provider whose
// record is older than sandbox.IdleAfter and returns how many it stopped.
// Candidates come from the store's Idle (the {status, lastActiveAt} index,
// or the activity index on FerretDB); each is claimed and its record read
// again before the provider is called (see the package comment).
func (w *Workers) stopIdle(ctx context.Context) (int, error) {
	provider := w.cfg.Manager.Provider().Name()
	now := w.cfg.Now()
	minIdle := w.cfg.MinIdle
	var timeouts map[string]time.Duration
	if w.cfg.IdleTimeouts != nil {
		var err error
		if timeouts, err = w.cfg.IdleTimeouts(ctx); err != nil {
			// Sessions fall back to the chats' timeout for this scan.
			w.log.Warn("stop scan: the sessions' idle timeouts are unknown", "err", err)
		}
	}
	seen := make(map[string]bool)
	stopped := 0
	var errs []error
	for ctx.Err() == nil {
		idle, err := w.cfg.Store.Idle(ctx, provider, now.Add(-minIdle), scanPage)
		if err != nil {
			return stopped, fmt.Errorf("stop scan: %w", err)
		}
		// Each candidate's own cutoff: those not idle for their own
		// timeout yet are passed over until a later scan.
		cutoffs := map[string]time.Time{}
		var ids []string
		for _, inst := range idle {
			if seen[inst.SandboxID] {
				continue
			}
			seen[inst.SandboxID] = true
			cutoff := now.Add(-sandbox.IdleAfter)
			if d, ok := timeouts[inst.SandboxID]; ok {
				cutoff = now.Add(-d) // a session's own timeout
			}
			if inst.LastActiveAt.Before(cutoff) {
				cutoffs[inst.SandboxID] = cutoff
				ids = append(ids, inst.SandboxID)
			}
		}
		// Claim a few at a time: a claim makes commands wait, so it is
		// held only while its sandbox is being worked on.
		for chunk := range slices.Chunk(ids, 4*w.cfg.ProviderConcurrency) {
			n, err := w.stopChunk(ctx, provider, chunk, cutoffs)
			stopped += n
			errs = append(errs, err)
		}
		// What this page could not stop comes back in the next query; the
		// next period tries it again.
		if len(ids) == 0 || len(idle) < scanPage {
			break
		}
	}
	return stopped, errors.Join(errs...)
}

func (w *Workers) stopChunk(ctx context.Context, provider string, ids []string, cutoffs map[string]time.Time) (int, error) {
	claimed, err := w.cfg.Store.Claim(ctx, provider, ids, w.owner, "stop", w.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("stop scan: %w", err)
	}
	defer w.release(ctx, provider, claimed)
	results := make([]error, len(claimed))
	done := make([]bool, len(claimed))
	w.each(len(claimed), func(i int) { done[i], results[i] = w.stopOne(ctx, provider, claimed[i], cutoffs[claimed[i]]) })
	n := 0
	for _, d := range done {
		if d {
			n++
		}
	}
	return n, errors.Join(results...)
}

// stopOne stops one claimed sandbox if its record, read under the claim,
// still says it is idle. It reports whether it stopped it.
func (w *Workers) stopOne(ctx context.Context, provider, id string, cutoff time.Time) (bool, error) {
	inst, err := w.cfg.Store.Get(ctx, provider, id)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return false, fmt.Errorf("stop scan: %w", err)
	}
	switch {
	case err != nil || inst.Status != sandbox.StatusRunning:
		// A stale candidate of the activity index: gone or not running.
		w.cfg.Store.ForgetActivity(ctx, provider, id)
		return false, nil
	case !inst.LastActiveAt.Before(cutoff):
		return false, nil // used between the query and the claim
	}
	// On failure the record still says running: the next scan tries
	// again, and commands are held up only while the claim lasts.
	if err := w.cfg.Manager.Stop(ctx, id); err != nil {
		return false, fmt.Errorf("stop scan: %w", err)
	}
	w.m.stopped.Inc()
	return true, nil
}

// release gives claims back, also when ctx is done; a claim that cannot
// be given back goes stale and reconciliation drops it.
func (w *Workers) release(ctx context.Context, provider string, ids []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := w.cfg.Store.Release(ctx, provider, ids, w.owner); err != nil {
		w.log.Error("claims not released; reconciliation will drop them", "err", err)
	}
}

// each runs fn(0..n-1) with at most ProviderConcurrency at once.
func (w *Workers) each(n int, fn func(i int)) {
	sem := make(chan struct{}, w.cfg.ProviderConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

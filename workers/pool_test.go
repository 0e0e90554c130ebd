package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/workers"
)

// TestPoolMembersNotOrphans: a warm pool member has no record, and
// reconciliation must not take it for an orphan however old it is; once
// its document is lost, it is removed as a pool member. The refill task
// fills the pool.
func TestPoolMembersNotOrphans(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		m, err := sandbox.New(sandbox.Config{Provider: e.provider, Store: e.store, Now: e.clock.Now, Logger: quiet,
			Pool: sandbox.PoolConfig{Size: 1, Store: e.store}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = m.DrainPool(context.Background()) })
		e.manager = m
		w, _, reg := e.workers(t, nil)
		if err := w.HandlePoolRefill(ctx(t), workers.NewPoolRefillTask()); err != nil {
			t.Fatalf("refill: %v", err)
		}
		members, err := e.store.Members(ctx(t), e.provider.Name())
		if err != nil || len(members) != 1 || !members[0].Ready {
			t.Fatalf("members after the refill: %+v, %v", members, err)
		}
		member := members[0].PoolID

		e.clock.Add(time.Hour)
		reconcile(t, w)
		if st := e.providerStatus(t, member); st != sandbox.StatusRunning {
			t.Fatalf("the pool member after reconciliation: %q, want running", st)
		}
		if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "orphan"); got != 0 {
			t.Errorf("orphan repairs = %v, want 0", got)
		}

		if err := e.store.RemoveMember(ctx(t), e.provider.Name(), member); err != nil {
			t.Fatal(err)
		}
		// The provider dates the member by the real clock.
		e.clock.Add(time.Until(e.clock.Now()) + 11*time.Minute)
		if err := w.HandleReconcile(ctx(t), asynq.NewTask(workers.TypeReconcile, nil)); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if st := e.providerStatus(t, member); st != sandbox.StatusMissing {
			t.Errorf("the member without a document after reconciliation: %q, want missing", st)
		}
		if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "pool_member"); got != 1 {
			t.Errorf("pool member repairs = %v, want 1", got)
		}
	})
}

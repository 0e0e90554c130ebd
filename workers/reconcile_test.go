package workers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/workers"
)

func reconcile(t *testing.T, w *workers.Workers) {
	t.Helper()
	if err := w.HandleReconcile(ctx(t), asynq.NewTask(workers.TypeReconcile, nil)); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
}

// TestOrphanRemoved: a sandbox created behind the product's back, with
// its labels and no record, is removed once older than the grace period;
// recorded sandboxes stay.
func TestOrphanRemoved(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, addr string) {
				e := newEnv(t, pv.new(t, appPrefix(t)), addr)
				w, _, reg := e.workers(t, nil)
				kept := e.use(t, "kept")
				orphan := sandbox.IDFor(e.app, "someone", "unknown-chat")
				spec := sandbox.Spec{ID: orphan, Labels: map[string]string{"appId": e.app, "userId": "someone", "chatId": "unknown-chat"}}
				if err := e.provider.Ensure(ctx(t), spec); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = e.provider.Delete(context.Background(), orphan) })

				steps := []struct {
					name       string
					advance    time.Duration
					wantOrphan sandbox.Status
					repairs    float64
				}{
					{"younger than the grace period", 0, sandbox.StatusRunning, 0},
					{"older", 11 * time.Minute, sandbox.StatusMissing, 1},
				}
				for _, s := range steps {
					e.clock.Add(s.advance)
					reconcile(t, w)
					if st := e.providerStatus(t, orphan); st != s.wantOrphan {
						t.Errorf("%s: orphan is %q, want %q", s.name, st, s.wantOrphan)
					}
					if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "orphan"); got != s.repairs {
						t.Errorf("%s: orphan repairs = %v, want %v", s.name, got, s.repairs)
					}
					// Reconciliation runs once per period.
					e.clock.Add(10 * time.Minute)
				}
				if st := e.providerStatus(t, kept); st != sandbox.StatusRunning {
					t.Errorf("recorded sandbox: %q, want running", st)
				}
				if inst, ok := e.record(t, kept); !ok || inst.Status != sandbox.StatusRunning {
					t.Errorf("record of the recorded sandbox: %+v, %v", inst, ok)
				}
			})
		})
	}
}

// removeByHand removes a sandbox's resource behind the product's back:
// the container with the Docker API, the directory through the provider.
func removeByHand(t *testing.T, p sandbox.Provider, id string) {
	t.Helper()
	if _, ok := p.(scoped); ok {
		cli := dockertest.Client(t)
		if _, err := cli.ContainerRemove(ctx(t), docker.ContainerName(id), client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatalf("docker rm -f: %v", err)
		}
		return
	}
	if err := p.Delete(ctx(t), id); err != nil {
		t.Fatal(err)
	}
}

// TestVanishedRecordRepaired: a record whose sandbox was removed by hand
// stops saying running; the chat's next command creates the sandbox
// again.
func TestVanishedRecordRepaired(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, addr string) {
				e := newEnv(t, pv.new(t, appPrefix(t)), addr)
				w, _, reg := e.workers(t, nil)
				id := e.use(t, "chat")
				removeByHand(t, e.provider, id)
				if st := e.providerStatus(t, id); st != sandbox.StatusMissing {
					t.Fatalf("after removal by hand: %q", st)
				}
				e.clock.Add(11 * time.Minute)
				reconcile(t, w)
				if inst, _ := e.record(t, id); inst.Status != sandbox.StatusStopped {
					t.Errorf("record after reconciliation: %q, want %q", inst.Status, sandbox.StatusStopped)
				}
				if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "vanished"); got != 1 {
					t.Errorf("vanished repairs = %v, want 1", got)
				}
				res, err := e.manager.Exec(ctx(t), e.scope("chat"), sandbox.ExecRequest{Command: "echo again"})
				if err != nil || res.Stdout != "again\n" {
					t.Fatalf("command after the repair: %+v, %v", res, err)
				}
				if inst, _ := e.record(t, id); inst.Status != sandbox.StatusRunning {
					t.Errorf("record after the next command: %q, want running", inst.Status)
				}
			})
		})
	}
}

// TestStaleClaimDropped: a worker died while stopping a sandbox, leaving
// its claim; reconciliation drops the claim and gives the record the
// sandbox's real status, and commands flow again.
func TestStaleClaimDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		died func(t *testing.T, e *env, id string) // what the dead worker got done
		want sandbox.Status
	}{
		{"before stopping", func(*testing.T, *env, string) {}, sandbox.StatusRunning},
		{"after the provider stopped it", func(t *testing.T, e *env, id string) {
			if err := e.provider.Stop(ctx(t), id); err != nil {
				t.Fatal(err)
			}
		}, sandbox.StatusStopped},
		{"leaving the record stopping, as earlier versions did", func(t *testing.T, e *env, id string) {
			if err := e.store.SetStatus(ctx(t), e.provider.Name(), id, sandbox.StatusStopping); err != nil {
				t.Fatal(err)
			}
		}, sandbox.StatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, addr string) {
				e := newEnv(t, bwrapProvider(t), addr)
				w, _, reg := e.workers(t, nil)
				id := e.use(t, "chat")
				if _, err := e.store.Claim(ctx(t), e.provider.Name(), []string{id}, "dead-worker", "stop", e.clock.Now()); err != nil {
					t.Fatal(err)
				}
				tc.died(t, e, id)
				e.clock.Add(11 * time.Minute)
				reconcile(t, w)
				if n := e.count(t, "sandbox_claims", nil); n != 0 {
					t.Errorf("%d claims left, want 0", n)
				}
				if inst, _ := e.record(t, id); inst.Status != tc.want {
					t.Errorf("record = %q, want %q (the sandbox's status)", inst.Status, tc.want)
				}
				if st := e.providerStatus(t, id); st != tc.want {
					t.Errorf("provider = %q, want %q", st, tc.want)
				}
				if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "stale_claim"); got != 1 {
					t.Errorf("stale claim repairs = %v, want 1", got)
				}
				res, err := e.manager.Exec(ctx(t), e.scope("chat"), sandbox.ExecRequest{Command: "cat mark"})
				if err != nil || res.Stdout != "chat\n" {
					t.Errorf("command after the repair: %+v, %v", res, err)
				}
			})
		})
	}
}

// TestPoolClaimsDroppedQuietly: the claims the warm pool leaves once a
// member is adopted or removed are dropped when stale, as the stop scan's
// are, but counted as no repair: nothing went wrong.
func TestPoolClaimsDroppedQuietly(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		w, _, reg := e.workers(t, nil)
		for _, c := range []struct{ id, reason string }{{"0123456789abcdef", sandbox.PoolClaimAdopt}, {"fedcba9876543210", sandbox.PoolClaimRemove}} {
			if got, err := e.store.Claim(ctx(t), e.provider.Name(), []string{c.id}, "engine-1", c.reason, e.clock.Now()); err != nil || len(got) != 1 {
				t.Fatalf("Claim = %v, %v", got, err)
			}
		}
		e.clock.Add(11 * time.Minute)
		reconcile(t, w)
		if n := e.count(t, "sandbox_claims", nil); n != 0 {
			t.Errorf("%d claims left, want 0", n)
		}
		if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "stale_claim"); got != 0 {
			t.Errorf("stale claim repairs = %v, want 0 for the warm pool's claims", got)
		}
	})
}

// TestReconcileWithActivityIndexDown: the activity index is a cache;
// failing to refresh it is reported, but keeps no repair of the records
// from running.
func TestReconcileWithActivityIndexDown(t *testing.T) {
	e := newEnv(t, bwrapProvider(t), redisKinds[1].start(t))
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	store, err := mongostore.New(context.Background(), e.db, quiet, mongostore.WithActivity(activity.New(dead, e.db.Name())))
	if err != nil {
		t.Fatal(err)
	}
	e.store = store
	e.manager = e.newManager(t, e.provider)
	w, _, reg := e.workers(t, nil)
	id := e.use(t, "chat")
	removeByHand(t, e.provider, id)
	e.clock.Add(11 * time.Minute)
	err = w.HandleReconcile(ctx(t), asynq.NewTask(workers.TypeReconcile, nil))
	if err == nil || !strings.Contains(err.Error(), "activity") {
		t.Errorf("reconcile = %v, want the failed refresh of the activity index reported", err)
	}
	if inst, _ := e.record(t, id); inst.Status != sandbox.StatusStopped {
		t.Errorf("record after reconciliation: %q, want %q (the vanished sandbox repaired all the same)", inst.Status, sandbox.StatusStopped)
	}
	if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "vanished"); got != 1 {
		t.Errorf("vanished repairs = %v, want 1", got)
	}
}

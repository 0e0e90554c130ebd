package workers_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/workers"
)

// TestScanStopsIdleSandboxes: sandboxes unused for five minutes are
// stopped and marked stoped; one used two minutes ago keeps running; a
// stopped one wakes with its files on the next command.
func TestScanStopsIdleSandboxes(t *testing.T) {
	for _, pv := range providers {
		t.Run(pv.name, func(t *testing.T) {
			forEachRedis(t, func(t *testing.T, addr string) {
				e := newEnv(t, pv.new(t, appPrefix(t)), addr)
				w, _, reg := e.workers(t, nil)
				idle := []string{e.use(t, "idle-1"), e.use(t, "idle-2")}
				e.clock.Add(4 * time.Minute)
				recent := e.use(t, "recent")
				e.clock.Add(2 * time.Minute) // idle-*: 6 minutes; recent: 2

				if err := w.HandleStopIdle(ctx(t), workers.NewStopIdleTask()); err != nil {
					t.Fatalf("HandleStopIdle: %v", err)
				}
				for _, tc := range []struct {
					id   string
					want sandbox.Status
				}{{idle[0], sandbox.StatusStopped}, {idle[1], sandbox.StatusStopped}, {recent, sandbox.StatusRunning}} {
					inst, _ := e.record(t, tc.id)
					if inst.Status != tc.want {
						t.Errorf("record of %s: status %q, want %q", tc.id, inst.Status, tc.want)
					}
					if got := e.providerStatus(t, tc.id); got != tc.want {
						t.Errorf("provider status of %s: %q, want %q", tc.id, got, tc.want)
					}
				}
				if got := metric(t, reg, "flowbox_sandboxes_stopped_total"); got != 2 {
					t.Errorf("flowbox_sandboxes_stopped_total = %v, want 2", got)
				}
				if n := e.count(t, "sandbox_claims", nil); n != 0 {
					t.Errorf("%d claims left after the scan, want 0", n)
				}
				// The next command wakes a stopped sandbox, files intact.
				res, err := e.manager.Exec(ctx(t), e.scope("idle-1"), sandbox.ExecRequest{Command: "cat mark"})
				if err != nil || res.Stdout != "idle-1\n" {
					t.Fatalf("command after the stop: %+v, %v; want the file written before", res, err)
				}
				if inst, _ := e.record(t, idle[0]); inst.Status != sandbox.StatusRunning {
					t.Errorf("record after the wake: %q, want running", inst.Status)
				}
			})
		})
	}
}

// gatedStop holds the provider's Stop until released, so that a test can
// act while a stop is in progress.
type gatedStop struct {
	sandbox.Provider
	entered chan string
	release chan struct{}
}

func (g gatedStop) Stop(ctx context.Context, id string) error {
	g.entered <- id
	<-g.release
	return g.Provider.Stop(ctx, id)
}

// TestExecWaitsForStop: a command meeting a sandbox the scan is stopping
// waits for the stop to end, touching nothing, then restarts the sandbox
// and runs, intact.
func TestExecWaitsForStop(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		gate := gatedStop{Provider: bwrapProvider(t), entered: make(chan string, 1), release: make(chan struct{})}
		e := newEnv(t, gate, addr)
		w, _, _ := e.workers(t, nil)
		id := e.use(t, "chat")
		e.clock.Add(6 * time.Minute)

		scanned := make(chan error, 1)
		go func() { scanned <- w.HandleStopIdle(context.Background(), workers.NewStopIdleTask()) }()
		<-gate.entered
		during, _ := e.record(t, id)
		if n := e.count(t, "sandbox_claims", nil); n != 1 {
			t.Errorf("%d claims during the stop, want the scan's one", n)
		}
		type result struct {
			res sandbox.ExecResult
			err error
		}
		executed := make(chan result, 1)
		go func() {
			res, err := e.manager.Exec(context.Background(), e.scope("chat"), sandbox.ExecRequest{Command: "sleep 0.3; echo done; cat mark"})
			executed <- result{res, err}
		}()
		select {
		case r := <-executed:
			t.Fatalf("the command did not wait for the stop: %+v, %v", r.res, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		// The clock moved six minutes since the record was written: a
		// Touch by the waiting command would show.
		if inst, _ := e.record(t, id); !inst.LastActiveAt.Equal(during.LastActiveAt) || inst.Status != during.Status {
			t.Errorf("record while a command waits: %s at %s, want it untouched (%s at %s)", inst.Status, inst.LastActiveAt, during.Status, during.LastActiveAt)
		}
		close(gate.release)
		if err := <-scanned; err != nil {
			t.Fatalf("scan: %v", err)
		}
		r := <-executed
		if r.err != nil || r.res.ExitCode != 0 || r.res.Stdout != "done\nchat\n" {
			t.Fatalf("command after the stop: %+v, %v; want exit 0 and %q", r.res, r.err, "done\nchat\n")
		}
		if inst, _ := e.record(t, id); inst.Status != sandbox.StatusRunning {
			t.Errorf("record after the command: %q, want running", inst.Status)
		}
		if st := e.providerStatus(t, id); st != sandbox.StatusRunning {
			t.Errorf("provider after the command: %q, want running", st)
		}
	})
}

// TestExecRacingScan runs a command and a scan at nearly the same moment,
// many times, with jitter: sometimes the scan claims the sandbox first
// (the command waits and restarts it), sometimes the command refreshes
// the record first (the scan leaves it). Either way the command succeeds
// and the record agrees with the provider.
func TestExecRacingScan(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		w, _, reg := e.workers(t, nil)
		const rounds = 16
		for i := range rounds {
			chat := "race-" + string(rune('a'+i))
			id := e.use(t, chat)
			e.clock.Add(6 * time.Minute)
			var wg sync.WaitGroup
			var res sandbox.ExecResult
			var execErr, scanErr error
			wg.Go(func() {
				time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
				res, execErr = e.manager.Exec(context.Background(), e.scope(chat), sandbox.ExecRequest{Command: "sleep 0.05; cat mark"})
			})
			wg.Go(func() {
				time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
				scanErr = w.HandleStopIdle(context.Background(), workers.NewStopIdleTask())
			})
			wg.Wait()
			if scanErr != nil {
				t.Fatalf("round %d: scan: %v", i, scanErr)
			}
			if execErr != nil || res.ExitCode != 0 || res.Stdout != chat+"\n" {
				t.Fatalf("round %d: command racing the scan: %+v, %v; want exit 0 and %q", i, res, execErr, chat+"\n")
			}
			inst, _ := e.record(t, id)
			if st := e.providerStatus(t, id); inst.Status != sandbox.StatusRunning || st != sandbox.StatusRunning {
				t.Fatalf("round %d: after the command the record says %q and the provider %q; want both running", i, inst.Status, st)
			}
			// Each round has a period and a sandbox of its own.
			if err := e.manager.Delete(ctx(t), id); err != nil {
				t.Fatal(err)
			}
			e.clock.Add(sandbox.IdleAfter)
		}
		t.Logf("in %v of %d rounds the scan stopped the sandbox first and the command restarted it",
			metric(t, reg, "flowbox_sandboxes_stopped_total"), rounds)
	})
}

// TestLongCommandIsNotIdle: a command that outlasts the idle threshold
// keeps its sandbox's record fresh, and the scan leaves it running.
func TestLongCommandIsNotIdle(t *testing.T) {
	p := bwrapProvider(t)
	e := newEnv(t, p, redisKinds[1].start(t))
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: e.store, Clock: e.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.manager = m
	w, _, reg := e.workers(t, nil)
	id := e.use(t, "long")
	files, err := p.Files(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	// The command runs until the test lets it end: it cannot end before
	// the scan, however slow the machine.
	done := make(chan error, 1)
	var res sandbox.ExecResult
	go func() {
		var err error
		res, err = m.Exec(context.Background(), e.scope("long"), sandbox.ExecRequest{
			Command: "touch started; while [ ! -e release ]; do sleep 0.05; done; echo finished", Timeout: time.Minute})
		done <- err
	}()
	eventually(t, "the command starts and its heartbeat waits on the clock", func() bool {
		_, err := files.Stat(ctx(t), "started")
		return err == nil && e.clock.Waiting() > 0
	})
	e.clock.Add(6 * time.Minute) // the command has now run "six minutes"
	eventually(t, "a heartbeat refreshes the record", func() bool {
		inst, _ := e.record(t, id)
		return !inst.LastActiveAt.Before(e.clock.Now())
	})
	if err := w.HandleStopIdle(ctx(t), workers.NewStopIdleTask()); err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile(ctx(t), "release", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || res.Stdout != "finished\n" {
		t.Fatalf("long command: %+v, %v; want it to finish", res, err)
	}
	if got := metric(t, reg, "flowbox_sandboxes_stopped_total"); got != 0 {
		t.Errorf("the scan stopped %v sandboxes, want 0", got)
	}
	if st := e.providerStatus(t, id); st != sandbox.StatusRunning {
		t.Errorf("provider status = %q, want running", st)
	}
}

// TestOneScanPerPeriod: two worker processes on one Redis, each with its
// scheduler enqueuing the scan every second, run one scan per period.
func TestOneScanPerPeriod(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		fast := func(c *workers.Config) { c.ScanSchedule = "@every 1s" }
		w1, _, reg1 := e.workers(t, fast)
		w2, _, reg2 := e.workers(t, fast)
		start(t, w1)
		start(t, w2)
		handled := func() float64 {
			return metric(t, reg1, "flowbox_worker_tasks_processed_total", "type", workers.TypeStopIdle) +
				metric(t, reg2, "flowbox_worker_tasks_processed_total", "type", workers.TypeStopIdle)
		}
		scans := func(result string) float64 {
			return metric(t, reg1, "flowbox_sandbox_scans_total", "result", result) +
				metric(t, reg2, "flowbox_sandbox_scans_total", "result", result)
		}
		const periods = 3
		for p := 1; p <= periods; p++ {
			before := handled()
			// Let both schedulers enqueue several times in this period.
			eventually(t, "3 scan tasks handled in the period", func() bool { return handled() >= before+3 })
			if got := scans("scanned"); got != float64(p) {
				t.Fatalf("period %d: %v scans ran in all, want %d (one per period)", p, got, p)
			}
			e.clock.Add(sandbox.IdleAfter)
		}
		if skipped := scans("skipped"); skipped < periods*2 {
			t.Errorf("%v scan tasks skipped, want at least %d: the duplicates of each period", skipped, periods*2)
		}
		t.Logf("scans by worker 1: %v, by worker 2: %v", metric(t, reg1, "flowbox_sandbox_scans_total", "result", "scanned"), metric(t, reg2, "flowbox_sandbox_scans_total", "result", "scanned"))
	})
}

// scanAndCheck runs one stop scan and checks each sandbox's record and
// provider status.
func scanAndCheck(t *testing.T, e *env, w *workers.Workers, want map[string]sandbox.Status) {
	t.Helper()
	if err := w.HandleStopIdle(ctx(t), workers.NewStopIdleTask()); err != nil {
		t.Fatalf("HandleStopIdle: %v", err)
	}
	for id, st := range want {
		if inst, _ := e.record(t, id); inst.Status != st {
			t.Errorf("record of %s: status %q, want %q", id, inst.Status, st)
		}
		if got := e.providerStatus(t, id); got != st {
			t.Errorf("provider status of %s: %q, want %q", id, got, st)
		}
	}
}

// TestScanAfterRedisLost: Redis lost the activity index (a restart
// without persistence, a FLUSHALL); the scan fills it again from the
// records and stops what is idle, and only that.
func TestScanAfterRedisLost(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		w, _, _ := e.workers(t, nil)
		idle := e.use(t, "idle")
		e.clock.Add(4 * time.Minute)
		recent := e.use(t, "recent")
		e.clock.Add(2 * time.Minute)
		if err := e.redis.FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		scanAndCheck(t, e, w, map[string]sandbox.Status{idle: sandbox.StatusStopped, recent: sandbox.StatusRunning})
		// Filled again: the next period stops the other one too.
		e.clock.Add(5 * time.Minute)
		scanAndCheck(t, e, w, map[string]sandbox.Status{recent: sandbox.StatusStopped})
	})
}

// TestReconcileRepairsActivityIndex: a command whose write to the
// activity index failed leaves its sandbox out of the scan's sight until
// reconciliation puts it back; the next scan then stops it.
func TestReconcileRepairsActivityIndex(t *testing.T) {
	forEachRedis(t, func(t *testing.T, addr string) {
		e := newEnv(t, bwrapProvider(t), addr)
		w, _, reg := e.workers(t, nil)
		id := e.use(t, "chat")
		// A scan fills the index, as in an engine that has run a while.
		scanAndCheck(t, e, w, map[string]sandbox.Status{id: sandbox.StatusRunning})
		if err := e.activity.Forget(ctx(t), e.provider.Name(), id); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(6 * time.Minute)
		scanAndCheck(t, e, w, map[string]sandbox.Status{id: sandbox.StatusRunning}) // out of sight
		reconcile(t, w)
		if got := metric(t, reg, "flowbox_reconcile_repairs_total", "kind", "activity_index"); got != 1 {
			t.Errorf("activity index repairs = %v, want 1", got)
		}
		e.clock.Add(5 * time.Minute)
		scanAndCheck(t, e, w, map[string]sandbox.Status{id: sandbox.StatusStopped})
	})
}

// TestScanWithoutActivityIndex: on a database whose {status,
// lastActiveAt} index works (MongoDB), the store has no activity index and
// the scan queries the records.
func TestScanWithoutActivityIndex(t *testing.T) {
	e := newEnv(t, bwrapProvider(t), redisKinds[1].start(t))
	store, err := mongostore.New(context.Background(), e.db, quiet)
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.activity = store, nil
	e.manager = e.newManager(t, e.provider)
	w, _, _ := e.workers(t, nil)
	idle := e.use(t, "idle")
	e.clock.Add(4 * time.Minute)
	recent := e.use(t, "recent")
	e.clock.Add(2 * time.Minute)
	if n, _ := e.redis.Exists(ctx(t), "flowbox:sandbox:activity:"+e.db.Name()+":"+e.provider.Name()).Result(); n != 0 {
		t.Fatal("an activity index was written by a store without one")
	}
	scanAndCheck(t, e, w, map[string]sandbox.Status{idle: sandbox.StatusStopped, recent: sandbox.StatusRunning})
}

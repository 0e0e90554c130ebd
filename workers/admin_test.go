package workers_test

import (
	"errors"
	"testing"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// TestAdminStopTakesTheClaim: an operator's stop waits for no one: a
// sandbox the stop scan or reconciliation holds is refused as busy and
// left running; free, it is stopped under a claim that is given back.
func TestAdminStopTakesTheClaim(t *testing.T) {
	p := bwrapProvider(t)
	e := newEnv(t, p, redisKinds[1].start(t))
	w, _, _ := e.workers(t, nil)
	id := e.use(t, "admin-stop")

	held, err := e.store.Claim(ctx(t), p.Name(), []string{id}, "another-worker", "stop", e.clock.Now())
	if err != nil || len(held) != 1 {
		t.Fatalf("claim: %v %v", held, err)
	}
	if err := w.StopSandbox(ctx(t), id); !errors.Is(err, sandbox.ErrBusy) {
		t.Fatalf("StopSandbox of a claimed sandbox: %v, want ErrBusy", err)
	}
	if st := e.providerStatus(t, id); st != sandbox.StatusRunning {
		t.Fatalf("after a refused stop the provider says %q, want running", st)
	}
	if err := e.store.Release(ctx(t), p.Name(), held, "another-worker"); err != nil {
		t.Fatal(err)
	}

	if err := w.StopSandbox(ctx(t), id); err != nil {
		t.Fatalf("StopSandbox: %v", err)
	}
	if st := e.providerStatus(t, id); st != sandbox.StatusStopped {
		t.Errorf("provider status = %q, want stoped", st)
	}
	if inst, ok := e.record(t, id); !ok || inst.Status != sandbox.StatusStopped {
		t.Errorf("record = %+v (found %v), want stoped", inst, ok)
	}
	if n := e.count(t, mongostore.ClaimsCollection, nil); n != 0 {
		t.Errorf("%d claims left after the stop, want 0", n)
	}
	if err := w.StopSandbox(ctx(t), "0000000000000000"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("StopSandbox of an unknown sandbox: %v, want ErrNotFound", err)
	}
}

// TestAdminDeleteRecordsTheChatsDeletion: an operator's delete is the
// chat's deletion: recorded first (the chat's commands are refused from
// then on), done by the workers' task.
func TestAdminDeleteRecordsTheChatsDeletion(t *testing.T) {
	p := bwrapProvider(t)
	e := newEnv(t, p, redisKinds[1].start(t))
	w, _, _ := e.workers(t, nil)
	id := e.use(t, "admin-delete")
	if err := w.DeleteSandbox(ctx(t), id); err != nil {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	if _, err := e.store.GetDeletion(ctx(t), mongostore.ChatDeletionKey(e.scope("admin-delete"))); err != nil {
		t.Fatalf("the chat's deletion intent: %v", err)
	}
	if _, err := e.manager.Exec(ctx(t), e.scope("admin-delete"), sandbox.ExecRequest{Command: "true"}); !errors.Is(err, sandbox.ErrDeleted) {
		t.Fatalf("a command after the admin's delete: %v, want ErrDeleted", err)
	}
	if err := w.DeleteSandbox(ctx(t), "0000000000000000"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("DeleteSandbox of an unknown sandbox: %v, want ErrNotFound", err)
	}
}

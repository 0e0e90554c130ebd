package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// TestManagerCheckpoints: through the manager, a chat's sandbox is
// checkpointed and restored; a restore waits for the chat's running
// command and gives up past RestoreWait, never restoring under it; a
// fork makes another chat's sandbox, recorded, from the checkpoint.
func TestManagerCheckpoints(t *testing.T) {
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: testenv.EngineBinary(t), CheckpointPool: checkpointtest.Pool(t)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	store, err := mongostore.New(context.Background(), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, RestoreWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	chat := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "c1"}
	run := func(scope sandbox.Scope, cmd string) string {
		t.Helper()
		res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %+v, %v", cmd, res, err)
		}
		return res.Stdout
	}
	t.Cleanup(func() {
		for _, id := range []string{chat.SandboxID(), sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "c2"}.SandboxID()} {
			_ = p.Delete(context.Background(), id)
		}
	})
	if _, err := m.Checkpoint(ctx, chat, "b0"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a checkpoint of a sandbox not made yet: %v, want ErrNotFound", err)
	}
	run(chat, "echo one > a.txt && cd /tmp && export X=1")
	if _, err := m.Checkpoint(ctx, chat, "b1"); err != nil {
		t.Fatal(err)
	}
	run(chat, "echo two > a.txt && cd / && export X=2")

	// A command that runs on: the restore waits, gives up, and the
	// command's sandbox is untouched.
	long := make(chan error, 1)
	go func() {
		_, err := m.Exec(ctx, chat, sandbox.ExecRequest{Command: "sleep 3; cat /workspace/a.txt", Timeout: 30 * time.Second})
		long <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if err := m.Restore(ctx, chat, "b1"); !errors.Is(err, sandbox.ErrRewindBusy) {
		t.Errorf("a restore beside a running command: %v, want ErrRewindBusy", err)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(ctx, chat, "b1"); err != nil {
		t.Fatal(err)
	}
	if got := run(chat, `cat /workspace/a.txt; echo "$(pwd) $X"`); got != "one\n/tmp 1\n" {
		t.Errorf("after the restore: %q, want one and /tmp 1", got)
	}

	other := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "c2"}
	if err := m.Fork(ctx, chat, "b1", other); err != nil {
		t.Fatal(err)
	}
	if err := m.Fork(ctx, chat, "b1", other); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second fork into the same chat: %v", err)
	}
	if got := run(other, `cat /workspace/a.txt; echo "$(pwd) $X"`); got != "one\n/tmp 1\n" {
		t.Errorf("the fork: %q, want one and /tmp 1", got)
	}
	inst, err := m.Lookup(ctx, other)
	if err != nil || inst.Status != sandbox.StatusRunning {
		t.Errorf("the fork's record: %+v, %v", inst, err)
	}
	run(other, "echo fork > a.txt")
	if got := run(chat, "cat /workspace/a.txt"); got != "one\n" {
		t.Errorf("the original after the fork's write: %q", got)
	}
}

package sandbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// TestManagerCheckpoints: through the manager, a chat's sandbox is
// checkpointed and restored; a restore waits for the chat's running
// command and gives up past RestoreWait, never restoring under it; a
// fork makes another chat's sandbox, recorded, from the checkpoint.
func TestManagerCheckpoints(t *testing.T) {
	p, m := checkpointManager(t, checkpointtest.Pool(t), sandbox.Config{RestoreWait: time.Second})
	ctx := context.Background()
	chat := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "c1"}
	run := func(scope sandbox.Scope, cmd string) string { t.Helper(); return mustRun(t, m, scope, cmd) }
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

// TestManagerFileCheckpoints: with the chat's files kept in their pool
// (Config.Files, the workspace store), the manager checkpoints them with
// the sandbox under one name, also before the sandbox exists; a restore
// to a checkpoint only the files have empties the sandbox and brings the
// files back; a checkpoint the files cannot take is not left on the
// sandbox alone (it would restore them empty); a fork from a checkpoint
// only the files have copies them and makes no sandbox.
func TestManagerFileCheckpoints(t *testing.T) {
	pool := checkpointtest.Pool(t)
	files, err := checkpoint.OpenChats(filepath.Join(pool, "chats"))
	if err != nil {
		t.Fatal(err)
	}
	chats, err := workspace.New(workspace.Config{Root: t.TempDir(), Pool: files})
	if err != nil {
		t.Fatal(err)
	}
	p, m := checkpointManager(t, pool, sandbox.Config{MountsFor: chats.Mounts, Files: chats})
	ctx := context.Background()
	chat := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "files"}
	t.Cleanup(func() { _ = p.Delete(context.Background(), chat.SandboxID()) })
	run := func(scope sandbox.Scope, cmd string) string { t.Helper(); return mustRun(t, m, scope, cmd) }
	names := func(scope sandbox.Scope) string {
		t.Helper()
		list, err := m.Checkpoints(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list {
			out = append(out, c.Name)
		}
		return strings.Join(out, " ")
	}
	if _, err := m.Checkpoints(ctx, chat); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the checkpoints of a chat with neither files nor a sandbox: %v, want ErrNotFound", err)
	}
	// Files before the sandbox: a checkpoint of them alone.
	if _, err := chats.Save(ctx, chat, "", "before.txt", strings.NewReader("up\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, chat, "t0"); err != nil {
		t.Fatalf("a checkpoint of a chat with files and no sandbox: %v", err)
	}
	run(chat, "echo one > /workspace/a.txt && echo mid > /workspace/uploads/mid.txt && echo i > /workspace/intermediate/i.txt")
	if _, err := m.Checkpoint(ctx, chat, "t1"); err != nil {
		t.Fatal(err)
	}
	if got := names(chat); got != "t0 t1" {
		t.Errorf("the checkpoints: %q, want t0 t1", got)
	}
	// One the files already have: refused, and not kept on the sandbox.
	if _, err := chats.Checkpoint(ctx, chat, "dup"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Checkpoint(ctx, chat, "dup"); err == nil {
		t.Error("a checkpoint the files could not take succeeded")
	}
	if list, err := p.Checkpoints(ctx, chat.SandboxID()); err != nil || len(list) != 1 || list[0].Name != "t1" {
		t.Errorf("the sandbox's own checkpoints after the refused one: %v, %v; want t1 alone", list, err)
	}
	if err := m.DropCheckpoint(ctx, chat, "dup"); err != nil {
		t.Fatal(err)
	}

	run(chat, "rm /workspace/a.txt /workspace/uploads/before.txt && echo two > /workspace/intermediate/i.txt")
	// While a file is being uploaded, a rewind is refused before it ends
	// the sandbox's processes: its namespace, whose /tmp is its own,
	// goes on. (Once it runs: the first commands of a sandbox may run in
	// a bwrap each while its namespace starts, each with a /tmp of its
	// own.)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if run(chat, "cat /tmp/mark 2>/dev/null || echo kept > /tmp/mark") == "kept\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox's namespace kept no /tmp across commands for a minute")
		}
	}
	pr, pw := io.Pipe()
	saved := make(chan error, 1)
	go func() {
		_, err := chats.Save(ctx, chat, "", "slow.txt", pr)
		saved <- err
	}()
	pw.Write([]byte("slow")) // returns once the upload reads it: in flight
	if err := m.Restore(ctx, chat, "t1"); !errors.Is(err, sandbox.ErrRewindBusy) {
		t.Errorf("a restore beside an upload: %v, want ErrRewindBusy", err)
	}
	pw.Close()
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if got := run(chat, "cat /tmp/mark; rm /workspace/uploads/slow.txt"); got != "kept\n" {
		t.Errorf("the sandbox's /tmp after the refused restore: %q, want its namespace kept", got)
	}
	if err := m.Restore(ctx, chat, "t1"); err != nil {
		t.Fatal(err)
	}
	if got := run(chat, "cat /workspace/a.txt /workspace/uploads/before.txt /workspace/intermediate/i.txt"); got != "one\nup\ni\n" {
		t.Errorf("after restoring t1: %q", got)
	}
	// t0: the files as uploaded, the sandbox empty (it did not exist).
	if err := m.Restore(ctx, chat, "t0"); err != nil {
		t.Fatal(err)
	}
	if got := run(chat, "ls -A /workspace | grep -v -e uploads -e intermediate; ls -A /workspace/uploads /workspace/intermediate"); got != "/workspace/intermediate:\n\n/workspace/uploads:\nbefore.txt\n" {
		t.Errorf("after restoring t0: %q", got)
	}
	if err := m.Restore(ctx, chat, "nowhere"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a restore to a checkpoint neither has: %v, want ErrNotFound", err)
	}

	// A fork at t0: the files copied, no sandbox until its first command.
	other := sandbox.Scope{AppID: "app", UserID: "u1", ChatID: "files-fork"}
	t.Cleanup(func() { _ = p.Delete(context.Background(), other.SandboxID()) })
	if err := m.Fork(ctx, chat, "t0", other); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lookup(ctx, other); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("a fork from a checkpoint of files alone made a sandbox record: %v", err)
	}
	if got := run(other, "cat /workspace/uploads/before.txt; ls /workspace/uploads"); got != "up\nbefore.txt\n" {
		t.Errorf("the fork's files: %q", got)
	}
	run(other, "echo fork > /workspace/uploads/fork.txt")
	if got := run(chat, "ls /workspace/uploads"); got != "before.txt\n" {
		t.Errorf("the original's uploads after the fork's write: %q", got)
	}
}

// checkpointManager is a manager of cfg on bwrap with its agent, whose
// sandboxes keep their files in the checkpoint pool at pool, and the
// test database.
func checkpointManager(t *testing.T, pool string, cfg sandbox.Config) (*bwrap.Provider, *sandbox.Manager) {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: testenv.EngineBinary(t), CheckpointPool: pool})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	if cfg.Store, err = mongostore.New(context.Background(), mongotest.DB(t), slog.Default()); err != nil {
		t.Fatal(err)
	}
	cfg.Provider = p
	m, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, m
}

// mustRun runs cmd in the scope's sandbox and returns its output; a
// failure or a non-zero exit fails the test.
func mustRun(t *testing.T, m *sandbox.Manager, scope sandbox.Scope, cmd string) string {
	t.Helper()
	res, err := m.Exec(context.Background(), scope, sandbox.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %+v, %v", cmd, res, err)
	}
	return res.Stdout
}

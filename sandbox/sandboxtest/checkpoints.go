package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// manifestCmd prints every entry under /workspace with its type, mode,
// size and content's hash, sorted, and the shell's cwd and $V: what a
// checkpoint must bring back.
const manifestCmd = `cd /workspace && find . -path ./skills -prune -o -path ./uploads -prune -o -path ./intermediate -prune -o -printf '%p %y %m %s\n' | sort > /tmp/m; ` +
	`find . -path ./skills -prune -o -path ./uploads -prune -o -path ./intermediate -prune -o -type f -print0 | sort -z | xargs -0r sha256sum >> /tmp/m; cat /tmp/m; cd - >/dev/null; echo "cwd=$(pwd) V=$V"`

// testCheckpoints: three turns create, change and delete files and move
// the shell; restoring a checkpoint brings the files, modes and shell
// state of its moment back exactly, running or stopped, and the later
// checkpoints stay (redo); a restore ends the sandbox's processes; a fork
// starts a new sandbox from a checkpoint and both go their own ways;
// deleting the sandbox deletes its checkpoints.
func testCheckpoints(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	cp, ok := p.(sandbox.CheckpointProvider)
	needs(t, p, ok && p.Capabilities().Checkpoints, "checkpoints")
	ctx := ctxFor(t)
	manifest := func(id string) string {
		t.Helper()
		res := run(t, p, id, manifestCmd, 30*time.Second)
		if res.ExitCode != 0 {
			t.Fatalf("manifest: %+v", res)
		}
		return res.Stdout
	}
	take := func(name string) string {
		t.Helper()
		if _, err := cp.Checkpoint(ctx, id, name); err != nil {
			t.Fatalf("Checkpoint %s: %v", name, err)
		}
		return manifest(id)
	}
	turns := []string{
		`mkdir -p src && echo one > src/a.txt && printf '#!/bin/sh\necho hi\n' > src/run.sh && chmod 755 src/run.sh && ln -s a.txt src/link && cd src && export V=1`,
		`echo two > a.txt && chmod 600 a.txt && head -c 300000 /dev/urandom > big.bin && rm link && mkdir -p /workspace/out && cd /workspace/out && export V=2`,
		`rm -rf /workspace/src && echo three > /workspace/out/r.txt && cd / && export V=3`,
	}
	at := []string{take("t0")}
	for i, cmd := range turns {
		if res := run(t, p, id, cmd, 30*time.Second); res.ExitCode != 0 {
			t.Fatalf("turn %d: %+v", i+1, res)
		}
		at = append(at, take("t"+string(rune('1'+i))))
	}
	if strings.Contains(at[1], "V=1") == false || !strings.Contains(at[1], "cwd=/workspace/src") {
		t.Fatalf("the manifest after turn 1 misses the shell's state:\n%s", at[1])
	}
	// Work after the last checkpoint, and a process of it.
	run(t, p, id, "echo later > /workspace/later.txt", 30*time.Second)
	if pp, ok := p.(sandbox.ProcessProvider); ok {
		if _, err := pp.Background().StartProcess(ctx, id, "sleep 300"); err != nil {
			t.Fatalf("StartProcess: %v", err)
		}
	}
	restore := func(name string, want string) {
		t.Helper()
		if err := cp.RestoreCheckpoint(ctx, id, name, nil); err != nil {
			t.Fatalf("RestoreCheckpoint %s: %v", name, err)
		}
		if got := manifest(id); got != want {
			t.Errorf("after restoring %s:\n got %s\nwant %s", name, got, want)
		}
	}
	restore("t2", at[2]) // regenerate turn 3
	if pp, ok := p.(sandbox.ProcessProvider); ok {
		list, err := pp.Background().ListProcesses(ctx, id)
		if err != nil {
			t.Fatalf("ListProcesses: %v", err)
		}
		for _, pr := range list {
			if pr.Running {
				t.Errorf("process %s (%s) runs on after the restore", pr.ID, pr.Command)
			}
		}
	}
	restore("t1", at[1]) // edit turn 2
	restore("t3", at[3]) // redo
	restore("", at[0])   // before the first turn: empty
	// Stopped: restored, and started as it was.
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := cp.RestoreCheckpoint(ctx, id, "t1", nil); err != nil {
		t.Fatalf("RestoreCheckpoint while stopped: %v", err)
	}
	if st, _ := p.Status(ctx, id); st != sandbox.StatusStopped {
		t.Errorf("status after a restore while stopped: %q, want stopped", st)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Labels: map[string]string{"appId": "app", "userId": "user", "chatId": id}}); err != nil {
		t.Fatal(err)
	}
	if got := manifest(id); got != at[1] {
		t.Errorf("restored while stopped, then started:\n got %s\nwant %s", got, at[1])
	}
	list, err := cp.Checkpoints(ctx, id)
	if err != nil || len(list) != 4 || list[0].Name != "t0" || list[3].Name != "t3" {
		t.Errorf("Checkpoints = %v, %v; want t0…t3", list, err)
	}

	// A fork at turn 2, while the original goes on.
	fork := NewID(t)
	if err := cp.ForkCheckpoint(ctx, id, "t2", fork); err != nil {
		t.Fatalf("ForkCheckpoint: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), fork) })
	if st, _ := p.Status(ctx, fork); st != sandbox.StatusStopped {
		t.Errorf("a new fork's status %q, want stopped", st)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: fork, Labels: map[string]string{"appId": "app", "userId": "user", "chatId": fork}}); err != nil {
		t.Fatal(err)
	}
	if got := manifest(fork); got != at[2] {
		t.Errorf("the fork:\n got %s\nwant %s", got, at[2])
	}
	run(t, p, fork, "echo fork > /workspace/fork.txt", 30*time.Second)
	run(t, p, id, "echo original > /workspace/original.txt", 30*time.Second)
	if res := run(t, p, id, "ls /workspace", 30*time.Second); strings.Contains(res.Stdout, "fork.txt") || !strings.Contains(res.Stdout, "original.txt") {
		t.Errorf("the original's workspace: %q", res.Stdout)
	}
	if res := run(t, p, fork, "ls /workspace", 30*time.Second); !strings.Contains(res.Stdout, "fork.txt") || strings.Contains(res.Stdout, "original.txt") {
		t.Errorf("the fork's workspace: %q", res.Stdout)
	}
	if list, _ := cp.Checkpoints(ctx, fork); len(list) != 0 {
		t.Errorf("the fork starts with checkpoints %v", list)
	}
	if err := cp.ForkCheckpoint(ctx, id, "t2", fork); err == nil {
		t.Error("a fork onto an existing sandbox succeeded")
	}
	if err := cp.RestoreCheckpoint(ctx, id, "nope", nil); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("restoring a missing checkpoint: %v, want ErrNotFound", err)
	}
	if err := cp.DropCheckpoint(ctx, id, "t0"); err != nil {
		t.Fatal(err)
	}
	if list, _ := cp.Checkpoints(ctx, id); len(list) != 3 {
		t.Errorf("after dropping t0: %v", list)
	}

	// Deleting the original leaves the fork whole.
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if left := h.Leftovers(t, p, id); len(left) > 0 {
		t.Errorf("left after the delete: %v", left)
	}
	if _, err := cp.Checkpoints(ctx, id); err == nil {
		t.Error("a deleted sandbox still lists checkpoints")
	}
	if res := run(t, p, fork, "cat /workspace/out/r.txt 2>&1; cat /workspace/fork.txt", 30*time.Second); !strings.Contains(res.Stdout, "No such file or directory\n") || !strings.HasSuffix(res.Stdout, "\nfork\n") {
		t.Errorf("the fork after the original's delete: %q", res.Stdout)
	}
}

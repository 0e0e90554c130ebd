package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// BenchmarkChatCheckpoints measures checkpoints as a chat meets them, on
// bwrap with its agent and on Docker with its agent (the test daemon's
// busybox image), through the manager, with issue 33's workspace: 1 GiB
// in 10,000 files, of which each turn's command changes 10. The chat's
// uploads (10 files of 100 KiB, one of which each turn changes) are kept
// and checkpointed as the engine keeps them (package workspace on the
// chats' pool), so each checkpoint, rewind and fork takes both.
//
//   - command-p50-ms, the baseline: the turn's command (10 files of
//     100 KiB written);
//   - checkpoint-p50-ms: the checkpoint before a turn;
//   - rewind-p50-ms: a restore to the previous turn's checkpoint, the
//     sandbox's processes ended and its files bound again (on Docker the
//     container stops and starts again);
//   - first-command-p50-ms, the baseline: `true` in the sandbox after a
//     rewind (its namespace starts again);
//   - fork-p50-ms: a fork into a new chat and that chat's first command;
//   - new-chat-p50-ms, the baseline: a new chat's first command, without
//     a fork.
//
// Run: FLOWBOX_TEST_REQUIRE=bwrap,docker,btrfs go test -run '^$' -bench ChatCheckpoints -benchtime 20x ./sandbox/
func BenchmarkChatCheckpoints(b *testing.B) {
	b.Run("bwrap", func(b *testing.B) {
		pool := checkpointtest.PoolOf(b, 16<<30)
		benchChatCheckpoints(b, pool, benchBwrapWith(b, bwrap.Config{AgentBinary: testenv.EngineBinary(b), CheckpointPool: pool}))
	})
	b.Run("docker", func(b *testing.B) {
		pool := checkpointtest.PoolOf(b, 16<<30)
		benchChatCheckpoints(b, pool, dockertest.Provider(b, docker.Config{AgentBinary: dockertest.AgentBinary(b), CheckpointPool: pool,
			WorkspaceRoot: filepath.Join(b.TempDir(), "sandboxes")}))
	})
}

func benchChatCheckpoints(b *testing.B, pool string, p sandbox.Provider) {
	store, err := mongostore.New(context.Background(), mongotest.DB(b), slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	files, err := checkpoint.OpenChats(filepath.Join(pool, "chats"))
	if err != nil {
		b.Fatal(err)
	}
	chats, err := workspace.New(workspace.Config{Root: b.TempDir(), Pool: files})
	if err != nil {
		b.Fatal(err)
	}
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, MountsFor: chats.Mounts, Files: chats})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	chat := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: "c"}
	exec := func(scope sandbox.Scope, cmd string) time.Duration {
		b.Helper()
		start := time.Now()
		res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: cmd, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %+v, %v", cmd, res, err)
		}
		return time.Since(start)
	}
	b.Cleanup(func() { _ = p.Delete(context.Background(), chat.SandboxID()) })
	exec(chat, "true")
	// The workspace, written from the host into the sandbox's files.
	ws := filepath.Join(pool, "live", chat.SandboxID(), "workspace")
	block := make([]byte, 100<<10)
	for d := 0; d < 100; d++ {
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			block[0], block[1] = byte(d), byte(f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", f)), block, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for f := 0; f < 10; f++ {
		if _, err := chats.Save(ctx, chat, "", fmt.Sprintf("u%d.bin", f), bytes.NewReader(block)); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Sync()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	var command, checkpoint, rewind, first, fork, fresh []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := "cd /workspace"
		for j := 0; j < 10; j++ {
			cmd += fmt.Sprintf(" && head -c 102400 /dev/urandom > d%02d/f%02d", (i*7+j)%100, (i*3+j*11)%100)
		}
		cmd += fmt.Sprintf(" && head -c 102400 /dev/urandom > uploads/u%d.bin", i%10)
		start := time.Now()
		if _, err := m.Checkpoint(ctx, chat, fmt.Sprintf("t%d", i)); err != nil {
			b.Fatal(err)
		}
		checkpoint = append(checkpoint, time.Since(start))
		command = append(command, exec(chat, cmd))
		start = time.Now()
		if err := m.Restore(ctx, chat, fmt.Sprintf("t%d", i)); err != nil {
			b.Fatal(err)
		}
		rewind = append(rewind, time.Since(start))
		first = append(first, exec(chat, "true"))
		exec(chat, cmd) // the turn again, as after a regenerate

		to := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("fork%d", i)}
		start = time.Now()
		if err := m.Fork(ctx, chat, fmt.Sprintf("t%d", i), to); err != nil {
			b.Fatal(err)
		}
		exec(to, "true")
		fork = append(fork, time.Since(start))
		other := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("new%d", i)}
		fresh = append(fresh, exec(other, "true"))
		b.StopTimer()
		for _, s := range []sandbox.Scope{to, other} {
			if err := m.Delete(ctx, s.SandboxID()); err != nil {
				b.Fatal(err)
			}
			if err := chats.DeleteChat(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(p50(command), "command-p50-ms")
	b.ReportMetric(p50(checkpoint), "checkpoint-p50-ms")
	b.ReportMetric(p50(rewind), "rewind-p50-ms")
	b.ReportMetric(p50(first), "first-command-p50-ms")
	b.ReportMetric(p50(fork), "fork-p50-ms")
	b.ReportMetric(p50(fresh), "new-chat-p50-ms")
}

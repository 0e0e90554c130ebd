//go:build linux

package bwrap_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
	"github.com/flowbox/flowbox/sandbox/diskimage"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// newProvider returns a provider on a private root and cgroup parent, or
// skips (fails under FLOWBOX_TEST_REQUIRE=bwrap) when bwrap cannot run.
func newProvider(t *testing.T) *bwrap.Provider { return newProviderWith(t, bwrap.Config{}) }

// newProviderWith is newProvider with cfg's other fields.
func newProviderWith(t *testing.T, cfg bwrap.Config) *bwrap.Provider {
	t.Helper()
	cfg.Root, cfg.CgroupParent = t.TempDir(), "flowbox-test"
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	return p
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, harness(func(t *testing.T) sandbox.Provider { return newProvider(t) }))
}

// TestConformanceNamespace runs the suite with the long-lived namespace:
// each running sandbox's commands go through the agent in it.
func TestConformanceNamespace(t *testing.T) {
	bin := testenv.EngineBinary(t)
	sandboxtest.Run(t, harness(func(t *testing.T) sandbox.Provider { return newProviderWith(t, bwrap.Config{AgentBinary: bin}) }))
}

// TestConformanceCheckpoints runs the suite on sandboxes whose files
// are in a checkpoint pool, a btrfs image of the test's own.
func TestConformanceCheckpoints(t *testing.T) {
	bin := testenv.EngineBinary(t)
	sandboxtest.Run(t, harness(func(t *testing.T) sandbox.Provider {
		return newProviderWith(t, bwrap.Config{AgentBinary: bin, CheckpointPool: checkpointtest.Pool(t)})
	}))
}

func harness(newP func(t *testing.T) sandbox.Provider) sandboxtest.Harness {
	return sandboxtest.Harness{
		New: newP,
		Processes: func(t *testing.T, p sandbox.Provider, id string) []string {
			pids, err := p.(*bwrap.Provider).Processes(id)
			if err != nil {
				t.Fatalf("Processes: %v", err)
			}
			var out []string
			for _, pid := range pids {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
			}
			return out
		},
		Leftovers: func(t *testing.T, p sandbox.Provider, id string) []string {
			var left []string
			for _, ctl := range []string{"memory", "pids", "cpu"} {
				d := filepath.Join("/sys/fs/cgroup", ctl, "flowbox-test", id)
				if _, err := os.Stat(d); err == nil {
					left = append(left, d)
				}
			}
			list, _ := p.List(context.Background())
			for _, r := range list {
				if r.ID == id {
					left = append(left, "directory of "+id)
				}
			}
			return left
		},
	}
}

// A running command is inside the sandbox's cgroups, and the groups carry
// the sandbox's limits: the conformance suite's process checks rely on it.
func TestCommandRunsInSandboxCgroups(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Limits: sandbox.Limits{MemoryMiB: 96, Pids: 50, CPUCount: 0.5}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	for file, want := range map[string]string{
		"memory/flowbox-test/" + id + "/memory.limit_in_bytes": fmt.Sprint(96 << 20),
		"pids/flowbox-test/" + id + "/pids.max":                "50",
		"cpu/flowbox-test/" + id + "/cpu.cfs_quota_us":         "50000",
	} {
		got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", file))
		if err != nil || strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q, %v; want %s", file, strings.TrimSpace(string(got)), err, want)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "sleep 1.7", Timeout: 10e9})
		done <- err
	}()
	for i := 0; i < 100; i++ {
		pids, _ := p.Processes(id)
		for _, pid := range pids {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(b), "sleep\x001.7") {
				mem, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory/flowbox-test", id, "cgroup.procs"))
				if !strings.Contains(" "+strings.ReplaceAll(string(mem), "\n", " ")+" ", fmt.Sprintf(" %d ", pid)) {
					t.Fatalf("sleep (pid %d) is in the pids group but not the memory group: %q", pid, mem)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the command never showed up in the sandbox's pids cgroup")
}

// A sandbox keeps the mounts it was created with; when the engine removed
// a source since, commands fail with an error that names it, instead of
// running without the directory.
func TestMountSourceGone(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	id := sandboxtest.NewID(t)
	src := filepath.Join(t.TempDir(), "uploads")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Mounts: []sandbox.Mount{{Source: src, Target: sandbox.UploadsDir}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	_, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "ls /workspace/uploads", Timeout: 10 * time.Second})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), src) {
		t.Fatalf("Exec with a mount source gone: err = %v; want ErrUnavailable naming %s", err, src)
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "ls /workspace/uploads && echo ok", Timeout: 10 * time.Second})
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("Exec once the source is back: %+v, %v; want ok", res, err)
	}
}

// agentPids are the sandbox's processes that run the agent. A child the
// agent is forking (its spare shell before the exec) still shows the
// agent's command line: a process whose parent is an agent is none.
func agentPids(t *testing.T, p *bwrap.Provider, id string) []int {
	t.Helper()
	pids, err := p.Processes(id)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[int]bool{}
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(b), "sandbox-agent") && !strings.HasPrefix(string(b), "bwrap") && !strings.Contains(string(b), "/bwrap\x00") {
			agents[pid] = true
		}
	}
	var out []int
	for _, pid := range pids {
		if agents[pid] && !agents[parent(pid)] {
			out = append(out, pid)
		}
	}
	return out
}

// parent is pid's parent, or 0.
func parent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which ends at the last ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// cmdlines are the processes' command lines, for failures.
func cmdlines(pids []int) []string {
	var out []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return out
}

// waitAgent waits until the sandbox has one agent and it listens at its
// socket under root, and returns it.
func waitAgent(t *testing.T, p *bwrap.Provider, root, id string) []int {
	t.Helper()
	sock := filepath.Join(root, id, "run", "agent.sock")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pids := agentPids(t, p, id); len(pids) == 1 {
			token, _ := os.ReadFile(filepath.Join(root, id, bwrap.AgentTokenFile))
			if c, err := agent.Dial(context.Background(), sock, token); err == nil {
				c.Close()
				return pids
			}
		}
	}
	all, _ := p.Processes(id)
	t.Fatalf("the sandbox's agent: %v, want one; its processes: %v", agentPids(t, p, id), cmdlines(all))
	return nil
}

// TestNamespace: with an agent binary, a running sandbox's commands go
// through one long-lived namespace that another provider (an engine
// restarted, a replica on this machine) finds and uses; Stop ends it and
// the state outlives it; a namespace killed from outside is started
// again; an agent that cannot start leaves commands to the per-command
// path.
func TestNamespace(t *testing.T) {
	bin := testenv.EngineBinary(t)
	cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", AgentBinary: bin}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()
	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	run := func(p *bwrap.Provider, cmd string) string {
		t.Helper()
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res.Stdout + res.Stderr
	}
	// The first command runs in a bwrap of its own and starts the
	// namespace meanwhile.
	run(p, "mkdir -p /workspace/w && cd /workspace/w && export A=7")
	first := waitAgent(t, p, cfg.Root, id)
	if got := run(p, "echo $A $PWD"); got != "7 /workspace/w\n" {
		t.Errorf("state through the agent: %q", got)
	}
	// What a command leaves in the background ends with it; the
	// namespace's own processes stay.
	run(p, "sleep 300 & setsid sleep 301 &")
	if pids, err := p.CommandProcesses(id); err != nil || len(pids) != 0 {
		t.Errorf("processes left by commands: %v, %v", cmdlines(pids), err)
	}

	// Another provider on the same machine uses the same namespace.
	other, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(other, "echo $A"); got != "7\n" {
		t.Errorf("from another provider: %q", got)
	}
	if again := agentPids(t, p, id); len(again) != 1 || again[0] != first[0] {
		t.Errorf("agents after another provider's command: %v, want still %v", again, first)
	}

	// Stop ends it; the state is the sandbox's.
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if pids, _ := p.Processes(id); len(pids) != 0 {
		t.Errorf("processes after Stop: %v", pids)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	if got := run(p, "echo $A $PWD"); got != "7 /workspace/w\n" {
		t.Errorf("state after stop and start: %q", got)
	}
	// A namespace killed from outside is started again after a later
	// command (one whose start fails is tried again nsRetry later, so
	// this gives it commands for longer than that).
	pids := waitAgent(t, p, cfg.Root, id)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Gone: a command sent to an agent while it dies fails, as it should.
	for slices.ContainsFunc(pids, func(pid int) bool { return syscall.Kill(pid, 0) == nil }) {
		time.Sleep(10 * time.Millisecond)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if got := run(p, "echo $A"); got != "7\n" {
			t.Errorf("after the agent was killed: %q", got)
		}
		now := agentPids(t, p, id)
		token, _ := os.ReadFile(filepath.Join(cfg.Root, id, bwrap.AgentTokenFile))
		if c, err := agent.Dial(ctx, filepath.Join(cfg.Root, id, "run", "agent.sock"), token); err == nil {
			c.Close()
			if len(now) != 1 || slices.Contains(pids, now[0]) {
				t.Errorf("agents after the kill: %v (killed %v)", now, pids)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent listens 30 s after the kill; agents %v", now)
		}
	}

	// A binary that is no agent: commands run, each in a bwrap of its own.
	broken := newProviderWith(t, bwrap.Config{AgentBinary: "/usr/bin/true"})
	bid := sandboxtest.NewID(t)
	if err := broken.Ensure(ctx, sandbox.Spec{ID: bid}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broken.Delete(context.Background(), bid) })
	res, err := broken.Exec(ctx, bid, sandbox.ExecRequest{Command: "echo fallback", Timeout: 10 * time.Second})
	if err != nil || res.Stdout != "fallback\n" {
		t.Errorf("with a broken agent binary: %+v, %v", res, err)
	}
}

// TestDiskLimit: a sandbox with a disk limit has its workspace on a
// filesystem of that size; filling it fails with "no space" inside the
// sandbox only, freeing space works again, the files are reachable while
// it is stopped and survive a start, and delete leaves no mount behind.
func TestDiskLimit(t *testing.T) {
	t.Run("per command", func(t *testing.T) { diskLimit(t, newProvider(t)) })
	t.Run("namespace", func(t *testing.T) {
		diskLimit(t, newProviderWith(t, bwrap.Config{AgentBinary: testenv.EngineBinary(t)}))
	})
}

func diskLimit(t *testing.T, p *bwrap.Provider) {
	ctx := context.Background()
	id, other := sandboxtest.NewID(t), sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Limits: sandbox.Limits{DiskGiB: 1}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	if err := p.Ensure(ctx, sandbox.Spec{ID: other}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), other) })
	run := func(id, cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	var size int64
	if _, err := fmt.Sscan(run(id, "df -k --output=size /workspace | tail -1").Stdout, &size); err != nil || size < 900_000 || size > 1_100_000 {
		t.Errorf("the workspace's size: %d KiB (%v), want about 1 GiB", size, err)
	}
	// Home and the shell's state are on the same image (T4).
	if res := run(id, "df -k --output=size /root /.flowbox | tail -2"); len(strings.Fields(res.Stdout)) != 2 {
		t.Errorf("the sizes of /root and /.flowbox: %+v", res)
	} else {
		for _, f := range strings.Fields(res.Stdout) {
			var n int64
			if _, err := fmt.Sscan(f, &n); err != nil || n < 900_000 || n > 1_100_000 {
				t.Errorf("/root or /.flowbox on a filesystem of %s KiB, want the 1 GiB image", f)
			}
		}
	}
	if res := run(id, "fallocate -l 900M /workspace/big && echo fits"); res.Stdout != "fits\n" {
		t.Fatalf("900 MiB in 1 GiB: %+v", res)
	}
	res := run(id, "fallocate -l 200M /workspace/more")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("past the limit: %+v, want No space left on device", res)
	}
	// The other sandbox, without a limit, is not held back.
	if res := run(other, "fallocate -l 200M /workspace/more && echo fine"); res.Stdout != "fine\n" {
		t.Errorf("another sandbox: %+v", res)
	}
	if res := run(id, "rm /workspace/big && echo kept > /workspace/note && cat /workspace/note"); res.Stdout != "kept\n" {
		t.Errorf("after freeing space: %+v", res)
	}
	// The files are in the image, reachable while the sandbox is stopped
	// and after it started again.
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if fs, err := p.Files(ctx, id); err != nil {
		t.Fatal(err)
	} else if b, err := fs.ReadFile(ctx, "note", 100); err != nil || string(b) != "kept\n" {
		t.Errorf("the files of the stopped sandbox: %q, %v", b, err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Limits: sandbox.Limits{DiskGiB: 1}}); err != nil {
		t.Fatal(err)
	}
	if res := run(id, "cat /workspace/note"); res.Stdout != "kept\n" {
		t.Errorf("after stop and start: %+v", res)
	}
	mounts := func() string {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, id) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if mounts() == "" {
		t.Error("the workspace is not a mount while the sandbox runs")
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m := mounts(); m != "" {
		t.Errorf("mounts left after delete:\n%s", m)
	}
}

// TestDiskLimitLayoutBeforeT4: a sandbox made before home and state moved
// onto the image (the workspace alone on workspace.img, home/ and state/
// host directories) keeps that layout: it starts, its workspace is still
// its image, and its home is still the host directory with its files.
func TestDiskLimitLayoutBeforeT4(t *testing.T) {
	cfg := bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testenv.Need(t, "bwrap", p.Fingerprint(ctx))
	id := sandboxtest.NewID(t)
	dir := filepath.Join(cfg.Root, id)
	for _, d := range []string{"workspace", "state", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "home", ".profile-old"), []byte("old home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := diskimage.Make(filepath.Join(dir, "workspace.img"), 1); err != nil {
		t.Skipf("no image for the old layout: %v", err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Limits: sandbox.Limits{DiskGiB: 1}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "cat /root/.profile-old; df -k --output=size /workspace | tail -1", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	var size int64
	if len(lines) != 2 || lines[0] != "old home" {
		t.Fatalf("an old sandbox's home: %+v", res)
	}
	if _, err := fmt.Sscan(lines[1], &size); err != nil || size < 900_000 || size > 1_100_000 {
		t.Errorf("an old sandbox's workspace: %d KiB (%v), want its 1 GiB image", size, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "disk.img")); err == nil {
		t.Error("an old sandbox was given the new image")
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m, _ := diskimage.IsMountPoint(filepath.Join(dir, "workspace")); m {
		t.Error("the old workspace image is still mounted after Delete")
	}
}

// TestDiskLimitInPool: in a checkpoint pool a disk limit is a quota on
// the sandbox's files and checkpoints together: past it, writes fail
// with "Disk quota exceeded"; what a checkpoint keeps counts until the
// checkpoint goes; another sandbox is not held back.
func TestDiskLimitInPool(t *testing.T) {
	p := newProviderWith(t, bwrap.Config{AgentBinary: testenv.EngineBinary(t), CheckpointPool: checkpointtest.Pool(t)})
	ctx := context.Background()
	id, other := sandboxtest.NewID(t), sandboxtest.NewID(t)
	for _, spec := range []sandbox.Spec{{ID: id, Limits: sandbox.Limits{DiskGiB: 1}}, {ID: other}} {
		if err := p.Ensure(ctx, spec); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	}
	run := func(id, cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	if res := run(id, "head -c 700M /dev/zero > /workspace/big && sync && echo fits"); res.Stdout != "fits\n" {
		t.Fatalf("700 MiB in 1 GiB: %+v", res)
	}
	if res := run(id, "head -c 500M /dev/zero > /root/more; sync"); !strings.Contains(res.Stderr, "Disk quota exceeded") {
		t.Errorf("past the limit, in the home: %+v, want Disk quota exceeded", res)
	}
	run(id, "rm -f /root/more; sync")
	if _, err := p.Checkpoint(ctx, id, "c1"); err != nil {
		t.Fatal(err)
	}
	// The checkpoint keeps the 700 MiB: 500 more do not fit.
	if res := run(id, "rm /workspace/big && sync && head -c 500M /dev/zero > /workspace/again; sync"); !strings.Contains(res.Stderr, "Disk quota exceeded") {
		t.Errorf("500 MiB beside a checkpoint of 700 in 1 GiB: %+v, want Disk quota exceeded", res)
	}
	if res := run(other, "head -c 500M /dev/zero > /workspace/more && echo fine"); res.Stdout != "fine\n" {
		t.Errorf("another sandbox: %+v", res)
	}
	if err := p.DropCheckpoint(ctx, id, "c1"); err != nil {
		t.Fatal(err)
	}
	if res := run(id, "rm -f /workspace/again; sync; head -c 500M /dev/zero > /workspace/again && echo fits"); res.Stdout != "fits\n" {
		t.Errorf("500 MiB once the checkpoint was dropped: %+v", res)
	}
}

// TestSweepCheckpoints: files and checkpoints in the pool that no sandbox
// owns, and the directory of a fork that never finished, are removed once
// older than the grace; a sandbox's own, and what is younger, stay.
func TestSweepCheckpoints(t *testing.T) {
	poolDir := checkpointtest.Pool(t)
	p := newProviderWith(t, bwrap.Config{AgentBinary: testenv.EngineBinary(t), CheckpointPool: poolDir})
	ctx := context.Background()
	kept, orphan, young, leftover := sandboxtest.NewID(t), sandboxtest.NewID(t), sandboxtest.NewID(t), sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: kept}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), kept) })
	if _, err := p.Exec(ctx, kept, sandbox.ExecRequest{Command: "echo mine > f", Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Checkpoint(ctx, kept, "c1"); err != nil {
		t.Fatal(err)
	}
	// What a killed engine left: another handle on the same pool.
	other, err := checkpoint.Open(poolDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{orphan, young} {
		if err := other.Create(id, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Checkpoint(id, "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(p.Dir(leftover), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir(leftover), "stopped"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	for _, path := range []string{other.Dir(orphan), filepath.Join(poolDir, "checkpoints", orphan), p.Dir(leftover), other.Dir(kept), filepath.Join(poolDir, "checkpoints", kept)} {
		if err := os.Chtimes(path, long, long); err != nil {
			t.Fatal(err)
		}
	}
	n, err := p.SweepCheckpoints(ctx, time.Now().Add(-10*time.Minute))
	if err != nil || n != 2 {
		t.Errorf("SweepCheckpoints = %d, %v; want the orphan and the leftover", n, err)
	}
	ids, _ := other.Sandboxes()
	if !slices.Equal(ids, slices.Sorted(slices.Values([]string{kept, young}))) {
		t.Errorf("the pool holds %v, want %s (its sandbox's) and %s (younger than the grace)", ids, kept, young)
	}
	if _, err := os.Stat(p.Dir(leftover)); !os.IsNotExist(err) {
		t.Errorf("the unfinished fork's directory: %v", err)
	}
	if res, err := p.Exec(ctx, kept, sandbox.ExecRequest{Command: "cat f", Timeout: time.Minute}); err != nil || res.Stdout != "mine\n" {
		t.Errorf("the sandbox after the sweep: %+v, %v", res, err)
	}
}

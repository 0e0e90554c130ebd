package docker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
)

// TestDiskLimit: a sandbox with a disk limit has its workspace on a
// filesystem of that size; filling it fails with "no space" inside the
// container while the engine and the daemon carry on, freeing space
// works again, the files are reachable while it is stopped and after a
// start, and delete leaves no mount behind.
func TestDiskLimit(t *testing.T) {
	t.Parallel()
	testDiskLimit(t, pathConfig(t, true))
}

// TestDiskLimitGVisor is TestDiskLimit under gVisor, whose file server
// sees the workspace's filesystem mounted on the host directory it binds.
func TestDiskLimitGVisor(t *testing.T) {
	t.Parallel()
	testDiskLimit(t, gvisorConfig(t))
}

func testDiskLimit(t *testing.T, cfg docker.Config) {
	e := newEnv(t, cfg)
	ctx := testCtx(t)
	id := e.started(t, sandbox.Spec{Limits: sandbox.Limits{DiskGiB: 1}})
	t.Cleanup(func() { e.p.Delete(context.Background(), id) })

	var size int64
	out := e.run(t, id, "df -k /workspace | tail -1", 30*time.Second).Stdout
	if f := strings.Fields(out); len(f) < 2 {
		t.Fatalf("df: %q", out)
	} else if _, err := fmt.Sscan(f[1], &size); err != nil || size < 900_000 || size > 1_100_000 {
		t.Errorf("the workspace's size: %s KiB (%v), want about 1 GiB", f[1], err)
	}
	res := e.run(t, id, "dd if=/dev/zero of=/workspace/fill bs=1M count=1100", 2*time.Minute)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("past the limit: exit %d, stderr %q; want No space left on device", res.ExitCode, res.Stderr)
	}
	if res := e.run(t, id, "rm /workspace/fill && echo kept > /workspace/note && cat /workspace/note", 30*time.Second); res.Stdout != "kept\n" {
		t.Errorf("after freeing space: %+v", res)
	}
	if err := e.p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if fs, err := e.p.Files(ctx, id); err != nil {
		t.Fatal(err)
	} else if b, err := fs.ReadFile(ctx, "note", 100); err != nil || string(b) != "kept\n" {
		t.Errorf("the files of the stopped sandbox: %q, %v", b, err)
	}
	if err := e.p.Ensure(ctx, sandbox.Spec{ID: id, Limits: sandbox.Limits{DiskGiB: 1}}); err != nil {
		t.Fatal(err)
	}
	if res := e.run(t, id, "cat /workspace/note", 30*time.Second); res.Stdout != "kept\n" {
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
	if err := e.p.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if m := mounts(); m != "" {
		t.Errorf("mounts left after delete:\n%s", m)
	}
}

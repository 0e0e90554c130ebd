//go:build linux

package bwrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// newProvider returns a provider on a private root and cgroup parent, or
// skips (fails under FLOWBOX_TEST_REQUIRE=bwrap) when bwrap cannot run.
func newProvider(t *testing.T) *bwrap.Provider {
	t.Helper()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	return p
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return newProvider(t) },
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
	})
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

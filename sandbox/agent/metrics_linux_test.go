package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestMetrics: the agent reports its groups' usage (here a cgroup v2
// tree as a container sees it) and the disk its workspace's and state's
// files take; the engine's fields are left to the engine.
func TestMetrics(t *testing.T) {
	cg := t.TempDir()
	for name, body := range map[string]string{
		"cpu.stat": "usage_usec 3000000\n", "memory.current": "52428800\n", "memory.max": "536870912\n", "pids.current": "4\n",
	} {
		if err := os.WriteFile(filepath.Join(cg, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := startAgentWith(t, Config{Cgroup: cg})
	if err := os.WriteFile(filepath.Join(e.work, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.state, "env"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	use := Usage(func(ctx context.Context, id string) (*Conn, error) { return Dial(ctx, e.sock, e.token) })
	m, err := use.Metrics(context.Background(), "sb")
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUSeconds != 3 || m.MemoryBytes != 50<<20 || m.MemoryLimitBytes != 512<<20 || m.Processes != 4 {
		t.Errorf("metrics %+v: want 3 s of CPU, 50 MiB of 512 MiB, 4 processes", m)
	}
	if m.DiskBytes < 4<<20 || m.DiskBytes > 5<<20 {
		t.Errorf("disk %d bytes, want about 4 MiB (3 in the workspace, 1 in the state)", m.DiskBytes)
	}
	if m.CPUPercent != -1 || m.DiskLimitBytes != 0 || m.SampledAt.IsZero() {
		t.Errorf("metrics %+v: the engine's fields set, or no sample time", m)
	}
}

// TestMetricsMalformed: a metrics request with anything else is refused.
func TestMetricsMalformed(t *testing.T) {
	e := startAgentWith(t, Config{})
	_, err := Files{Dial: e.dialer()}.collectAfter(context.Background(), wireRequest{Op: opMetrics, Path: "/etc"}, nil, maxListing)
	if err == nil {
		t.Fatal("a metrics request with a path was served")
	}
}

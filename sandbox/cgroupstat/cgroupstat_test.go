package cgroupstat

import (
	"os"
	"path/filepath"
	"testing"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadUsage: both layouts a container sees of its own groups, with
// and without a memory limit, and a tree with neither.
func TestReadUsage(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  Usage
	}{
		{"v1", map[string]string{
			"cpuacct/cpuacct.usage":        "2500000000\n",
			"memory/memory.usage_in_bytes": "1048576\n",
			"memory/memory.limit_in_bytes": "536870912\n",
			"pids/pids.current":            "7\n",
		}, Usage{CPUNanos: 2_500_000_000, Memory: 1 << 20, MemoryLimit: 512 << 20, Pids: 7}},
		{"v1 without a limit", map[string]string{
			"memory/memory.usage_in_bytes": "4096\n",
			"memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, Usage{CPUNanos: -1, Memory: 4096, MemoryLimit: 0, Pids: -1}},
		{"v2", map[string]string{
			"cpu.stat":       "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
			"memory.current": "2097152\n",
			"memory.max":     "268435456\n",
			"pids.current":   "3\n",
		}, Usage{CPUNanos: 1_500_000_000, Memory: 2 << 20, MemoryLimit: 256 << 20, Pids: 3}},
		{"v2 without a limit", map[string]string{
			"memory.current": "8192\n",
			"memory.max":     "max\n",
		}, Usage{CPUNanos: -1, Memory: 8192, MemoryLimit: 0, Pids: -1}},
		{"nothing", map[string]string{}, Usage{CPUNanos: -1, Memory: -1, MemoryLimit: 0, Pids: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, c.files)
			if got := ReadUsage(root); got != c.want {
				t.Errorf("ReadUsage = %+v, want %+v", got, c.want)
			}
		})
	}
}

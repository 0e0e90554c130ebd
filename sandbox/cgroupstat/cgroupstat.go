// Package cgroupstat reads a sandbox's cgroups: what its processes use
// (ReadUsage), and what the kernel counted of its limits being hit: OOM
// kills in its memory cgroup and forks its pids cgroup refused. The
// counters only grow while the groups exist, so a command's share is the
// difference of a reading before it and one after. Reading files needs
// no fork: it works while a fork bomb holds the pids limit.
package cgroupstat

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Counters are one reading; -1: the counter was not there to read.
type Counters struct {
	OOMKills, PidsMax int64
}

// During says which counters moved between c (before a command) and
// after; a counter missing from either reading says nothing.
func (c Counters) During(after Counters) (oomKilled, pidsLimited bool) {
	moved := func(before, after int64) bool { return before >= 0 && after > before }
	return moved(c.OOMKills, after.OOMKills), moved(c.PidsMax, after.PidsMax)
}

// Read reads the value of key in a cgroup file of "key value" lines
// (memory.oom_control, memory.events, pids.events); -1 when the file or
// the key is missing.
func Read(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || k != key {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// Int reads a cgroup file holding one number; -1 when it cannot.
func Int(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// NoLimit: cgroup v1 writes a memory limit near 2^63 for none.
const NoLimit = 1 << 62

// Usage is what a group's processes use now; -1: not there to read.
type Usage struct {
	CPUNanos    int64 // CPU time since the group was made
	Memory      int64 // memory charged, page cache included
	MemoryLimit int64 // 0: none
	Pids        int64
}

// ReadUsage reads the usage of the groups under the cgroup filesystem
// at root, as a container sees its own: cgroup v1 (memory/, pids/,
// cpuacct/) or, where those are missing, cgroup v2 with the group at
// root (memory.current, memory.max, pids.current, cpu.stat usage_usec).
func ReadUsage(root string) Usage {
	u := Usage{
		CPUNanos:    Int(filepath.Join(root, "cpuacct", "cpuacct.usage")),
		Memory:      Int(filepath.Join(root, "memory", "memory.usage_in_bytes")),
		MemoryLimit: Int(filepath.Join(root, "memory", "memory.limit_in_bytes")),
		Pids:        Int(filepath.Join(root, "pids", "pids.current")),
	}
	if u.CPUNanos < 0 {
		if us := Read(filepath.Join(root, "cpu.stat"), "usage_usec"); us >= 0 {
			u.CPUNanos = us * 1000
		}
	}
	if u.Memory < 0 {
		u.Memory = Int(filepath.Join(root, "memory.current"))
		u.MemoryLimit = Int(filepath.Join(root, "memory.max")) // "max": -1, none
	}
	if u.Pids < 0 {
		u.Pids = Int(filepath.Join(root, "pids.current"))
	}
	if u.MemoryLimit < 0 || u.MemoryLimit >= NoLimit {
		u.MemoryLimit = 0
	}
	return u
}

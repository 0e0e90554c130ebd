// Package cgroupstat reads what the kernel counted of a sandbox's limits
// being hit: OOM kills in its memory cgroup and forks its pids cgroup
// refused. The counters only grow while the groups exist, so a command's
// share is the difference of a reading before it and one after. Reading
// files needs no fork: it works while a fork bomb holds the pids limit.
package cgroupstat

import (
	"os"
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

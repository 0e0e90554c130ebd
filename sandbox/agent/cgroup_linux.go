package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// exhaustion is what the kernel counted of the agent's limits being hit:
// OOM kills in its memory cgroup and forks its pids cgroup refused. -1:
// the counter is not there to read.
type exhaustion struct {
	oomKills, pidsMax int64
}

// readExhaustion reads the counters under the cgroup filesystem at root:
// cgroup v1 (memory/memory.oom_control "oom_kill", from kernel 4.13, and
// pids/pids.events "max") or, when those are missing, cgroup v2 with the
// agent's own group at root (memory.events "oom_kill", pids.events "max").
// Reading files needs no fork: it works while a fork bomb holds the pids
// limit.
func readExhaustion(root string) exhaustion {
	e := exhaustion{
		oomKills: readCounter(filepath.Join(root, "memory", "memory.oom_control"), "oom_kill"),
		pidsMax:  readCounter(filepath.Join(root, "pids", "pids.events"), "max"),
	}
	if e.oomKills < 0 {
		e.oomKills = readCounter(filepath.Join(root, "memory.events"), "oom_kill")
	}
	if e.pidsMax < 0 {
		e.pidsMax = readCounter(filepath.Join(root, "pids.events"), "max")
	}
	return e
}

// during says which counters moved between e (before a command) and
// after; a counter missing from either reading says nothing.
func (e exhaustion) during(after exhaustion) (oomKilled, pidsLimited bool) {
	moved := func(before, after int64) bool { return before >= 0 && after > before }
	return moved(e.oomKills, after.oomKills), moved(e.pidsMax, after.pidsMax)
}

// readCounter reads the value of key in a cgroup file of "key value"
// lines; -1 when the file or the key is missing.
func readCounter(path, key string) int64 {
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

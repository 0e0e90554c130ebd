package agent

import (
	"path/filepath"

	"github.com/flowbox/flowbox/sandbox/cgroupstat"
)

// exhaustion is what the kernel counted of the agent's limits being hit.
type exhaustion = cgroupstat.Counters

// readExhaustion reads the counters under the cgroup filesystem at root:
// cgroup v1 (memory/memory.oom_control "oom_kill", from kernel 4.13, and
// pids/pids.events "max") or, when those are missing, cgroup v2 with the
// agent's own group at root (memory.events "oom_kill", pids.events "max").
// Reading files needs no fork: it works while a fork bomb holds the pids
// limit.
func readExhaustion(root string) exhaustion {
	e := exhaustion{
		OOMKills: cgroupstat.Read(filepath.Join(root, "memory", "memory.oom_control"), "oom_kill"),
		PidsMax:  cgroupstat.Read(filepath.Join(root, "pids", "pids.events"), "max"),
	}
	if e.OOMKills < 0 {
		e.OOMKills = cgroupstat.Read(filepath.Join(root, "memory.events"), "oom_kill")
	}
	if e.PidsMax < 0 {
		e.PidsMax = cgroupstat.Read(filepath.Join(root, "pids.events"), "max")
	}
	return e
}

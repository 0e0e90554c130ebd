package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// CheckCgroups says why the calling process is not inside its sandbox's
// cgroups: for each of controllers (cgroup v1), /proc/self/cgroup must put
// it in a group whose path ends with group ("flowbox/<id>"). Seen from a
// cgroup namespace the path is relative to the namespace's root, so only
// its end is compared. An agent outside its groups runs commands no limit
// holds: it must not serve (T4, finding 14).
func CheckCgroups(group string, controllers []string) error {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return fmt.Errorf("read the agent's cgroups: %w", err)
	}
	want := "/" + strings.Trim(group, "/")
	for _, ctl := range controllers {
		path, found := "", false
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), ctl) {
				path, found = parts[2], true
				break
			}
		}
		if !found || !strings.HasSuffix(path, want) {
			return fmt.Errorf("the agent is not in its sandbox's %s cgroup %s (it is in %q): the sandbox's limits would not hold, so it serves no command", ctl, want, path)
		}
	}
	return nil
}

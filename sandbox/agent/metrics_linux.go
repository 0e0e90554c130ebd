package agent

import (
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/cgroupstat"
)

// metrics reads what the sandbox uses now (see Metrics): its cgroups and
// the files of its workspace and shell state.
func (s *server) metrics() sandbox.Metrics {
	u := cgroupstat.ReadUsage(s.cfg.Cgroup)
	m := sandbox.Metrics{SampledAt: time.Now().UTC(), CPUSeconds: -1, CPUPercent: -1,
		MemoryBytes: u.Memory, MemoryLimitBytes: u.MemoryLimit, Processes: u.Pids,
		DiskBytes: sandbox.DirUsage(s.cfg.WorkDir) + sandbox.DirUsage(s.cfg.StateDir),
	}
	if u.CPUNanos >= 0 {
		m.CPUSeconds = float64(u.CPUNanos) / 1e9
	}
	return m
}

package bwrap

import (
	"context"
	"path/filepath"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/cgroupstat"
)

var _ sandbox.MetricsProvider = (*Provider)(nil)

// Metrics reads the running sandbox's cgroups (memory, pids, cpuacct) and
// its disk: the image's filesystem when it has a disk limit, its
// directories' files otherwise.
func (p *Provider) Metrics(ctx context.Context, id string) (sandbox.Metrics, error) {
	if err := checkID(id); err != nil {
		return sandbox.Metrics{}, err
	}
	if err := sandbox.Running(ctx, p, id); err != nil {
		return sandbox.Metrics{}, err
	}
	m := sandbox.Metrics{SampledAt: time.Now().UTC(), CPUSeconds: -1, CPUPercent: -1,
		MemoryBytes:      cgroupstat.Int(filepath.Join(p.cg.dir("memory", id), "memory.usage_in_bytes")),
		MemoryLimitBytes: cgroupstat.Int(filepath.Join(p.cg.dir("memory", id), "memory.limit_in_bytes")),
		Processes:        cgroupstat.Int(filepath.Join(p.cg.dir("pids", id), "pids.current")),
	}
	if m.MemoryLimitBytes >= cgroupstat.NoLimit {
		m.MemoryLimitBytes = 0
	}
	if ns := cgroupstat.Int(filepath.Join(p.cg.dir("cpuacct", id), "cpuacct.usage")); ns >= 0 {
		m.CPUSeconds = float64(ns) / 1e9
	}
	if p.onImage(id) {
		used, size, ok := sandbox.FSUsage(p.diskDir(id))
		if !ok {
			used, size = -1, 0
		}
		m.DiskBytes, m.DiskLimitBytes = used, size
	} else {
		for _, d := range []string{p.workspace(id), p.stateDir(id), p.homeDir(id)} {
			m.DiskBytes += sandbox.DirUsage(d)
		}
	}
	return m, nil
}

package bwrap

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

var _ sandbox.MetricsProvider = (*Provider)(nil)

// noMemoryLimit: cgroup v1 writes a limit near 2^63 for none.
const noMemoryLimit = 1 << 62

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
		MemoryBytes:      readInt(filepath.Join(p.cg.dir("memory", id), "memory.usage_in_bytes")),
		MemoryLimitBytes: readInt(filepath.Join(p.cg.dir("memory", id), "memory.limit_in_bytes")),
		Processes:        readInt(filepath.Join(p.cg.dir("pids", id), "pids.current")),
	}
	if m.MemoryLimitBytes >= noMemoryLimit {
		m.MemoryLimitBytes = 0
	}
	if ns := readInt(filepath.Join(p.cg.dir("cpuacct", id), "cpuacct.usage")); ns >= 0 {
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

// readInt reads a cgroup file holding one number; -1 when it cannot.
func readInt(path string) int64 {
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

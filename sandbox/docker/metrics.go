package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
)

var _ sandbox.MetricsProvider = (*Provider)(nil)

// Metrics reads the container's statistics from the daemon (one sample,
// from its cgroups) and its workspace's disk: the image's filesystem when
// it has a disk limit, the workspace's and the shell state's files
// otherwise. Under gVisor the daemon's figures are the sandbox kernel's.
func (p *Provider) Metrics(ctx context.Context, id string) (sandbox.Metrics, error) {
	if err := checkID(id); err != nil {
		return sandbox.Metrics{}, err
	}
	if err := sandbox.Running(ctx, p, id); err != nil {
		return sandbox.Metrics{}, err
	}
	res, err := p.cli.ContainerStats(ctx, ContainerName(id), client.ContainerStatsOptions{})
	if cerrdefs.IsNotFound(err) {
		return sandbox.Metrics{}, fmt.Errorf("docker sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return sandbox.Metrics{}, p.apiErr("statistics of sandbox "+id, err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		return sandbox.Metrics{}, fmt.Errorf("statistics of sandbox %s: %w: %v", id, sandbox.ErrUnavailable, err)
	}
	m := sandbox.Metrics{SampledAt: time.Now().UTC(), CPUPercent: -1,
		CPUSeconds:  float64(s.CPUStats.CPUUsage.TotalUsage) / 1e9,
		MemoryBytes: int64(s.MemoryStats.Usage), MemoryLimitBytes: int64(s.MemoryStats.Limit),
		Processes: int64(s.PidsStats.Current),
	}
	if lim := p.limitsOf(ctx, id); lim == 0 {
		m.MemoryLimitBytes = 0 // the daemon reports the host's memory for none
	}
	if pid, ok := p.poolID(id); ok {
		// Its checkpoints included, once the pool's transaction commits;
		// the files as they are until then.
		m.DiskBytes = max(p.pool.Usage(pid), sandbox.DirUsage(p.workspaceDir(id))+sandbox.DirUsage(p.stateDir(id)))
	} else if _, err := os.Stat(p.diskImage(id)); err == nil {
		used, size, ok := sandbox.FSUsage(p.workspaceDir(id))
		if !ok {
			used, size = -1, 0
		}
		m.DiskBytes, m.DiskLimitBytes = used, size
	} else {
		m.DiskBytes = sandbox.DirUsage(p.workspaceDir(id)) + sandbox.DirUsage(p.stateDir(id))
	}
	return m, nil
}

// limitsOf is the container's memory limit in bytes (0: none).
func (p *Provider) limitsOf(ctx context.Context, id string) int64 {
	res, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
	if err != nil || res.Container.HostConfig == nil {
		return 0
	}
	return res.Container.HostConfig.Memory
}

package engine

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowbox/flowbox/sandbox"
)

// topSandboxes is how many sandboxes the per-sandbox series name: the
// ones using the most memory, and the most CPU. The rest are in the sums
// alone, so the series stay bounded however many sandboxes run.
const topSandboxes = 10

// sandboxCollector exports what the running sandboxes use (L4), from the
// sampler (a scrape keeps it sampling):
//
//	flowbox_sandboxes_sampled                        running sandboxes with a sample
//	flowbox_sandboxes_memory_bytes                   their memory, summed
//	flowbox_sandboxes_cpu_percent                    their CPU shares (of one core), summed
//	flowbox_sandboxes_processes                      their processes, summed
//	flowbox_sandboxes_disk_bytes                     their writable files, summed
//	flowbox_sandbox_memory_bytes{sandbox_id,app_id}  the topSandboxes by memory
//	flowbox_sandbox_cpu_percent{sandbox_id,app_id}   the topSandboxes by CPU
type sandboxCollector struct{ s *sandbox.Sampler }

var (
	sampledDesc   = prometheus.NewDesc("flowbox_sandboxes_sampled", "Running sandboxes whose use was read in the last sample.", nil, nil)
	sumMemoryDesc = prometheus.NewDesc("flowbox_sandboxes_memory_bytes", "Memory charged to the running sandboxes, summed.", nil, nil)
	sumCPUDesc    = prometheus.NewDesc("flowbox_sandboxes_cpu_percent", "The running sandboxes' CPU shares (100 is one core) between the last two samples, summed.", nil, nil)
	sumProcsDesc  = prometheus.NewDesc("flowbox_sandboxes_processes", "Processes of the running sandboxes, summed.", nil, nil)
	sumDiskDesc   = prometheus.NewDesc("flowbox_sandboxes_disk_bytes", "Disk space the running sandboxes' writable files take, summed.", nil, nil)
	topMemoryDesc = prometheus.NewDesc("flowbox_sandbox_memory_bytes", "Memory of the running sandboxes that use the most (at most 10).", []string{"sandbox_id", "app_id"}, nil)
	topCPUDesc    = prometheus.NewDesc("flowbox_sandbox_cpu_percent", "CPU share of the running sandboxes that use the most (at most 10).", []string{"sandbox_id", "app_id"}, nil)
)

func (c sandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sampledDesc, sumMemoryDesc, sumCPUDesc, sumProcsDesc, sumDiskDesc, topMemoryDesc, topCPUDesc} {
		ch <- d
	}
}

func (c sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	samples := make([]sandbox.Sample, 0)
	for _, s := range c.s.Look(ctx) {
		samples = append(samples, s)
	}
	var mem, cpu, procs, disk float64
	for _, s := range samples {
		mem += float64(max(s.MemoryBytes, 0))
		cpu += max(s.CPUPercent, 0)
		procs += float64(max(s.Processes, 0))
		disk += float64(max(s.DiskBytes, 0))
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(sampledDesc, float64(len(samples)))
	gauge(sumMemoryDesc, mem)
	gauge(sumCPUDesc, cpu)
	gauge(sumProcsDesc, procs)
	gauge(sumDiskDesc, disk)
	top := func(d *prometheus.Desc, value func(sandbox.Sample) float64) {
		slices.SortFunc(samples, func(a, b sandbox.Sample) int {
			if va, vb := value(a), value(b); va != vb {
				if va > vb {
					return -1
				}
				return 1
			}
			return 0
		})
		for _, s := range samples[:min(len(samples), topSandboxes)] {
			if v := value(s); v >= 0 {
				gauge(d, v, s.Instance.SandboxID, s.Instance.AppID)
			}
		}
	}
	top(topMemoryDesc, func(s sandbox.Sample) float64 { return float64(s.MemoryBytes) })
	top(topCPUDesc, func(s sandbox.Sample) float64 { return s.CPUPercent })
}

package sandboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// testMetrics: a running sandbox's metrics follow what it does: memory a
// process holds, its processes, a file written, CPU time spent; a
// stopped sandbox has none.
func testMetrics(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{MemoryMiB: 512})
	mp, ok := p.(sandbox.MetricsProvider)
	needs(t, p, ok, "metrics")
	ctx := ctxFor(t)
	read := func() sandbox.Metrics {
		t.Helper()
		m, err := mp.Metrics(ctx, id)
		if err != nil {
			t.Fatalf("Metrics: %v", err)
		}
		return m
	}
	before := read()
	if before.MemoryLimitBytes != 512<<20 {
		t.Errorf("memory limit %d, want 512 MiB", before.MemoryLimitBytes)
	}

	// A command holding about 80 MB while the metrics are read: dd's
	// buffer, filled, waits to be written to a pipe nobody reads. (A
	// shell reading 80 MB into a variable took 24 s under gVisor.)
	hogCtx, stopHog := context.WithCancel(ctx)
	hogDone := make(chan struct{})
	go func() {
		defer close(hogDone)
		_, _ = p.Exec(hogCtx, id, sandbox.ExecRequest{Command: `dd if=/dev/zero bs=80M count=1 2>/dev/null | sleep 120`, Timeout: 2 * time.Minute})
	}()
	var during sandbox.Metrics
	eventually(t, ctx, "the memory hog in the metrics", func() bool {
		during = read()
		return during.MemoryBytes >= before.MemoryBytes+60_000_000
	})
	if during.Processes < 2 {
		t.Errorf("%d processes while the hog and its sleep run", during.Processes)
	}
	stopHog()
	<-hogDone
	eventually(t, ctx, "the memory given back", func() bool { return read().MemoryBytes < during.MemoryBytes-40_000_000 })

	run(t, p, id, "head -c 6000000 /dev/urandom > big.bin; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done", 60*time.Second)
	after := read()
	if after.DiskBytes < before.DiskBytes+5_000_000 {
		t.Errorf("disk %d after writing 6 MB, %d before", after.DiskBytes, before.DiskBytes)
	}
	if after.CPUSeconds >= 0 && after.CPUSeconds <= before.CPUSeconds {
		t.Errorf("CPU time %.3f s after a busy loop, %.3f s before", after.CPUSeconds, before.CPUSeconds)
	}

	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := mp.Metrics(ctx, id); err == nil {
		t.Error("a stopped sandbox has metrics")
	}
}

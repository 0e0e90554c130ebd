//go:build linux

package bwrap_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// BenchmarkNetworkFull measures what the full network costs on the
// product's path (the long-lived namespace and its agent): a command
// (`true`) in a running sandbox, and a sandbox's start (Ensure and the
// first output of `echo hi`, then Delete, untimed), with the network
// beside the same without it (the baseline), interleaved in one run. Each
// reports p50s and the ratio.
//
//	go test -run '^$' -bench NetworkFull -benchtime 100x ./sandbox/bwrap/
func BenchmarkNetworkFull(b *testing.B) {
	pub := egresstest.NewPublic(b)
	// As the engine runs them: the agent binary is also the forwarder.
	bin := testenv.AgentBinary(b)
	p, err := bwrap.New(bwrap.Config{Root: b.TempDir(), CgroupParent: "flowbox-test", Egress: pub.Proxy, ForwarderBinary: bin, AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	testenv.Need(b, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	exec := func(id, cmd string) {
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %+v %v", cmd, res, err)
		}
	}
	b.Run("command", func(b *testing.B) {
		ids := map[bool]string{}
		for _, network := range []bool{false, true} {
			id := sandboxtest.NewID(b)
			if err := p.Ensure(ctx, sandbox.Spec{ID: id, Network: network}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Delete(context.Background(), id) })
			exec(id, "true")
			ids[network] = id
		}
		var none, full []time.Duration
		b.ResetTimer()
		for range b.N {
			for _, network := range []bool{false, true} {
				time.Sleep(30 * time.Millisecond) // the spare shell of the one before
				start := time.Now()
				exec(ids[network], "true")
				if network {
					full = append(full, time.Since(start))
				} else {
					none = append(none, time.Since(start))
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(p50(none), "none-p50-ms")
		b.ReportMetric(p50(full), "full-p50-ms")
		b.ReportMetric(p50(full)/p50(none), "full/none")
	})
	b.Run("start", func(b *testing.B) {
		var none, full []time.Duration
		b.ResetTimer()
		for range b.N {
			for _, network := range []bool{false, true} {
				id := sandboxtest.NewID(b)
				start := time.Now()
				if err := p.Ensure(ctx, sandbox.Spec{ID: id, Network: network}); err != nil {
					b.Fatal(err)
				}
				exec(id, "echo hi")
				d := time.Since(start)
				b.StopTimer()
				if network {
					full = append(full, d)
				} else {
					none = append(none, d)
				}
				p.Delete(ctx, id)
				b.StartTimer()
			}
		}
		b.StopTimer()
		b.ReportMetric(p50(none), "none-p50-ms")
		b.ReportMetric(p50(full), "full-p50-ms")
		b.ReportMetric(p50(full)/p50(none), "full/none")
	})
}

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/policy"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

// BenchmarkShellPolicy puts a command with 32 KiB of output through the
// manager on bwrap with the chain the product builds (audit, command
// policy, redaction) beside the same command without it, in the same run
// (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench ShellPolicy -benchtime 300x ./engine/
func BenchmarkShellPolicy(b *testing.B) {
	p, err := bwrap.New(bwrap.Config{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	testenv.Need(b, "bwrap", p.Fingerprint(context.Background()))
	store, chain := benchChain(b)
	// 32 KiB of log-like lines, a secret among them.
	cmd := `for i in $(seq 1 450); do echo "2026-11-23 01:02:03 INFO worker-$i processed batch $i in 12ms status=ok"; done; echo token=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4Ab3dE6gH9jK2mN5pQ8sT1vW4`
	for _, tc := range []struct {
		name string
		mw   []sandbox.Middleware
	}{{"bare", nil}, {"policy", chain}} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Middleware: tc.mw})
			if err != nil {
				b.Fatal(err)
			}
			scope := sandbox.Scope{AppID: "bench", UserID: "u:bench", ChatID: tc.name}
			if _, err := m.Exec(context.Background(), scope, sandbox.ExecRequest{Command: "true"}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
			b.ResetTimer()
			for b.Loop() {
				res, err := m.Exec(context.Background(), scope, sandbox.ExecRequest{Command: cmd})
				if err != nil || len(res.Stdout) < 32000 {
					b.Fatalf("%v, %d bytes", err, len(res.Stdout))
				}
			}
		})
	}
}

// BenchmarkShellPolicyOverhead isolates what the chain adds: the same
// 32 KiB of output (in 4 KiB live chunks, a secret among them) from an
// in-memory provider, through two managers on one database, one with the
// chain and one without. Each iteration runs the command through both, in
// turn, so that both see the same machine and the same database; the
// benchmark reports the median and 99th percentile of each and the median
// of the differences (the cost of parse + judge + redact + audit per
// command).
//
//	go test -run '^$' -bench ShellPolicyOverhead -benchtime 2000x ./engine/
func BenchmarkShellPolicyOverhead(b *testing.B) {
	store, chain := benchChain(b)
	var out strings.Builder
	for out.Len() < 32<<10-200 {
		fmt.Fprintf(&out, "2026-11-23 01:02:03 INFO worker-%d processed batch in 12ms status=ok\n", out.Len())
	}
	out.WriteString("token=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4Ab3dE6gH9jK2mN5pQ8sT1vW4\n")
	p := &memProvider{out: out.String()}
	cmd := `cd /workspace && grep -rn "TODO" src | head -20 && python3 -c 'print(1)' | tee out.txt`
	type variant struct {
		m     *sandbox.Manager
		scope sandbox.Scope
		times []time.Duration
	}
	var variants [2]*variant
	for i, mw := range [][]sandbox.Middleware{nil, chain} {
		m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Middleware: mw})
		if err != nil {
			b.Fatal(err)
		}
		variants[i] = &variant{m: m, scope: sandbox.Scope{AppID: "bench", UserID: "u:bench", ChatID: fmt.Sprint("overhead-", i)}}
	}
	req := sandbox.ExecRequest{Command: cmd, OnOutput: func(sandbox.Stream, []byte) {}}
	run := func(v *variant) time.Duration {
		start := time.Now()
		res, err := v.m.Exec(context.Background(), v.scope, req)
		d := time.Since(start)
		if err != nil || len(res.Stdout) < 32000 || strings.Contains(res.Stdout, "sk-proj-") == (v == variants[1]) {
			b.Fatalf("%v, %d bytes", err, len(res.Stdout))
		}
		return d
	}
	for _, v := range variants {
		run(v) // create the sandbox's record
	}
	added := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		bare, chained := run(variants[0]), run(variants[1])
		variants[0].times = append(variants[0].times, bare)
		variants[1].times = append(variants[1].times, chained)
		added = append(added, chained-bare)
	}
	b.StopTimer()
	quantile := func(ts []time.Duration, q int) float64 {
		slices.Sort(ts)
		return float64(ts[len(ts)*q/100].Microseconds()) / 1000
	}
	b.ReportMetric(quantile(variants[0].times, 50), "bare-p50-ms")
	b.ReportMetric(quantile(variants[1].times, 50), "chain-p50-ms")
	b.ReportMetric(quantile(variants[0].times, 99), "bare-p99-ms")
	b.ReportMetric(quantile(variants[1].times, 99), "chain-p99-ms")
	b.ReportMetric(quantile(added, 50), "added-p50-ms")
}

// benchChain is a record store and the chain the product builds (audit,
// command policy, redaction, with the defaults) on a fresh database.
func benchChain(b *testing.B) (*mongostore.Store, []sandbox.Middleware) {
	b.Helper()
	db := mongotest.DB(b)
	store, err := mongostore.New(context.Background(), db, nil)
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.NewResolver(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	records, err := audit.New(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	w := audit.NewWriter(audit.WriterConfig{Store: records})
	b.Cleanup(w.Close)
	return store, append([]sandbox.Middleware{audit.Middleware(audit.Config{Records: w, Redact: pol.RedactCommand})}, pol.Middleware()...)
}

// memProvider answers every command with the same output, streamed in
// 4 KiB chunks: the benchmark's stand-in for the sandbox, so that only
// the chain is measured.
type memProvider struct{ out string }

func (p *memProvider) Name() string { return "memory" }
func (p *memProvider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Streaming: true}
}
func (p *memProvider) Fingerprint(context.Context) error                { return nil }
func (p *memProvider) Ensure(context.Context, sandbox.Spec) error       { return nil }
func (p *memProvider) Stop(context.Context, string) error               { return nil }
func (p *memProvider) Delete(context.Context, string) error             { return nil }
func (p *memProvider) List(context.Context) ([]sandbox.Resource, error) { return nil, nil }
func (p *memProvider) Status(context.Context, string) (sandbox.Status, error) {
	return sandbox.StatusRunning, nil
}
func (p *memProvider) Files(context.Context, string) (sandbox.Files, error) {
	return nil, sandbox.ErrUnsupported
}
func (p *memProvider) Exec(_ context.Context, _ string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if req.OnOutput != nil {
		for i := 0; i < len(p.out); i += 4096 {
			req.OnOutput(sandbox.Stdout, []byte(p.out[i:min(i+4096, len(p.out))]))
		}
	}
	return sandbox.ExecResult{Stdout: p.out}, nil
}

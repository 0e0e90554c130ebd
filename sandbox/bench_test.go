package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// The benchmarks put each of our paths beside the raw primitive it wraps,
// measured in the same run (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench . -benchtime 200x ./sandbox/
//
// ExecTrue: one round trip of `true`. The bwrap baseline is a bare bwrap
// with the same namespaces and system mounts running /bin/true; the docker
// baseline is the docker CLI's `docker exec`. The manager figures include
// the record upsert on the embedded database.

func benchManager(b *testing.B, p sandbox.Provider) *sandbox.Manager {
	b.Helper()
	store, err := mongostore.New(context.Background(), mongotest.DB(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	mongotest.IndexIDs(b) // as the engine has it once its collections exist
	m, err := sandbox.New(sandbox.Config{Provider: p, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchBwrap(b *testing.B) *bwrap.Provider { return benchBwrapWith(b, bwrap.Config{}) }

func benchBwrapWith(b *testing.B, cfg bwrap.Config) *bwrap.Provider {
	b.Helper()
	if cfg.Root == "" {
		cfg.Root = b.TempDir()
	}
	cfg.CgroupParent = "flowbox-bench"
	p, err := bwrap.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	testenv.Need(b, "bwrap", p.Fingerprint(context.Background()))
	return p
}

func benchDocker(b *testing.B) *docker.Provider {
	b.Helper()
	return dockertest.Provider(b, docker.Config{Image: dockertest.Image, Shell: "/bin/sh"})
}

// bareBwrapArgs are the namespaces and mounts our bwrap provider sets up,
// without its cgroup join, persistent shell or state.
func bareBwrapArgs() []string {
	args := []string{"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if target, err := os.Readlink(top); err == nil {
			args = append(args, "--symlink", target, top)
		}
	}
	return append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/true")
}

func execLoop(b *testing.B, m *sandbox.Manager, p sandbox.Provider, scope sandbox.Scope) {
	b.Helper()
	ctx := context.Background()
	id := scope.SandboxID()
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var res sandbox.ExecResult
		var err error
		if m != nil {
			res, err = m.Exec(ctx, scope, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second})
		} else {
			res, err = p.Exec(ctx, id, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second})
		}
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
}

func BenchmarkExecTrue(b *testing.B) {
	scope := func(name string) sandbox.Scope {
		return sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("%s-%d", name, time.Now().UnixNano())}
	}
	b.Run("bwrap/bare", func(b *testing.B) {
		benchBwrap(b)
		args := bareBwrapArgs()
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("bwrap", args...).CombinedOutput(); err != nil {
				b.Fatalf("bare bwrap: %v %s", err, out)
			}
		}
	})
	b.Run("bwrap/provider", func(b *testing.B) {
		p := benchBwrap(b)
		execLoop(b, nil, p, scope("bp"))
	})
	b.Run("bwrap/manager", func(b *testing.B) {
		p := benchBwrap(b)
		execLoop(b, benchManager(b, p), p, scope("bm"))
	})
	b.Run("docker/cli", func(b *testing.B) {
		p := benchDocker(b)
		s := scope("dc")
		if err := p.Ensure(context.Background(), sandbox.Spec{ID: s.SandboxID()}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Delete(context.Background(), s.SandboxID()) })
		name := docker.ContainerName(s.SandboxID())
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if out, err := exec.Command("docker", "exec", name, "/bin/sh", "-c", "true").CombinedOutput(); err != nil {
				b.Fatalf("docker exec: %v %s", err, out)
			}
		}
	})
	b.Run("docker/provider", func(b *testing.B) {
		p := benchDocker(b)
		execLoop(b, nil, p, scope("dp"))
	})
	b.Run("docker/manager", func(b *testing.B) {
		p := benchDocker(b)
		execLoop(b, benchManager(b, p), p, scope("dm"))
	})
}

// BenchmarkBwrapNamespace puts the two bwrap paths beside the bare
// primitive, in turn so that all three see the same machine: a bare bwrap
// running /bin/true, the manager on the per-command path (a bwrap per
// command), and the manager through the long-lived namespace's agent. The
// cold sub-benchmark is a new chat's first command (record, create, first
// output of echo hi) on each path. Each reports p50s and the ratios.
//
//	go test -run '^$' -bench BwrapNamespace -benchtime 200x ./sandbox/
func BenchmarkBwrapNamespace(b *testing.B) {
	bin := testenv.AgentBinary(b)
	per, ns := benchBwrap(b), benchBwrapWith(b, bwrap.Config{AgentBinary: bin})
	mPer, mNs := benchManager(b, per), benchManager(b, ns)
	ctx := context.Background()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.Run("warm", func(b *testing.B) {
		sPer := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("per-%d", time.Now().UnixNano())}
		sNs := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("ns-%d", time.Now().UnixNano())}
		for _, s := range []struct {
			m  *sandbox.Manager
			sc sandbox.Scope
		}{{mPer, sPer}, {mNs, sNs}} {
			if _, err := s.m.Exec(ctx, s.sc, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.m.Delete(context.Background(), s.sc.SandboxID()) })
		}
		args := bareBwrapArgs()
		var bare, perCmd, agent, agentProvider []time.Duration
		run := func(m *sandbox.Manager, sc sandbox.Scope) time.Duration {
			start := time.Now()
			if res, err := m.Exec(ctx, sc, sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %+v %v", res, err)
			}
			return time.Since(start)
		}
		// Each measurement starts once what the one before left running
		// has ended (the agent's next spare shell, the record's refresh
		// after a warm command: milliseconds of CPU on this machine), as a
		// chat's commands, seconds apart, do; back to back, each would
		// also time its predecessor's tail.
		settle := func() { time.Sleep(30 * time.Millisecond) }
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			if out, err := exec.Command("bwrap", args...).CombinedOutput(); err != nil {
				b.Fatalf("bare bwrap: %v %s", err, out)
			}
			bare = append(bare, time.Since(start))
			settle()
			perCmd = append(perCmd, run(mPer, sPer))
			settle()
			agent = append(agent, run(mNs, sNs))
			settle()
			start = time.Now()
			if _, err := ns.Exec(ctx, sNs.SandboxID(), sandbox.ExecRequest{Command: "true", Timeout: 10 * time.Second}); err != nil {
				b.Fatal(err)
			}
			agentProvider = append(agentProvider, time.Since(start))
			settle()
		}
		b.StopTimer()
		pb, pp, pa := p50(bare), p50(perCmd), p50(agent)
		b.ReportMetric(pb, "bare-p50-ms")
		b.ReportMetric(pp, "percommand-p50-ms")
		b.ReportMetric(pa, "namespace-p50-ms")
		b.ReportMetric(pa/pb, "namespace/bare")
		b.ReportMetric(p50(agentProvider), "namespace-provider-p50-ms")
	})
	b.Run("cold", func(b *testing.B) {
		var perCmd, agent []time.Duration
		var made []func()
		b.Cleanup(func() {
			for _, del := range made {
				del()
			}
		})
		cold := func(m *sandbox.Manager, i int, name string) time.Duration {
			s := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("cold-%s-%d-%d", name, i, time.Now().UnixNano())}
			first := make(chan time.Time, 1)
			start := time.Now()
			res, err := m.Exec(ctx, s, sandbox.ExecRequest{Command: "echo hi", Timeout: 30 * time.Second,
				OnOutput: func(sandbox.Stream, []byte) {
					select {
					case first <- time.Now():
					default:
					}
				}})
			if err != nil || res.Stdout != "hi\n" {
				b.Fatalf("cold exec: %+v %v", res, err)
			}
			made = append(made, func() { _ = m.Delete(context.Background(), s.SandboxID()) })
			return (<-first).Sub(start)
		}
		b.ResetTimer()
		for i := range b.N {
			perCmd = append(perCmd, cold(mPer, i, "per"))
			agent = append(agent, cold(mNs, i, "ns"))
		}
		b.StopTimer()
		pp, pa := p50(perCmd), p50(agent)
		b.ReportMetric(pp, "percommand-p50-ms")
		b.ReportMetric(pa, "namespace-p50-ms")
		b.ReportMetric(pa/pp, "namespace/percommand")
	})
}

// BenchmarkColdStart measures a new chat's first command through the
// manager: record, create, first output of `echo hi`.
func BenchmarkColdStart(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    func(b *testing.B) sandbox.Provider
	}{
		{"bwrap", func(b *testing.B) sandbox.Provider { return benchBwrap(b) }},
		{"docker", func(b *testing.B) sandbox.Provider { return benchDocker(b) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := tc.p(b)
			m := benchManager(b, p)
			ctx := context.Background()
			var ids []string
			b.Cleanup(func() {
				for _, id := range ids {
					_ = m.Delete(context.Background(), id)
				}
			})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("cold-%d-%d", i, time.Now().UnixNano())}
				first := make(chan struct{}, 1)
				res, err := m.Exec(ctx, s, sandbox.ExecRequest{Command: "echo hi", Timeout: 30 * time.Second,
					OnOutput: func(sandbox.Stream, []byte) {
						select {
						case first <- struct{}{}:
						default:
						}
					}})
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("cold exec: %+v %v", res, err)
				}
				<-first
				b.StopTimer()
				ids = append(ids, s.SandboxID())
				b.StartTimer()
			}
		})
	}
}

// BenchmarkStopDelete measures Stop and Delete of a running sandbox through
// the manager.
func BenchmarkStopDelete(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    func(b *testing.B) sandbox.Provider
	}{
		{"bwrap", func(b *testing.B) sandbox.Provider { return benchBwrap(b) }},
		{"docker", func(b *testing.B) sandbox.Provider { return benchDocker(b) }},
	} {
		for _, op := range []string{"stop", "delete"} {
			b.Run(tc.name+"/"+op, func(b *testing.B) {
				p := tc.p(b)
				m := benchManager(b, p)
				ctx := context.Background()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					s := sandbox.Scope{AppID: "bench", UserID: "u", ChatID: fmt.Sprintf("sd-%d-%d", i, time.Now().UnixNano())}
					if _, err := m.Exec(ctx, s, sandbox.ExecRequest{Command: "echo x > f", Timeout: 30 * time.Second}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					var err error
					if op == "stop" {
						err = m.Stop(ctx, s.SandboxID())
					} else {
						err = m.Delete(ctx, s.SandboxID())
					}
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					_ = m.Delete(ctx, s.SandboxID())
					b.StartTimer()
				}
			})
		}
	}
}

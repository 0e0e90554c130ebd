package sandbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// BenchmarkWarmPool puts a new chat's first command with a warm pool
// beside the same command created cold, in turn, on each provider with
// its command agent: the time from Exec to the first output of `echo
// hi`, the chat's record, workspace directories and skills mount
// included. The pool is refilled between iterations, off the clock. The
// same command again in the adopted sandbox (running-p50-ms) is the floor
// a pool can approach.
//
// bwrap-caps runs bwrap under the product's default caps, which count the
// running sandboxes at every new chat's first command.
//
//	go test -run '^$' -bench WarmPool -benchtime 30x ./sandbox/
func BenchmarkWarmPool(b *testing.B) {
	bwrapProvider := func(b *testing.B) sandbox.Provider {
		return benchBwrapWith(b, bwrap.Config{AgentBinary: testenv.EngineBinary(b)})
	}
	for _, tc := range []struct {
		name string
		p    func(b *testing.B) sandbox.Provider
		caps sandbox.Caps
	}{
		{"bwrap", bwrapProvider, sandbox.Caps{}},
		// The product's default caps (FLOWBOX_CAP_*_SANDBOXES): every new
		// sandbox is counted against them.
		{"bwrap-caps", bwrapProvider, sandbox.Caps{Global: 200, PerUser: 5, PerGroup: 20}},
		{"docker", func(b *testing.B) sandbox.Provider {
			return dockertest.Provider(b, docker.Config{Image: dockertest.Image, Shell: "/bin/sh", AgentBinary: dockertest.AgentBinary(b)})
		}, sandbox.Caps{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := tc.p(b)
			ctx := context.Background()
			// The store as the engine builds it: with the activity index in
			// Redis (here the embedded one, the product's default).
			db := mongotest.DB(b)
			rdb := redis.NewClient(&redis.Options{Addr: redistest.Embedded(b)})
			b.Cleanup(func() { rdb.Close() })
			store, err := mongostore.New(ctx, db, nil, mongostore.WithActivity(activity.New(rdb, db.Name())))
			if err != nil {
				b.Fatal(err)
			}
			mongotest.IndexIDs(b) // as the engine has it once its collections exist
			ws, err := workspace.New(workspace.Config{Root: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			skills := sandbox.Mount{Source: b.TempDir(), Target: sandbox.SkillsDir, ReadOnly: true}
			manager := func(size int) *sandbox.Manager {
				m, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Caps: tc.caps,
					MountsFor: func(ctx context.Context, scope sandbox.Scope) ([]sandbox.Mount, error) {
						m, err := ws.Mounts(ctx, scope)
						return append(m, skills), err
					},
					Pool: sandbox.PoolConfig{Size: size, Store: store, Workspace: ws, SharedMounts: []sandbox.Mount{skills}}})
				if err != nil {
					b.Fatal(err)
				}
				return m
			}
			cold, warm := manager(0), manager(1)
			b.Cleanup(func() { _, _ = warm.DrainPool(context.Background()) })
			var made []func()
			b.Cleanup(func() {
				for _, del := range made {
					del()
				}
			})
			// echo returns the time to its first output in s's sandbox.
			echo := func(m *sandbox.Manager, s sandbox.Scope) time.Duration {
				out := make(chan time.Time, 1)
				start := time.Now()
				res, err := m.Exec(ctx, s, sandbox.ExecRequest{Command: "echo hi", Timeout: 30 * time.Second,
					OnOutput: func(sandbox.Stream, []byte) {
						select {
						case out <- time.Now():
						default:
						}
					}})
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("command: %+v %v", res, err)
				}
				return (<-out).Sub(start)
			}
			var second []time.Duration
			first := func(m *sandbox.Manager, i int, name string) time.Duration {
				// A user each: the sandboxes stay running, under the caps.
				s := sandbox.Scope{AppID: "bench", UserID: fmt.Sprintf("u-%s-%d", name, i), ChatID: fmt.Sprintf("%s-%d-%d", name, i, time.Now().UnixNano())}
				made = append(made, func() { _ = m.Delete(context.Background(), s.SandboxID()) })
				d := echo(m, s)
				if m == warm {
					// The same command in the same sandbox once it runs:
					// what the pool's first command is compared with.
					second = append(second, echo(m, s))
				}
				return d
			}
			var coldT, warmT []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if _, err := warm.RefillPool(ctx); err != nil {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond) // the member's agent settles, as it has long done in use
				b.StartTimer()
				warmT = append(warmT, first(warm, i, "warm"))
				coldT = append(coldT, first(cold, i, "cold"))
			}
			b.StopTimer()
			s, _, _ := warm.PoolStats(ctx)
			if s.Claims != uint64(b.N) {
				b.Fatalf("%d of %d first commands adopted a member (%+v)", s.Claims, b.N, s)
			}
			p50 := func(d []time.Duration) float64 {
				slices.Sort(d)
				return float64(d[len(d)/2].Microseconds()) / 1000
			}
			pc, pw := p50(coldT), p50(warmT)
			b.ReportMetric(pc, "cold-p50-ms")
			b.ReportMetric(pw, "pool-p50-ms")
			b.ReportMetric(pw/pc, "pool/cold")
			b.ReportMetric(p50(second), "running-p50-ms")
			b.ReportMetric(s.RefillSeconds/float64(s.Refills)*1000, "refill-mean-ms")
		})
	}
}

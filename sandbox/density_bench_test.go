package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
)

// Settings of BenchmarkDensity.
const (
	densityBwrapEnv  = "FLOWBOX_DENSITY_BWRAP"  // running bwrap sandboxes, default 20 (5 with -short)
	densityDockerEnv = "FLOWBOX_DENSITY_DOCKER" // running Docker sandboxes, default 10 (3 with -short)
	densityProbes    = 60                       // commands timed for each p50
	densityWorkers   = 4                        // sandboxes brought up at once
)

// BenchmarkDensity measures what a running sandbox costs, with the command
// agent in it (a bwrap namespace; a Docker container), through the
// manager as the engine runs it: it brings up N sandboxes, each started by
// a first command, and reports
//
//   - bringup-s: the time to bring all N up (densityWorkers at a time),
//     until each has its agent listening;
//   - engine-KiB/sandbox: the growth of this process's resident memory
//     (the engine's side: manager, provider, embedded database) per
//     sandbox, and engine-heap-KiB/sandbox the Go heap's;
//   - sandbox-MiB/sandbox: the proportional set size (PSS: shared pages
//     split among their users) of each sandbox's processes, with
//     Docker's shim for its container;
//   - idle-p50-ms, loaded-p50-ms and loaded/idle: a command's p50 in one
//     sandbox before the others were brought up, and across all N after;
//     loaded-one-p50-ms, in the first sandbox again once all N run.
//
// Run it once, with N set:
//
//	FLOWBOX_DENSITY_BWRAP=500 FLOWBOX_DENSITY_DOCKER=200 go test -run '^$' -bench Density -benchtime 1x -timeout 60m ./sandbox/
func BenchmarkDensity(b *testing.B) {
	b.Run("bwrap", func(b *testing.B) {
		root := b.TempDir()
		p := benchBwrapWith(b, bwrap.Config{Root: root, AgentBinary: testenv.EngineBinary(b)})
		// The namespace's agent listens once it started, after the
		// sandbox's first command.
		ready := func(id string) bool {
			_, err := os.Stat(filepath.Join(root, id, "run", "agent.sock"))
			return err == nil
		}
		pids := func(id string) []int {
			ps, err := p.Processes(id)
			if err != nil {
				b.Fatalf("the processes of %s: %v", id, err)
			}
			return ps
		}
		density(b, benchManager(b, p), densityN(b, densityBwrapEnv, 20, 5), ready, pids)
	})
	b.Run("docker", func(b *testing.B) {
		p := dockertest.Provider(b, docker.Config{Image: dockertest.Image, Shell: "/bin/sh", AgentBinary: dockertest.AgentBinary(b)})
		cli := dockertest.Client(b)
		// The container's processes (Docker's init and the agent below
		// it), and their parent, the runtime's shim, which exists for
		// this container only.
		pids := func(id string) []int {
			res, err := cli.ContainerInspect(context.Background(), docker.ContainerName(id), client.ContainerInspectOptions{})
			if err != nil || res.Container.State == nil || res.Container.State.Pid == 0 {
				b.Fatalf("inspect %s: %v", id, err)
			}
			init := res.Container.State.Pid
			return append(descendants(init), init, parentOf(init))
		}
		// Docker's provider waits for the agent on the first command.
		ready := func(string) bool { return true }
		density(b, benchManager(b, p), densityN(b, densityDockerEnv, 10, 3), ready, pids)
	})
}

func densityN(b *testing.B, env string, def, short int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", env, v)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return def
}

func density(b *testing.B, m *sandbox.Manager, n int, ready func(id string) bool, pids func(id string) []int) {
	ctx := context.Background()
	scopes := make([]sandbox.Scope, n)
	stamp := time.Now().UnixNano()
	for i := range scopes {
		scopes[i] = sandbox.Scope{AppID: "density", UserID: "u", ChatID: fmt.Sprintf("d-%d-%d", stamp, i)}
	}
	var made sync.Map
	b.Cleanup(func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, densityWorkers)
		made.Range(func(k, _ any) bool {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_ = m.Delete(context.Background(), k.(string))
			})
			return true
		})
		wg.Wait()
	})
	exec := func(s sandbox.Scope) time.Duration {
		start := time.Now()
		res, err := m.Exec(ctx, s, sandbox.ExecRequest{Command: "true", Timeout: 30 * time.Second})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec in %s: %+v %v", s.ChatID, res, err)
		}
		made.Store(s.SandboxID(), true)
		return time.Since(start)
	}
	waitReady := func(id string) {
		deadline := time.Now().Add(time.Minute)
		for !ready(id) {
			if time.Now().After(deadline) {
				b.Fatalf("sandbox %s: its agent did not listen within a minute", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p50 := func(scopes []sandbox.Scope) float64 {
		d := make([]time.Duration, densityProbes)
		for i := range d {
			d[i] = exec(scopes[i%len(scopes)])
		}
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}

	// One sandbox on an otherwise idle machine (as far as this run goes).
	exec(scopes[0])
	waitReady(scopes[0].SandboxID())
	exec(scopes[0])
	idle := p50(scopes[:1])

	rssBefore, heapBefore := engineMemory()
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	next.Store(1)
	var wg sync.WaitGroup
	for range densityWorkers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				exec(scopes[i])
				waitReady(scopes[i].SandboxID())
			}
		})
	}
	wg.Wait()
	bringup := time.Since(start)
	b.StopTimer()
	rssAfter, heapAfter := engineMemory()

	var pss int64
	for _, s := range scopes {
		for _, pid := range pids(s.SandboxID()) {
			pss += pssOf(b, pid)
		}
	}
	loaded := p50(scopes)
	// The first sandbox again, command after command: what N running
	// sandboxes cost a sandbox kept busy, apart from the probes above,
	// each of which wakes a sandbox that sat unused since it came up.
	loadedOne := p50(scopes[:1])

	b.ReportMetric(float64(n), "sandboxes")
	b.ReportMetric(bringup.Seconds(), "bringup-s")
	b.ReportMetric(float64(rssAfter-rssBefore)/1024/float64(n-1), "engine-KiB/sandbox")
	b.ReportMetric(float64(heapAfter-heapBefore)/1024/float64(n-1), "engine-heap-KiB/sandbox")
	b.ReportMetric(float64(pss)/(1<<20)/float64(n), "sandbox-MiB/sandbox")
	b.ReportMetric(idle, "idle-p50-ms")
	b.ReportMetric(loaded, "loaded-p50-ms")
	b.ReportMetric(loaded/idle, "loaded/idle")
	b.ReportMetric(loadedOne, "loaded-one-p50-ms")
}

// engineMemory is this process's resident set and Go heap in use, after a
// collection.
func engineMemory() (rss, heap int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	statm, err := os.ReadFile("/proc/self/statm")
	if err == nil {
		if f := strings.Fields(string(statm)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return rss, int64(ms.HeapInuse)
}

// pssOf is a process's proportional set size in bytes (0 when it is
// gone).
func pssOf(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "Pss:" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				b.Fatalf("smaps_rollup of %d: %q", pid, sc.Text())
			}
			return kib << 10
		}
	}
	return 0
}

// parentOf is a process's parent (0 when it is gone).
func parentOf(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// descendants are a process's children, theirs, and so on.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
				out = append(out, descendants(child)...)
			}
		}
	}
	return out
}

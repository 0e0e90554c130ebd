package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The agent reports the counters of its cgroups that moved while a
// command ran, in either layout. The counters here are files the command
// itself bumps, standing for the kernel; the conformance suite of the
// Docker provider (sandbox/docker) has real memory hogs and fork bombs.
func TestReportsExhaustion(t *testing.T) {
	layouts := []struct {
		name      string
		oom, pids string // the counters' files, relative to the cgroup root
	}{
		{"cgroup v1", "memory/memory.oom_control", "pids/pids.events"},
		{"cgroup v2", "memory.events", "pids.events"},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			root := t.TempDir()
			oom, pids := filepath.Join(root, l.oom), filepath.Join(root, l.pids)
			for _, f := range []string{oom, pids} {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			set := func(oomKills, pidsMax int) string {
				return fmt.Sprintf("printf 'oom_kill_disable 0\\nunder_oom 0\\noom_kill %d\\n' >%s; printf 'max %d\\n' >%s",
					oomKills, oom, pidsMax, pids)
			}
			e := startAgentWith(t, Config{Cgroup: root})
			e.run(t, set(2, 5), 10*time.Second)
			tests := []struct {
				name, command      string
				oomKilled, pidsHit bool
			}{
				{"nothing moved", "true", false, false},
				{"an OOM kill", set(3, 5), true, false},
				{"a refused fork", set(3, 6), false, true},
				{"both", set(4, 9), true, true},
				{"the counters vanish", "rm " + oom + " " + pids, false, false},
				{"the counters appear", set(1, 1), false, false},
			}
			for _, tc := range tests {
				res, out := e.run(t, tc.command, 10*time.Second)
				if res.OOMKilled != tc.oomKilled || res.PidsLimited != tc.pidsHit || res.ExitCode != 0 {
					t.Errorf("%s: %+v (stderr %q); want oomKilled=%v pidsLimited=%v", tc.name, res, out.stderr.String(), tc.oomKilled, tc.pidsHit)
				}
			}
		})
	}
}

func TestExitFrameFlags(t *testing.T) {
	for _, r := range []Result{
		{ExitCode: 137, OOMKilled: true},
		{ExitCode: 124, TimedOut: true, PidsLimited: true},
		{ExitCode: -1, Cancelled: true, OOMKilled: true, PidsLimited: true},
		{},
	} {
		got, err := parseExit(exitPayload(r))
		if err != nil || got != r {
			t.Errorf("parseExit(exitPayload(%+v)) = %+v, %v", r, got, err)
		}
	}
}

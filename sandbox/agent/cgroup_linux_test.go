package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestAttackAgentOutsideItsCgroups is finding 14: a namespace whose
// engine died before it joined the sandbox's cgroups ran its agent, and
// every command after, with no limit. The agent now checks where it is and
// refuses to serve outside its groups.
func TestAttackAgentOutsideItsCgroups(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	var mine string
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			mine = parts[2]
		}
	}
	if mine == "" || mine == "/" {
		t.Skipf("this process is in no memory cgroup of its own (%q)", mine)
	}
	if err := CheckCgroups(mine, []string{"memory"}); err != nil {
		t.Fatalf("CheckCgroups(%q) in that very group: %v", mine, err)
	}
	err = CheckCgroups("flowbox/0123456789abcdef", []string{"memory"})
	if err == nil || !strings.Contains(err.Error(), "serves no command") {
		t.Fatalf("CheckCgroups outside the group = %v, want a refusal", err)
	}
	dir := t.TempDir()
	err = Main(context.Background(), []string{"-socket", filepath.Join(dir, "s"), "-cgroup", "flowbox/0123456789abcdef"})
	if err == nil || !strings.Contains(err.Error(), "serves no command") {
		t.Fatalf("the agent outside its cgroups started: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); err == nil {
		t.Fatal("the agent outside its cgroups listens")
	}
}

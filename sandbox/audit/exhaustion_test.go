package audit_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// TestAuditExhaustion: a real memory hog and a real fork bomb, run by a
// manager on bwrap with the audit in its chain, leave records that say
// oomKilled and pidsLimited and are counted in the metrics; a plain
// command's record says neither.
func TestAuditExhaustion(t *testing.T) {
	t.Parallel()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	if !p.Capabilities().ReportsExhaustion {
		t.Fatal("the bwrap provider declares no ReportsExhaustion")
	}
	store, err := mongostore.New(context.Background(), mongotest.DB(t), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	metrics := audit.NewMetrics()
	m, err := sandbox.New(sandbox.Config{
		Provider: p, Store: store, Limits: sandbox.Limits{MemoryMiB: 64, Pids: 64},
		Middleware: []sandbox.Middleware{audit.Middleware(audit.Config{Records: rec, Metrics: metrics, Instance: "test"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	scope := sandbox.Scope{AppID: "app-audit", UserID: "user-1", ChatID: "chat-exhaustion-" + time.Now().Format("150405.000000")}
	t.Cleanup(func() { _ = m.Delete(context.Background(), scope.SandboxID()) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tests := []struct {
		name, command string
		want          string // what the record must say: "oom", "pids" or "neither"
	}{
		{"plain", "echo hi", "neither"},
		{"memory hog", "x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo ${#x}", "oom"},
		// Its shells may also run out of memory: only pids is checked.
		{"fork bomb", "bomb() { bomb | bomb & }; bomb; sleep 3", "pids"},
	}
	var ooms, pids float64
	for i, tc := range tests {
		res, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: tc.command, Timeout: 30 * time.Second, Actor: sandbox.Actor{Kind: sandbox.ActorAgent}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rec.mu.Lock()
		n := len(rec.recs)
		var r audit.Record
		if n == i+1 {
			r = rec.recs[i]
		}
		rec.mu.Unlock()
		if n != i+1 {
			t.Fatalf("%s: %d records after %d commands", tc.name, n, i+1)
		}
		if r.Command != tc.command || r.OOMKilled != res.OOMKilled || r.PidsLimited != res.PidsLimited {
			t.Errorf("%s: record %q oomKilled=%v pidsLimited=%v; the result says %v, %v", tc.name, r.Command, r.OOMKilled, r.PidsLimited, res.OOMKilled, res.PidsLimited)
		}
		if r.OOMKilled {
			ooms++
		}
		if r.PidsLimited {
			pids++
		}
		switch {
		case tc.want == "neither" && (r.OOMKilled || r.PidsLimited),
			tc.want == "oom" && !r.OOMKilled,
			tc.want == "pids" && !r.PidsLimited:
			t.Errorf("%s: record oomKilled=%v pidsLimited=%v (exit %d, status %s), want %s", tc.name, r.OOMKilled, r.PidsLimited, r.ExitCode, r.Status, tc.want)
		}
	}
	if got := metrics.OOMKills(); got != ooms {
		t.Errorf("flowbox_sandbox_oom_kills_total = %v, want %v (the records that say oomKilled)", got, ooms)
	}
	if got := metrics.PidsLimitHits(); got != pids {
		t.Errorf("flowbox_sandbox_pids_limit_hits_total = %v, want %v (the records that say pidsLimited)", got, pids)
	}
}

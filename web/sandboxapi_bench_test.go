package web_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
)

// BenchmarkSandboxAPIExecute measures what the service API adds to a
// command: the same command in the same running bwrap sandbox, through
// the manager (the baseline: what a chat's tool call costs below the
// node) and through POST /api/sandbox/v1/sessions/{id}/execute with a
// personal key (authentication, the session's read, the registry, JSON
// both ways, loopback HTTP). The two alternate, so that both see the
// same machine; each reports its p50.
//
//	go test -run '^$' -bench SandboxAPIExecute -benchtime 300x ./web/
func BenchmarkSandboxAPIExecute(b *testing.B) {
	env := enginetest.Start(b, enginetest.Options{})
	ctx := context.Background()
	user := env.CreateUser(b, "bench-api", auth.RoleUser)
	c := env.Bearer(env.APIKey(b, user))
	var s struct{ ID string }
	if r := c.Do(b, "POST", "/api/sandbox/v1/sessions", map[string]any{"start": true}); r.Status != http.StatusCreated {
		b.Fatalf("create: %d %s", r.Status, r.Body)
	} else {
		r.JSON(b, &s)
	}
	scope := sessions.Session{ID: s.ID, OwnerID: user}.Scope()
	m := env.Engine.Services.Manager
	body := map[string]any{"tool": "shell:exec", "params": map[string]any{"command": "true"}}
	var direct, api []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := m.Exec(ctx, scope, sandbox.ExecRequest{Command: "true", Timeout: time.Minute}); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(start))
		start = time.Now()
		if r := c.Do(b, "POST", "/api/sandbox/v1/sessions/"+s.ID+"/execute", body); r.Status != http.StatusOK {
			b.Fatalf("execute: %d %s", r.Status, r.Body)
		}
		api = append(api, time.Since(start))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	md, ma := p50(direct), p50(api)
	b.ReportMetric(md, "manager-p50-ms")
	b.ReportMetric(ma, "api-p50-ms")
	b.ReportMetric(ma-md, "added-p50-ms")
}

package web_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
)

// TestSessionMetrics (L4): a session's sandbox's metrics in the service
// API follow a memory hog; before its first call, and for another caller,
// there are none.
func TestSessionMetrics(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	c := env.Bearer(env.APIKey(t, env.CreateUser(t, "mt-carol", auth.RoleUser)))
	b := env.Bearer(env.APIKey(t, env.CreateUser(t, "mt-bob", auth.RoleUser)))
	var s sessionView
	expect(t, c, "POST", "/api/sandbox/v1/sessions", map[string]any{"limits": map[string]any{"memoryMiB": 256}}, http.StatusCreated).JSON(t, &s)
	metrics := "/api/sandbox/v1/sessions/" + s.ID + "/metrics"
	wantError(t, c.Do(t, "GET", metrics, nil), http.StatusConflict, "not_running")

	if res := execute(t, c, s.ID, "shell:process", map[string]any{"action": "start",
		"command": `x=$(head -c 70000000 /dev/zero | tr '\0' a); echo held; sleep 300`}); res.IsError {
		t.Fatalf("start the hog: %+v", res)
	}
	var got struct {
		ID      string
		Metrics sandbox.Metrics
	}
	waitFor(t, "the hog in the session's metrics", func() (bool, string) {
		expect(t, c, "GET", metrics, nil, 200).JSON(t, &got)
		return got.Metrics.MemoryBytes > 60_000_000, fmt.Sprintf("%+v", got.Metrics)
	})
	if got.ID != s.ID || got.Metrics.MemoryLimitBytes != 256<<20 || got.Metrics.Processes < 2 || got.Metrics.SampledAt.IsZero() {
		t.Errorf("metrics %+v", got)
	}
	wantError(t, b.Do(t, "GET", metrics, nil), http.StatusNotFound, "not_found")
}

// TestSandboxUsage (L4): while someone looks, the running sandboxes'
// use is sampled: the admins' API and the Prometheus export show a
// memory hog within a few seconds (the export as sums and the top
// sandboxes, never a series per sandbox beyond those); nobody else reads
// the admins' API.
func TestSandboxUsage(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	owner := env.CreateUser(t, "us-carol", auth.RoleUser)
	c := env.Bearer(env.APIKey(t, owner))
	var s sessionView
	expect(t, c, "POST", "/api/sandbox/v1/sessions", map[string]any{}, http.StatusCreated).JSON(t, &s)
	if res := execute(t, c, s.ID, "shell:process", map[string]any{"action": "start",
		"command": `x=$(head -c 70000000 /dev/zero | tr '\0' a); echo held; sleep 300`}); res.IsError {
		t.Fatalf("start the hog: %+v", res)
	}
	id := sessions.Session{ID: s.ID, OwnerID: owner}.Scope().SandboxID()
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	waitFor(t, "the hog on the admins' API", func() (bool, string) {
		var got struct{ Metrics map[string]sandbox.Metrics }
		expect(t, admin, "GET", "/admin/api/sandboxes/metrics", nil, 200).JSON(t, &got)
		return got.Metrics[id].MemoryBytes > 60_000_000 && got.Metrics[id].Processes >= 2, fmt.Sprintf("%+v", got.Metrics)
	})
	waitFor(t, "the hog in the Prometheus export", func() (bool, string) {
		text := string(expect(t, env.Anonymous(), "GET", "/metrics", nil, 200).Body)
		var sampled, top float64
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, "flowbox_sandboxes_sampled "); ok {
				sampled, _ = strconv.ParseFloat(v, 64)
			}
			if strings.HasPrefix(line, "flowbox_sandbox_memory_bytes{") && strings.Contains(line, `sandbox_id="`+id+`"`) {
				top, _ = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			}
		}
		return sampled >= 1 && top > 60_000_000, fmt.Sprintf("sampled %v, the hog's series %v", sampled, top)
	})
	expect(t, c, "GET", "/admin/api/sandboxes/metrics", nil, http.StatusForbidden)
}

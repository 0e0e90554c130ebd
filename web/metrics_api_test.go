package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
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

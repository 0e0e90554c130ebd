package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/workers"
)

// TestAppIdleTimeout (R4): an app's builder sets its chats' idle timeout
// within the engine's bound; the stop scan stops its sandboxes after that
// long unused, and another app's after the engine's 5 minutes.
func TestAppIdleTimeout(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_APP_IDLE_MAX_MINUTES": "30"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	quick, plain := newApp(t, alice, "quick"), newApp(t, alice, "plain")
	for _, bad := range []int{-1, 31} {
		expect(t, alice, "PATCH", "/api/apps/"+quick, map[string]any{"idleMinutes": bad}, 400)
	}
	var patched struct {
		IdleMinutes int `json:"idleMinutes"`
	}
	expect(t, alice, "PATCH", "/api/apps/"+quick, map[string]any{"idleMinutes": 2}, 200).JSON(t, &patched)
	if patched.IdleMinutes != 2 {
		t.Fatalf("the app's idle timeout after the PATCH: %d, want 2", patched.IdleMinutes)
	}
	// A PUT that leaves it out keeps it.
	var app struct {
		Name   string         `json:"name"`
		Public bool           `json:"public"`
		Graph  map[string]any `json:"graph"`
	}
	expect(t, alice, "GET", "/api/apps/"+quick, nil, 200).JSON(t, &app)
	expect(t, alice, "PUT", "/api/apps/"+quick, map[string]any{"name": app.Name, "public": app.Public, "graph": app.Graph}, 200).JSON(t, &patched)
	if patched.IdleMinutes != 2 {
		t.Errorf("after a PUT without it: %d, want 2", patched.IdleMinutes)
	}

	ctx := context.Background()
	svc := env.Engine.Services
	var scopes []sandbox.Scope
	for _, appID := range []string{quick, plain} {
		shell(t, alice, appID, "", "idle", "echo hi")
		scope := sandbox.Scope{AppID: appID, UserID: "u:alice", ChatID: "idle"}
		inst, err := svc.Manager.Lookup(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		// Three minutes unused: past the app's 2, within the engine's 5.
		svc.Store.ForgetActivity(ctx, inst.Provider, inst.SandboxID)
		if err := svc.Store.Touch(ctx, inst, time.Now().Add(-3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		scopes = append(scopes, scope)
	}
	if err := env.Engine.Workers.HandleStopIdle(ctx, workers.NewStopIdleTask()); err != nil {
		t.Fatal(err)
	}
	for i, want := range []sandbox.Status{sandbox.StatusStopped, sandbox.StatusRunning} {
		inst, err := svc.Manager.Lookup(ctx, scopes[i])
		if err != nil || inst.Status != want {
			t.Errorf("app %s's sandbox after 3 idle minutes: %q (%v), want %q", scopes[i].AppID, inst.Status, err, want)
		}
	}
}

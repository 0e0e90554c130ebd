package web_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestWarmPoolThroughChat: with a warm pool, the engine's workers fill it
// at start; a new chat's first command runs in an adopted member that is
// the chat's sandbox (its upload, its files in the file browser); the
// admin page and the metrics show the pool, the claim and the refill.
func TestWarmPoolThroughChat(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_SANDBOX_POOL_SIZE": "2"}, Workers: true})
	alice := env.CreateUser(t, "alice", auth.RoleUser)
	owner := env.Login(t, "alice", enginetest.Password("alice"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	adminPage := func(want string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			page := expect(t, admin, "GET", "/admin", nil, 200)
			_, data := readAppPage[adminPageData](t, page.Body)
			got := "no pool shown"
			if p := data.Pool; p != nil && p.On {
				got = fmt.Sprintf("%d/%d", p.Stats.Ready, p.Stats.Claims)
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the admin page's warm pool (ready/claims) is %s; want %s", got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	adminPage("2/0")

	app := newApp(t, owner, "pooled")
	if r := upload(t, owner, "/api/uploads/c-pool?appId="+app, part{name: "data.csv", content: []byte("x,y\n")}); r.Status != 200 && r.Status != 201 {
		t.Fatalf("upload before the first command: %d %s", r.Status, r.Body)
	}
	_, answer := sendTurn(t, owner, "/api/v1/chat/completions", map[string]any{"appId": app, "chatId": "c-pool",
		"messages": message("$ cat uploads/data.csv && echo made > made.txt && pwd")}, 200)
	if !strings.Contains(answer, "x,y") || !strings.Contains(answer, "/workspace") {
		t.Fatalf("the first command's answer: %q", answer)
	}
	// Claimed, then refilled by the task the adoption queued.
	adminPage("2/1")
	read := map[string]any{"action": "read", "appId": app, "chatId": "c-pool", "path": "made.txt"}
	if resp := expect(t, owner, "POST", "/api/core/ai/sandbox/file", read, 200); !strings.Contains(string(resp.Body), "made") {
		t.Errorf("the file browser does not show the adopted sandbox's file: %s", resp.Body)
	}
	inst, err := env.Engine.Services.Manager.Lookup(t.Context(), sandbox.Scope{AppID: app, UserID: alice, ChatID: "c-pool"})
	if err != nil || inst.Status != sandbox.StatusRunning {
		t.Errorf("the chat's record: %+v, %v", inst, err)
	}
	metrics := string(expect(t, admin, "GET", "/metrics", nil, 200).Body)
	for _, want := range []string{`flowbox_sandbox_pool_claims_total 1`, `flowbox_sandbox_pool_members{state="target"} 2`,
		`flowbox_sandbox_pool_members{state="ready"} 2`, `flowbox_sandbox_pool_misses_total{reason="empty"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !regexp.MustCompile(`flowbox_sandbox_pool_refills_total [3-9]`).MatchString(metrics) {
		t.Errorf("metrics do not count the three refills")
	}
}

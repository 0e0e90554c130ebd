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
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
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

	adminPage := func(want string) { t.Helper(); poolShown(t, admin, want) }
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

// poolShown waits for the admin page to show the warm pool's ready
// members and claims as want ("2/1").
func poolShown(t *testing.T, admin *enginetest.Client, want string) {
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

// TestWarmPoolWithCheckpoints: where the engine keeps checkpoints, the
// warm pool's members have their files in the chats' pool. A new chat
// without files adopts a member, and what is uploaded to it afterwards
// is in its sandbox and comes back with a rewind; a chat that has files
// before its first command cannot take a member's (two subvolumes): its
// sandbox is created, no member is claimed, and the miss is counted. On
// bwrap and on Docker, whose members' containers bind their directories
// once, when they start.
func TestWarmPoolWithCheckpoints(t *testing.T) {
	t.Parallel()
	t.Run("bwrap", func(t *testing.T) {
		t.Parallel()
		testWarmPoolWithCheckpoints(t, map[string]string{})
	})
	t.Run("docker", func(t *testing.T) {
		t.Parallel()
		testWarmPoolWithCheckpoints(t, dockerEnv(t, ""))
	})
}

func testWarmPoolWithCheckpoints(t *testing.T, cfg map[string]string) {
	cfg["FLOWBOX_SANDBOX_POOL_SIZE"], cfg["FLOWBOX_CHECKPOINTS"], cfg["FLOWBOX_CHECKPOINT_POOL"] = "2", "on", checkpointtest.Pool(t)
	env := enginetest.Start(t, enginetest.Options{Env: cfg, Workers: true})
	env.CreateUser(t, "alice", auth.RoleUser)
	owner := env.Login(t, "alice", enginetest.Password("alice"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	poolShown(t, admin, "2/0")
	app := newApp(t, owner, "pooled")

	// Files first: a sandbox of its own.
	uploadVia(t, owner, app, "c-files", "", "data.csv", "x,y\n")
	if _, answer := sendTurn(t, owner, "/api/v1/chat/completions", map[string]any{"appId": app, "chatId": "c-files",
		"messages": message("$ cat uploads/data.csv")}, 200); !strings.Contains(answer, "x,y") {
		t.Fatalf("the first command of a chat with an upload: %q", answer)
	}
	poolShown(t, admin, "2/0")
	if metrics := string(expect(t, admin, "GET", "/metrics", nil, 200).Body); !strings.Contains(metrics, `flowbox_sandbox_pool_misses_total{reason="files"} 1`) {
		t.Errorf("metrics do not count the chat with files as a miss")
	}

	// No files: a member, whose files become the chat's.
	say := func(cmd string) string {
		t.Helper()
		_, answer := sendTurn(t, owner, "/api/v1/chat/completions", map[string]any{"appId": app, "chatId": "c-pool", "messages": message("$ " + cmd)}, 200)
		return answer
	}
	say("echo made > made.txt")
	poolShown(t, admin, "2/1")
	uploadVia(t, owner, app, "c-pool", "", "later.txt", "later")
	if got := say("cat uploads/later.txt made.txt"); !strings.Contains(got, "later") || !strings.Contains(got, "made") {
		t.Fatalf("the adopted sandbox after an upload: %q", got)
	}
	say("rm uploads/later.txt made.txt")
	var out map[string]any
	expect(t, owner, "POST", "/api/core/chat/item/delete", map[string]any{"appId": app, "chatId": "c-pool", "contentId": "c-pool/" + pad(4)}, 200).JSON(t, &out)
	if out["sandbox"] != "restored" {
		t.Errorf("the rewind answered %v", out)
	}
	if got := say("cat uploads/later.txt made.txt"); !strings.Contains(got, "later") || !strings.Contains(got, "made") {
		t.Errorf("the adopted sandbox after the rewind: %q", got)
	}
}

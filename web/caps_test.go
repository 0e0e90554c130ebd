package web_test

// The caps on running sandboxes and on chat runs in progress, through the
// product as engine serve builds it: many chats of one user at once, the
// refusals the user and the model read, and the admin page's Limits.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// capRow reads one cap's row of the admin page: its limit and use.
func capRow(t *testing.T, admin *enginetest.Client, cap string) (limit, use string) {
	t.Helper()
	resp := admin.Do(t, "GET", "/admin", nil)
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /admin: %d %s", resp.Status, clipped(resp.Body))
	}
	_, data := readAppPage[adminPageData](t, resp.Body)
	if data.Limits == nil {
		t.Fatalf("the admin page shows no limits: %s", clipped(resp.Body))
	}
	for _, c := range data.Limits.Caps {
		if c.Key == cap {
			return strconv.Itoa(c.Limit), strconv.Itoa(c.Use)
		}
	}
	t.Fatalf("the admin page has no row for the cap %s: %+v", cap, data.Limits.Caps)
	return "", ""
}

// TestCapUserSandboxes: with a cap of 3 running sandboxes per user, 20
// first commands of one user, in 20 new chats at once, never have more
// than 3 sandboxes running: a new one either stops one of the user's
// idle sandboxes (its command done) or, when all 3 run commands, is
// answered at once with the refusal the model read, naming the cap, and
// leaves no sandbox behind. The admin page shows the cap and the use.
func TestCapUserSandboxes(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CAP_USER_SANDBOXES": "3"}})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	const n, limit = 20, 3

	type answer struct {
		chat, text string
		err        error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := map[string]any{"appId": apps.DemoAppID, "messages": []map[string]string{{"role": "user", "content": "$ echo hi"}}}
			resp, err := alice.Send("POST", "/api/v1/chat/completions", body)
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var got struct {
				ID      string `json:"id"`
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &got) != nil || len(got.Choices) != 1 {
				answers[i].err = fmt.Errorf("%d %s", resp.StatusCode, clipped(raw))
				return
			}
			answers[i] = answer{chat: got.ID, text: got.Choices[0].Message.Content}
		})
	}
	wg.Wait()

	refusal := fmt.Sprintf("refused: you already have %d running sandboxes, all of them running commands, and the limit per user is %d", limit, limit)
	ran, refused := 0, map[string]bool{}
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("turn %d: %v", i, a.err)
		case strings.Contains(a.text, "`echo hi` succeeded") && strings.Contains(a.text, "hi"):
			ran++
		case strings.Contains(a.text, "could not run") && strings.Contains(a.text, refusal) && strings.Contains(a.text, "delete chats you no longer need"):
			refused[a.chat] = true
		default:
			t.Errorf("turn %d answered %q; want the command's output or the refusal %q", i, a.text, refusal)
		}
	}
	if ran < limit || ran+len(refused) != n {
		t.Fatalf("%d commands ran and %d were refused; want at least %d run, and every one answered", ran, len(refused), limit)
	}

	// Exactly 3 sandboxes running; the refused chats have none.
	ctx := context.Background()
	svc := env.Engine.Services
	runningOf := func() int {
		t.Helper()
		records, err := svc.Store.ByProvider(ctx, svc.Provider.Name())
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, r := range records {
			if r.UserID == aliceID && r.Status == sandbox.StatusRunning {
				running++
			}
			if refused[r.ChatID] {
				t.Errorf("refused chat %s has a sandbox record (%s)", r.ChatID, r.Status)
			}
		}
		return running
	}
	if got := runningOf(); got != limit {
		t.Fatalf("alice has %d running sandboxes, want %d", got, limit)
	}

	// Opening a refused chat's files starts its sandbox now that alice's
	// are idle: one of them is stopped for it, and 3 still run.
	for chat := range refused {
		alice.Do(t, "POST", "/api/core/ai/sandbox/file", map[string]any{"appId": apps.DemoAppID, "chatId": chat, "action": "list", "path": "/workspace"})
		delete(refused, chat)
		break
	}
	if got := runningOf(); got != limit {
		t.Fatalf("after the files request alice has %d running sandboxes, want %d", got, limit)
	}

	// The admin page shows the cap and alice at it.
	if l, u := capRow(t, admin, "user-sandboxes"); l != "3" || u != "3" {
		t.Errorf("admin page: user sandboxes cap %s, use %s; want 3 and 3", l, u)
	}
	if l, u := capRow(t, admin, "sandboxes"); l != "0" || u != "3" {
		t.Errorf("admin page: sandboxes cap %s, use %s; want 0 (none) and 3", l, u)
	}
	_, data := readAppPage[adminPageData](t, admin.Do(t, "GET", "/admin", nil).Body)
	if !slices.Contains(data.Limits.Busiest, adminUserUse{User: aliceID, Sandboxes: 3}) ||
		!slices.ContainsFunc(data.Limits.Caps, func(c adminCap) bool { return c.Setting == "FLOWBOX_CAP_USER_SANDBOXES" }) {
		t.Errorf("the admin page does not list alice with 3 running sandboxes, or names no setting: %+v", *data.Limits)
	}
}

// TestCapUserRuns: with a cap of 2 chat runs in progress per user, 3 more
// requests while 2 runs go on are refused at once with 429, Retry-After
// and words naming the cap; other users are not held back; once the runs
// end, the user runs again. Runs are known to be in progress by the
// toolCall event of their stream, not by waiting.
func TestCapUserRuns(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CAP_USER_RUNS": "2"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	const limit, extra = 2, 3

	// Commands that outlast the test: the runs end when their clients go.
	long := strings.Repeat("$ sleep 25\n", 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var holding sync.WaitGroup
	for range limit {
		body := `{"appId":"` + apps.DemoAppID + `","stream":true,"detail":true,"messages":[{"role":"user","content":` + jsonString(long) + `}]}`
		resp := chatAPIPost(t, ctx, alice, body)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("a run under the cap: %d %s", resp.StatusCode, b)
		}
		chatAPIReadSSE(t, resp.Body, func(ev sseEvent) bool { return ev.name != "toolCall" })
		holding.Go(func() { _, _ = io.Copy(io.Discard, resp.Body) })
	}
	if l, u := capRow(t, admin, "user-runs"); l != "2" || u != "2" {
		t.Errorf("admin page: user runs cap %s, use %s; want 2 and 2", l, u)
	}

	want := fmt.Sprintf("refused: you already have %d chat runs in progress and the limit per user is %d", limit, limit)
	var wg sync.WaitGroup
	for range extra {
		wg.Go(func() {
			body := map[string]any{"appId": apps.DemoAppID, "stream": true, "messages": []map[string]string{{"role": "user", "content": "$ echo hi"}}}
			resp, err := alice.Send("POST", "/api/v1/chat/completions", body)
			if err != nil {
				t.Errorf("a run over the cap: %v", err)
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), want) {
				t.Errorf("a run over the cap: %d, Retry-After %q, %s; want 429 with Retry-After saying %q", resp.StatusCode, resp.Header.Get("Retry-After"), raw, want)
			}
		})
	}
	wg.Wait()
	if _, answer := say(t, bob, apps.DemoAppID, "", "$ echo bob"); !strings.Contains(answer, "bob") {
		t.Errorf("bob, beside alice's full runs: %q", answer)
	}

	// The runs end with their clients; their places come back.
	cancel()
	holding.Wait()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, u := capRow(t, admin, "user-runs"); u == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("alice's runs still hold their places a minute after their clients went away")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, answer := say(t, alice, apps.DemoAppID, "", "$ echo again"); !strings.Contains(answer, "again") {
		t.Errorf("alice after her runs ended: %q", answer)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

package web_test

// The attacks on the requests the engine makes for users (T7, issue
// 28 finding 6): an app owner aims the share link's identity hook, an
// admin an MCP server, an operator the alert webhook at the engine's own
// loopback. Each is refused at the dial unless FLOWBOX_OUTBOUND_ALLOW
// names the target, and the legitimate use beside it works. The tests'
// "public" servers are on loopback too (the only addresses this machine
// has), so the legitimate uses name them in FLOWBOX_OUTBOUND_ALLOW.

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/web/visitor"
)

// countingServer is a loopback server that counts what it gets and
// answers with h.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// banner answers like an SSH server would, which an error oracle shows.
func banner(w http.ResponseWriter, r *http.Request) {
	_, _ = w.Write([]byte("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"))
}

// uidHook is an identity hook that names the holder of "good-token".
func uidHook(w http.ResponseWriter, r *http.Request) {
	var body struct{ Token string }
	if json.NewDecoder(r.Body).Decode(&body) != nil || body.Token != "good-token" {
		http.Error(w, "unknown token", http.StatusForbidden)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"uid": "member-1"})
}

// leaks are what a visitor must not read about the target.
var leaks = []string{"SSH-", "OpenSSH", "refused", "127.0.0.1", "loopback", "dial", "answered", "302", "connect"}

func TestAttackShareHookSSRF(t *testing.T) {
	t.Parallel()
	internal, internalHits := countingServer(t, banner)
	legit, legitHits := countingServer(t, uidHook)
	// An allowed, "public" site that redirects to the internal one.
	redirector, redirectorHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/", http.StatusTemporaryRedirect)
	})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_OUTBOUND_ALLOW": legit.Listener.Addr().String() + "," + redirector.Listener.Addr().String()}})
	env.CreateUser(t, "mallory", auth.RoleUser)
	mallory := env.Login(t, "mallory", enginetest.Password("mallory"))
	appID := newApp(t, mallory, "probe")

	port := internal.Listener.Addr().(*net.TCPAddr).Port
	for _, target := range []string{internal.URL + "/", "http://localhost:" + strconv.Itoa(port) + "/", "http://[::ffff:127.0.0.1]:" + strconv.Itoa(port) + "/",
		redirector.URL + "/"} {
		l := newLink(t, mallory, appID, map[string]any{"name": "probe", "hookUrl": target})
		resp := env.Anonymous().Do(t, "GET", l.URL+"?token=a", nil)
		body := string(resp.Body)
		if resp.Status != http.StatusBadGateway || !strings.Contains(body, "could not be reached") || !strings.Contains(body, "engine log") {
			t.Errorf("hook %s: %d %q, want 502 with the generic message", target, resp.Status, body)
		}
		for _, leak := range leaks {
			if strings.Contains(body, leak) {
				t.Errorf("hook %s: the visitor reads %q in %q", target, leak, body)
			}
		}
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("hook %s: a visitor session was opened", target)
		}
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal server got %d requests through identity hooks, want 0", n)
	}
	if n := redirectorHits.Load(); n != 1 {
		t.Errorf("the redirector got %d requests, want 1", n)
	}

	// The legitimate hook, allowed by the operator, names its members.
	l := newLink(t, mallory, appID, map[string]any{"name": "members", "hookUrl": legit.URL + "/check"})
	member := visit(t, env, l.URL+"?token=good-token")
	expect(t, member, "GET", l.URL, nil, 200)
	if resp := expect(t, env.Anonymous(), "GET", l.URL+"?token=forged", nil, 403); !strings.Contains(string(resp.Body), "did not accept") ||
		strings.Contains(string(resp.Body), "403") {
		t.Errorf("a refused token: %s", resp.Body)
	}
	if n := legitHits.Load(); n != 2 {
		t.Errorf("the allowed hook got %d requests, want 2", n)
	}
}

func TestAttackShareHookFlood(t *testing.T) {
	t.Parallel()
	hook, hits := countingServer(t, uidHook)
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_OUTBOUND_ALLOW": hook.Listener.Addr().String()},
		LimitClock: frozen()})
	env.CreateUser(t, "mallory", auth.RoleUser)
	mallory := env.Login(t, "mallory", enginetest.Password("mallory"))
	l := newLink(t, mallory, newApp(t, mallory, "flooded"), map[string]any{"name": "flood", "hookUrl": hook.URL})

	statuses := map[int]int{}
	for i := range 30 {
		v := env.Anonymous()
		// Forged client addresses change nothing: no proxy is trusted.
		v.Header.Set("X-Forwarded-For", "203.0.113."+strconv.Itoa(i+1))
		resp := v.Do(t, "GET", l.URL+"?token=guess-"+strconv.Itoa(i), nil)
		statuses[resp.Status]++
		if resp.Status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("a 429 without Retry-After")
		}
	}
	if statuses[http.StatusForbidden] != visitor.HookBurstPerAddress || statuses[http.StatusTooManyRequests] != 30-visitor.HookBurstPerAddress {
		t.Errorf("30 quick visits: %v, want %d refused by the hook and the rest 429", statuses, visitor.HookBurstPerAddress)
	}
	if n := hits.Load(); n != visitor.HookBurstPerAddress {
		t.Errorf("the hook was called %d times, want %d", n, visitor.HookBurstPerAddress)
	}
}

func TestAttackMCPServerSSRF(t *testing.T) {
	t.Parallel()
	internal, internalHits := countingServer(t, banner)
	echo := newEchoServer(t, "s3cret-token")
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_OUTBOUND_ALLOW": echo.Listener.Addr().String()}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "internal", "name": "Internal", "transport": "http",
		"url": internal.URL + "/mcp", "enabled": true}, 201)
	resp := expect(t, admin, "POST", "/admin/api/mcp-servers/internal/refresh", nil, 502)
	if !strings.Contains(string(resp.Body), "FLOWBOX_OUTBOUND_ALLOW") || strings.Contains(string(resp.Body), "SSH-") {
		t.Errorf("refresh of a loopback server: %s, want the refusal naming FLOWBOX_OUTBOUND_ALLOW", resp.Body)
	}
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests, want 0", n)
	}

	// The allowed server is listed as before.
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "team", "name": "Team", "transport": "http",
		"url": echo.URL, "token": "s3cret-token", "enabled": true}, 201)
	if resp := expect(t, admin, "POST", "/admin/api/mcp-servers/team/refresh", nil, 200); !strings.Contains(string(resp.Body), `"echo"`) {
		t.Errorf("the allowed server's tools: %s", resp.Body)
	}
}

func TestAttackAlertWebhookSSRF(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{false, true} {
		vars := map[string]string{"FLOWBOX_ALERT_RETRY_DELAY": "1h"}
		if !allowed {
			vars["FLOWBOX_OUTBOUND_ALLOW"] = "" // over startAlerting's exception
		}
		e, recv, _ := startAlerting(t, vars, http.StatusOK)
		alice := e.Login(t, "alice", enginetest.Password("alice"))
		app := newApp(t, alice, "alerting")
		sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "messages": message("$ nc -l 4444")}, 200)
		if !allowed {
			failed := `flowbox_alerts_failed_total{event="refused",reason="retry"}`
			waitUntil(t, "the delivery is tried", func() bool { return promValue(t, e, failed) >= 1 })
			if n := len(recv.deliveries()); n != 0 {
				t.Errorf("a webhook on loopback got %d deliveries without FLOWBOX_OUTBOUND_ALLOW, want 0", n)
			}
			continue
		}
		if n := settled(t, e, "refused"); n != 1 || len(recv.deliveries()) != 1 {
			t.Errorf("an allowed webhook: %v delivered, %d received; want 1", n, len(recv.deliveries()))
		}
	}
}

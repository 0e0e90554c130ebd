package web_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/workers"
)

// basic is a caller sending user and password by HTTP basic auth.
func basic(env *enginetest.Env, user, password string) *enginetest.Client {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, password)
	c := env.Anonymous()
	c.Header.Set("Authorization", r.Header.Get("Authorization"))
	return c
}

// operator is a caller with the admin token as the password of HTTP basic
// auth, as a browser sends it once prompted: no account, no session.
func operator(env *enginetest.Env) *enginetest.Client {
	return basic(env, "operator", enginetest.AdminToken)
}

// TestQueueDashboard: the product's queue dashboard answers admins and the
// admin token and refuses everyone else, and lists the task a chat's
// deletion queued, on a real redis-server and on the embedded Redis.
func TestQueueDashboard(t *testing.T) {
	t.Parallel()
	redises := []struct {
		name string
		env  func(testing.TB) map[string]string
	}{
		{"redis-server", func(t testing.TB) map[string]string {
			return map[string]string{"FLOWBOX_REDIS_ADDR": redistest.Server(t)}
		}},
		{"embedded", func(testing.TB) map[string]string { return nil }}, // the product's own
	}
	for _, rk := range redises {
		t.Run(rk.name, func(t *testing.T) {
			env := enginetest.Start(t, enginetest.Options{Env: rk.env(t)})
			aliceID := env.CreateUser(t, "alice", auth.RoleUser)
			rootID := env.CreateUser(t, "root", auth.RoleAdmin)
			alice := env.Login(t, "alice", enginetest.Password("alice"))
			// The workers do not run: the deletion's task waits in its queue.
			chat, _ := say(t, alice, apps.DemoAppID, "", "hello")
			if resp := alice.Do(t, "DELETE", "/api/apps/demo/chats", map[string]any{"chatIds": []string{chat}}); resp.Status != http.StatusAccepted {
				t.Fatalf("delete the chat: %d %s", resp.Status, resp.Body)
			}

			forged := env.Anonymous()
			forged.Header.Set("Cookie", api.SessionCookie+"=fbs_forged")
			tests := []struct {
				name   string
				as     *enginetest.Client
				path   string
				status int
				body   string
			}{
				{"no credentials", env.Anonymous(), "/api/queues", 401, "admin token"},
				{"wrong password", basic(env, "admin", "guess"), "/api/queues", 401, "admin token"},
				{"an admin's password", basic(env, enginetest.AdminName, enginetest.AdminPassword), "/api/queues", 401, "admin token"},
				{"wrong bearer", env.Bearer(enginetest.AdminToken[:len(enginetest.AdminToken)-1]), "/api/queues", 401, "admin token"},
				{"a session that ended", forged, "/api/queues", 401, "admin token"},
				{"basic auth, page", operator(env), "", 200, "<html"},
				{"basic auth, API", operator(env), "/api/queues", 200, workers.QueueDeletions},
				{"bearer, API", env.Bearer(enginetest.AdminToken), "/api/queues", 200, workers.QueueDeletions},
				{"admin session", env.Login(t, enginetest.AdminName, enginetest.AdminPassword), "/api/queues", 200, workers.QueueDeletions},
				{"another admin's API key", env.Bearer(env.APIKey(t, rootID)), "/api/queues", 200, workers.QueueDeletions},
				{"user session", alice, "/api/queues", 403, "this needs an admin"},
				{"user API key", env.Bearer(env.APIKey(t, aliceID)), "/api/queues", 403, "this needs an admin"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					resp := tc.as.Do(t, "GET", web.QueuesPath+tc.path, nil)
					if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.body) {
						t.Fatalf("GET %s: status %d, body %s; want %d and a body containing %q", web.QueuesPath+tc.path, resp.Status, clipped(resp.Body), tc.status, tc.body)
					}
					if resp.Status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
						t.Errorf("401 without a Basic challenge: browsers would not prompt for the admin token")
					}
				})
			}

			// The API lists the queue with its task.
			var got struct {
				Queues []struct {
					Queue   string `json:"queue"`
					Pending int    `json:"pending"`
				} `json:"queues"`
			}
			operator(env).Do(t, "GET", web.QueuesPath+"/api/queues", nil).JSON(t, &got)
			if len(got.Queues) != 1 || got.Queues[0].Queue != workers.QueueDeletions || got.Queues[0].Pending != 1 {
				t.Errorf("queues = %+v, want %s with 1 pending task", got.Queues, workers.QueueDeletions)
			}
		})
	}
}

// TestAdminGateWithoutAToken: with FLOWBOX_ADMIN_TOKEN unset only admins
// get in, and the refusal says how to let operators in; no browser is
// asked for a token that does not exist.
func TestAdminGateWithoutAToken(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_ADMIN_TOKEN": ""}})
	env.CreateUser(t, "alice", auth.RoleUser)
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	tests := []struct {
		name   string
		as     *enginetest.Client
		path   string
		status int
		body   string
	}{
		{"basic auth, empty password", basic(env, "admin", ""), web.QueuesPath + "/api/queues", 401, "the admin token is off"},
		{"the old token", operator(env), web.QueuesPath + "/api/queues", 401, "FLOWBOX_ADMIN_TOKEN"},
		{"no credentials", env.Anonymous(), "/admin", 401, "the admin token is off"},
		{"user session", alice, "/admin", 403, "this needs an admin"},
		{"admin session, page", admin, "/admin", 200, `"page":"admin"`},
		{"admin session, queues", admin, web.QueuesPath + "/api/queues", 200, `"queues"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.as.Do(t, "GET", tc.path, nil)
			if resp.Status != tc.status || !strings.Contains(string(resp.Body), tc.body) {
				t.Fatalf("GET %s: status %d, body %s; want %d and a body containing %q", tc.path, resp.Status, clipped(resp.Body), tc.status, tc.body)
			}
			if h := resp.Header.Get("WWW-Authenticate"); h != "" {
				t.Errorf("WWW-Authenticate: %s with no admin token configured", h)
			}
		})
	}
}

// TestAdminStopsASandbox: a signed-in admin's stop needs the session's
// CSRF token; any change from another site is refused, whatever the
// credentials; an operator with only the admin token, signed in by
// basic auth, gets the admin page and its Stop button works.
func TestAdminStopsASandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	chat, _ := say(t, alice, apps.DemoAppID, "", "$ echo up")
	id := sandbox.IDFor(apps.DemoAppID, aliceID, chat)
	provider := env.Engine.Services.Provider
	state := func() sandbox.Status {
		t.Helper()
		st, err := provider.Status(ctx, id)
		if err != nil {
			t.Fatalf("status of sandbox %s: %v", id, err)
		}
		return st
	}
	wake := func() {
		t.Helper()
		say(t, alice, apps.DemoAppID, chat, "$ echo up")
		if st := state(); st != sandbox.StatusRunning {
			t.Fatalf("the sandbox is %s after a command, want running", st)
		}
	}
	stop := "/admin/api/sandboxes/" + id + "/stop"
	if st := state(); st != sandbox.StatusRunning {
		t.Fatalf("the sandbox is %s after a command, want running", st)
	}

	// (a) A session's change needs its CSRF token.
	noCSRF := *admin
	noCSRF.CSRF = ""
	if resp := noCSRF.Do(t, "POST", stop, nil); resp.Status != http.StatusForbidden || !strings.Contains(string(resp.Body), api.CSRFHeader) {
		t.Fatalf("stop without the CSRF token: %d %s, want 403", resp.Status, resp.Body)
	}
	if st := state(); st != sandbox.StatusRunning {
		t.Fatalf("a refused stop stopped the sandbox (%s)", st)
	}
	if resp := admin.Do(t, "POST", stop, nil); resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"done":true`) {
		t.Fatalf("stop with the CSRF token: %d %s, want 200", resp.Status, resp.Body)
	}
	if st := state(); st != sandbox.StatusStopped {
		t.Fatalf("after the admin's stop the sandbox is %s, want %s", st, sandbox.StatusStopped)
	}
	wake()

	// (b) Changes from another site are refused: basic auth and cookies
	// ride along on them.
	for _, tc := range []struct {
		name   string
		c      *enginetest.Client
		header map[string]string
	}{
		{"the token by basic auth, cross-site", operator(env), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"the token by basic auth, same-site", operator(env), map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"the token by basic auth, another origin", operator(env), map[string]string{"Origin": "https://evil.example"}},
		{"an admin's session, cross-site", admin, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		c := *tc.c
		c.Header = c.Header.Clone()
		for k, v := range tc.header {
			c.Header.Set(k, v)
		}
		if resp := c.Do(t, "POST", stop, nil); resp.Status != http.StatusForbidden || !strings.Contains(string(resp.Body), "must come from this site's own pages") {
			t.Errorf("%s: %d %s, want 403", tc.name, resp.Status, resp.Body)
		}
	}
	if st := state(); st != sandbox.StatusRunning {
		t.Fatalf("a refused cross-site stop stopped the sandbox (%s)", st)
	}

	// (c) The operator's admin page lists the sandbox with a Stop button;
	// the page's script posts it under /admin, where the browser sends the
	// basic credentials it was given for the page.
	op := operator(env)
	op.Header.Set("Sec-Fetch-Site", "same-origin")
	resp := op.Do(t, "GET", "/admin", nil)
	if resp.Status != 200 {
		t.Fatalf("the admin page for the token: %d %s", resp.Status, clipped(resp.Body))
	}
	if name, data := readAppPage[adminPageData](t, resp.Body); name != "admin" || !slices.ContainsFunc(data.Sandboxes, func(s adminSandbox) bool { return s.SandboxID == id }) {
		t.Fatalf("the admin page for the token (%s) does not list the sandbox %s: %+v", name, id, data.Sandboxes)
	}
	src := regexp.MustCompile(`<script type="module" crossorigin src="([^"]+)"`).FindSubmatch(resp.Body)
	if src == nil {
		t.Fatalf("the admin page loads no script: %s", clipped(resp.Body))
	}
	script := op.Do(t, "GET", string(src[1]), nil)
	m := regexp.MustCompile("[`\"']([^`\"']*)/api/sandboxes/[`\"']").FindSubmatch(script.Body)
	if script.Status != 200 || m == nil {
		t.Fatalf("the pages' script %s (%d): no POST of the admin buttons found", src[1], script.Status)
	}
	if prefix := string(m[1]); prefix != "/admin" {
		t.Fatalf("the admin buttons post to %s/api/sandboxes/…, outside /admin: the browser would not send the basic credentials", prefix)
	}
	if resp := op.Do(t, "POST", string(m[1])+"/api/sandboxes/"+id+"/stop", nil); resp.Status != http.StatusOK {
		t.Fatalf("the operator's Stop, same-origin: %d %s, want 200", resp.Status, resp.Body)
	}
	if st := state(); st != sandbox.StatusStopped {
		t.Fatalf("after the operator's stop the sandbox is %s, want %s", st, sandbox.StatusStopped)
	}
}

// TestMetrics: /metrics of the product serves the workers' metrics in
// Prometheus' text format.
func TestMetrics(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	resp := env.Anonymous().Do(t, "GET", "/metrics", nil)
	if resp.Status != 200 {
		t.Fatalf("GET /metrics: %d", resp.Status)
	}
	for _, name := range []string{
		"flowbox_sandbox_scans_total", "flowbox_sandbox_scan_duration_seconds", "flowbox_sandboxes_stopped_total",
		"flowbox_sandboxes_deleted_total", "flowbox_reconcile_repairs_total",
	} {
		if !strings.Contains(string(resp.Body), "# TYPE "+name) {
			t.Errorf("/metrics lacks %s; got:\n%s", name, resp.Body)
		}
	}
}

// TestQueueDashboardOffline: the queue dashboard's pages fetch nothing
// from the internet (its Google Fonts stylesheets are left out) and ask
// for their manifest with the admin's credentials, which the gate then
// lets through; its scripts pass unchanged.
func TestQueueDashboardOffline(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	for _, path := range []string{"", "/queues/" + workers.QueueDeletions} {
		resp := admin.Do(t, "GET", web.QueuesPath+path, nil)
		page := string(resp.Body)
		if resp.Status != http.StatusOK || !strings.Contains(page, `<div id="root">`) {
			t.Fatalf("GET %s: %d %s", web.QueuesPath+path, resp.Status, clipped(resp.Body))
		}
		if strings.Contains(page, "https://") || strings.Contains(page, "http://") {
			t.Errorf("GET %s: the page fetches from elsewhere: %s", web.QueuesPath+path, page)
		}
		if !strings.Contains(page, `<link rel="manifest" crossorigin="use-credentials" href="`+web.QueuesPath+`/manifest.json"`) {
			t.Errorf("GET %s: the manifest is not asked for with credentials: %s", web.QueuesPath+path, page)
		}
		if n, _ := strconv.Atoi(resp.Header.Get("Content-Length")); n != len(resp.Body) {
			t.Errorf("GET %s: Content-Length %d for %d bytes", web.QueuesPath+path, n, len(resp.Body))
		}
	}
	if resp := admin.Do(t, "GET", web.QueuesPath+"/manifest.json", nil); resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"icons"`) {
		t.Errorf("the manifest: %d %s", resp.Status, clipped(resp.Body))
	}
	page := string(admin.Do(t, "GET", web.QueuesPath, nil).Body)
	script := regexp.MustCompile(`src="(` + regexp.QuoteMeta(web.QueuesPath) + `/static/js/main[^"]+\.js)"`).FindStringSubmatch(page)
	if script == nil {
		t.Fatalf("no main script in the page: %s", page)
	}
	resp := admin.Do(t, "GET", script[1], nil)
	if resp.Status != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") || len(resp.Body) < 1000 {
		t.Errorf("the main script: %d %s, %d bytes", resp.Status, resp.Header.Get("Content-Type"), len(resp.Body))
	}
}

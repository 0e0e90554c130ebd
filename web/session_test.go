package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/web/api"
)

// A browser's round through the product: sign in, use the cookie (with
// the CSRF token for changes), sign out; the session's cookie is refused
// afterwards even when sent again.
func TestSessionRoundTrip(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	c := env.Anonymous()
	newApp := map[string]any{"name": "mine", "graph": apps.DemoGraph()}

	if resp := c.Do(t, "POST", "/api/login", map[string]string{"name": "alice", "password": "wrong horse"}); resp.Status != 401 || !strings.Contains(string(resp.Body), "wrong user name or password") {
		t.Fatalf("bad password: %d %s", resp.Status, resp.Body)
	}
	resp := c.Do(t, "POST", "/api/login", map[string]string{"name": "alice", "password": enginetest.Password("alice")})
	if resp.Status != 200 || strings.Contains(string(resp.Body), "passwordHash") || strings.Contains(string(resp.Body), enginetest.Password("alice")) {
		t.Fatalf("login: %d %s", resp.Status, resp.Body)
	}
	var login struct {
		CSRF string `json:"csrfToken"`
	}
	resp.JSON(t, &login)
	u, _ := url.Parse(env.URL)
	var session string
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		if ck.Name == api.SessionCookie {
			session = ck.Value
		}
	}
	if login.CSRF == "" || session == "" {
		t.Fatalf("login: no CSRF token or no session cookie (%s)", resp.Body)
	}
	if resp := c.Do(t, "GET", "/api/me", nil); resp.Status != 200 || !strings.Contains(string(resp.Body), `"name":"alice"`) || !strings.Contains(string(resp.Body), login.CSRF) {
		t.Fatalf("me: %d %s", resp.Status, resp.Body)
	}
	if resp := c.Do(t, "POST", "/api/apps", newApp); resp.Status != 403 {
		t.Fatalf("a change without the CSRF token: %d %s, want 403", resp.Status, resp.Body)
	}
	c.Header.Set(api.CSRFHeader, "not-"+login.CSRF)
	if resp := c.Do(t, "POST", "/api/apps", newApp); resp.Status != 403 {
		t.Fatalf("a change with a wrong CSRF token: %d %s, want 403", resp.Status, resp.Body)
	}
	c.Header.Del(api.CSRFHeader)
	c.CSRF = login.CSRF
	if resp := c.Do(t, "POST", "/api/apps", newApp); resp.Status != 201 || !strings.Contains(string(resp.Body), `"name":"mine"`) {
		t.Fatalf("a change with the CSRF token: %d %s", resp.Status, resp.Body)
	}
	var list struct{ Apps []struct{ Name string } }
	c.Do(t, "GET", "/api/apps", nil).JSON(t, &list)
	if mine := countNamed(list.Apps, "mine"); mine != 1 {
		t.Fatalf("%d apps named mine, want 1: the refused changes made none", mine)
	}
	if resp := c.Do(t, "POST", "/api/logout", nil); resp.Status != 200 {
		t.Fatalf("logout: %d %s", resp.Status, resp.Body)
	}
	if resp := c.Do(t, "GET", "/api/me", nil); resp.Status != 401 {
		t.Fatalf("after logout: %d %s, want 401", resp.Status, resp.Body)
	}
	// The browser dropped the cookie; one kept from before is dead too.
	old := env.Anonymous()
	old.Header.Set("Cookie", api.SessionCookie+"="+session)
	if resp := old.Do(t, "GET", "/api/me", nil); resp.Status != 401 {
		t.Fatalf("the signed-out session's cookie: %d %s, want 401", resp.Status, resp.Body)
	}
	old.CSRF = login.CSRF
	if resp := old.Do(t, "POST", "/api/apps", newApp); resp.Status != 401 {
		t.Fatalf("a change with the signed-out session: %d %s, want 401", resp.Status, resp.Body)
	}
}

func countNamed(list []struct{ Name string }, name string) int {
	n := 0
	for _, a := range list {
		if a.Name == name {
			n++
		}
	}
	return n
}

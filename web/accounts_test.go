package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/internal/server/servertest"
)

// TestAccountsThroughTheAPI: an admin gives a person an account; the
// person signs in, makes and uses a key, changes their password; the
// admin's disable, enable and reset take effect at once.
func TestAccountsThroughTheAPI(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, servertest.Options{})
	admin := env.Login(t, servertest.AdminName, servertest.AdminPassword)
	status := func(c *servertest.Client, method, path string, body any, want int) servertest.Response {
		t.Helper()
		resp := c.Do(t, method, path, body)
		if resp.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.Status, resp.Body, want)
		}
		return resp
	}

	var erin struct{ ID, Name, Role string }
	status(admin, "POST", "/admin/api/users", map[string]any{"name": "Erin", "password": "erin's first"}, 201).JSON(t, &erin)
	if erin.ID != "u:erin" || erin.Role != "user" {
		t.Fatalf("created %+v, want u:erin with role user", erin)
	}
	if resp := status(admin, "POST", "/admin/api/users", map[string]any{"name": "erin", "password": "another one"}, 409); !strings.Contains(string(resp.Body), "taken") {
		t.Errorf("a taken name: %s", resp.Body)
	}
	if resp := status(admin, "POST", "/admin/api/users", map[string]any{"name": "frank", "password": "short"}, 400); !strings.Contains(string(resp.Body), "8 to 72 bytes") {
		t.Errorf("a short password: %s", resp.Body)
	}
	var list struct{ Users []struct{ ID, Name string } }
	status(admin, "GET", "/admin/api/users", nil, 200).JSON(t, &list)
	if len(list.Users) != 2 || list.Users[1].Name != "erin" || strings.Contains(string(admin.Do(t, "GET", "/admin/api/users", nil).Body), "passwordHash") {
		t.Errorf("users: %+v; want admin and erin, without password hashes", list.Users)
	}

	session := env.Login(t, "erin", "erin's first")
	other := env.Login(t, "erin", "erin's first")
	var made struct{ Key string }
	status(session, "POST", "/api/keys", map[string]any{"name": "laptop"}, 201).JSON(t, &made)
	key := env.Bearer(made.Key)
	status(key, "GET", "/api/me", nil, 200)
	var keys struct {
		Keys []struct{ ID, Name, Prefix string }
	}
	resp := status(session, "GET", "/api/keys", nil, 200)
	resp.JSON(t, &keys)
	if len(keys.Keys) != 1 || keys.Keys[0].Name != "laptop" || !strings.HasPrefix(made.Key, keys.Keys[0].Prefix) || strings.Contains(string(resp.Body), made.Key) {
		t.Fatalf("keys: %s; want the laptop key by prefix, never the secret", resp.Body)
	}

	// Disabled: her session and key stop at once; enabled, the key works
	// again and she signs in anew.
	status(admin, "POST", "/admin/api/users/u:erin/disable", nil, 200)
	status(session, "GET", "/api/me", nil, 401)
	status(key, "GET", "/api/me", nil, 401)
	if resp := env.Anonymous().Do(t, "POST", "/api/login", map[string]string{"name": "erin", "password": "erin's first"}); resp.Status != 401 {
		t.Errorf("sign-in while disabled: %d", resp.Status)
	}
	status(admin, "POST", "/admin/api/users/u:erin/enable", nil, 200)
	status(key, "GET", "/api/me", nil, 200)
	session = env.Login(t, "erin", "erin's first")
	other = env.Login(t, "erin", "erin's first")

	// Her own change: the old password must match; her other sessions end.
	status(session, "POST", "/api/me/password", map[string]any{"oldPassword": "wrong", "newPassword": "erin's second"}, 403)
	status(session, "POST", "/api/me/password", map[string]any{"oldPassword": "erin's first", "newPassword": "erin's second"}, 200)
	status(session, "GET", "/api/me", nil, 200)
	status(other, "GET", "/api/me", nil, 401)

	// An admin's reset ends every session.
	status(admin, "POST", "/admin/api/users/u:erin/password", map[string]any{"password": "set by the admin"}, 200)
	status(session, "GET", "/api/me", nil, 401)
	env.Login(t, "erin", "set by the admin")

	// Revoked, the key is refused; another user's key is not hers to revoke.
	status(admin, "DELETE", "/api/keys/"+keys.Keys[0].ID, nil, 404)
	status(key, "DELETE", "/api/keys/"+keys.Keys[0].ID, nil, 200)
	status(key, "GET", "/api/me", nil, 401)

	// Admins cannot lock themselves out; unknown users are 404.
	status(admin, "POST", "/admin/api/users/u:admin/disable", nil, 409)
	status(admin, "POST", "/admin/api/users/u:nobody/disable", nil, 404)
	if resp := admin.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusOK {
		t.Errorf("the admin after refusing to disable herself: %d", resp.Status)
	}
}

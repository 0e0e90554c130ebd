package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/server/servertest"
	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/web/auth"
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

// TestKeyExpiryAndRate: a key given an expiry stops at it, and one given
// a rate is refused past it with a time to retry; other keys of the same
// user are not held back.
func TestKeyExpiryAndRate(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, servertest.Options{})
	id := env.CreateUser(t, "gil", auth.RoleUser)
	gil := env.Login(t, "gil", servertest.Password("gil"))
	newKey := func(body map[string]any) *servertest.Client {
		t.Helper()
		resp := gil.Do(t, "POST", "/api/keys", body)
		if resp.Status != http.StatusCreated {
			t.Fatalf("create key %v: %d %s", body, resp.Status, resp.Body)
		}
		var k struct{ Key string }
		resp.JSON(t, &k)
		return env.Bearer(k.Key)
	}
	for _, bad := range []map[string]any{
		{"name": "past", "expiresAt": time.Now().Add(-time.Hour).Format(time.RFC3339)},
		{"name": "greedy", "ratePerMinute": auth.MaxKeyRate + 1},
		{"name": "odd date", "expiresAt": "next tuesday"},
		{"name": ""},
	} {
		if resp := gil.Do(t, "POST", "/api/keys", bad); resp.Status != http.StatusBadRequest {
			t.Errorf("create key %v: %d %s, want 400", bad, resp.Status, resp.Body)
		}
	}

	soon := newKey(map[string]any{"name": "soon", "expiresAt": time.Now().Add(2 * time.Second).Format(time.RFC3339Nano)})
	if resp := soon.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusOK {
		t.Fatalf("a key before its expiry: %d %s", resp.Status, resp.Body)
	}
	var keys struct {
		Keys []struct {
			Name      string
			ExpiresAt time.Time
		}
	}
	gil.Do(t, "GET", "/api/keys", nil).JSON(t, &keys)
	if len(keys.Keys) != 1 || keys.Keys[0].ExpiresAt.IsZero() {
		t.Errorf("keys %+v; want the expiry listed", keys.Keys)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		resp := soon.Do(t, "GET", "/api/me", nil)
		if resp.Status == http.StatusUnauthorized {
			if !strings.Contains(string(resp.Body), "expired") {
				t.Errorf("an expired key: %s; want it to say it expired", resp.Body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key still works a minute after its expiry: %d", resp.Status)
		}
	}

	slow := newKey(map[string]any{"name": "slow", "ratePerMinute": 2})
	free := env.Bearer(env.APIKey(t, id))
	for i := range 2 {
		if resp := slow.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusOK {
			t.Fatalf("request %d within the key's rate: %d %s", i+1, resp.Status, resp.Body)
		}
	}
	resp := slow.Do(t, "GET", "/api/me", nil)
	if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(resp.Body), "2 requests a minute") {
		t.Errorf("past the key's rate: %d %q %s; want 429 with Retry-After naming the limit", resp.Status, resp.Header.Get("Retry-After"), resp.Body)
	}
	if resp := free.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusOK {
		t.Errorf("another key of the same user: %d; want it unaffected", resp.Status)
	}
}

// TestDeleteUser: deleting a user says what happens to what they own:
// refused until the admin chooses; their apps transferred or deleted,
// their chats deleted with their sandboxes, their keys and sessions gone.
func TestDeleteUser(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, servertest.Options{})
	admin := env.Login(t, servertest.AdminName, servertest.AdminPassword)
	for _, mode := range []string{"transfer", "delete"} {
		t.Run(mode, func(t *testing.T) {
			name := "hal-" + mode
			id := env.CreateUser(t, name, auth.RoleUser)
			hal := env.Login(t, name, servertest.Password(name))
			key := env.Bearer(env.APIKey(t, id))
			resp := hal.Do(t, "POST", "/api/apps", map[string]any{"name": "hal's", "graph": apps.DemoGraph()})
			var app struct {
				ID string `json:"appId"`
			}
			resp.JSON(t, &app)
			turn := hal.Do(t, "POST", "/api/v1/chat/completions", map[string]any{"appId": app.ID, "chatId": "hal-chat-" + mode,
				"messages": []map[string]string{{"role": "user", "content": "$ echo mine > mine.txt"}}})
			if turn.Status != http.StatusOK {
				t.Fatalf("hal's turn: %d %s", turn.Status, turn.Body)
			}

			if resp := admin.Do(t, "DELETE", "/admin/api/users/"+id, nil); resp.Status != http.StatusConflict || !strings.Contains(string(resp.Body), "owns 1 app") {
				t.Fatalf("delete without saying what happens to the apps: %d %s", resp.Status, resp.Body)
			}
			query := "?apps=delete"
			if mode == "transfer" {
				query = "?apps=transfer&to=u:" + servertest.AdminName
			}
			if resp := admin.Do(t, "DELETE", "/admin/api/users/"+id+query, nil); resp.Status != http.StatusOK || !strings.Contains(string(resp.Body), `"chatsDeleted":1`) {
				t.Fatalf("delete %s: %d %s", query, resp.Status, resp.Body)
			}
			got := admin.Do(t, "GET", "/api/apps/"+app.ID, nil)
			switch mode {
			case "transfer":
				if got.Status != http.StatusOK || !strings.Contains(string(got.Body), `"ownerId":"u:admin"`) {
					t.Errorf("the transferred app: %d %s", got.Status, got.Body)
				}
			default:
				if got.Status != http.StatusNotFound {
					t.Errorf("the deleted app: %d %s", got.Status, got.Body)
				}
			}
			ctx := context.Background()
			store := env.Engine.Services.Store
			if _, err := store.GetDeletion(ctx, mongostore.ChatDeletionKey(app.ID, "hal-chat-"+mode)); err != nil {
				t.Errorf("the deletion of hal's chat's sandbox: %v", err)
			}
			if _, err := env.Engine.Chats.Get(ctx, "hal-chat-"+mode); err == nil {
				t.Error("hal's chat outlived his account")
			}
			if resp := key.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusUnauthorized {
				t.Errorf("hal's key after the deletion: %d", resp.Status)
			}
			if resp := hal.Do(t, "GET", "/api/me", nil); resp.Status != http.StatusUnauthorized {
				t.Errorf("hal's session after the deletion: %d", resp.Status)
			}
		})
	}
	if resp := admin.Do(t, "DELETE", "/admin/api/users/u:admin", nil); resp.Status != http.StatusConflict {
		t.Errorf("an admin deleting herself: %d %s", resp.Status, resp.Body)
	}
	if resp := admin.Do(t, "DELETE", "/admin/api/users/u:nobody", nil); resp.Status != http.StatusNotFound {
		t.Errorf("an unknown user: %d %s", resp.Status, resp.Body)
	}
}

// TestLoginLimit: one address gets FLOWBOX_LOGIN_BURST sign-in attempts
// at once; the next, even with the right password, is told when to retry.
func TestLoginLimit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, servertest.Options{Env: map[string]string{"FLOWBOX_LOGIN_BURST": "3"}})
	c := env.Anonymous()
	for i := range 3 {
		if resp := c.Do(t, "POST", "/api/login", map[string]string{"name": "admin", "password": "a guess"}); resp.Status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d %s, want 401", i+1, resp.Status, resp.Body)
		}
	}
	resp := c.Do(t, "POST", "/api/login", map[string]string{"name": servertest.AdminName, "password": servertest.AdminPassword})
	if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the limit: %d %q %s; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"), resp.Body)
	}
}

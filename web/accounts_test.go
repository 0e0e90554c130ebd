package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// TestAccountsThroughTheAPI: an admin gives a person an account; the
// person signs in, makes and uses a key, changes their password; the
// admin's disable, enable and reset take effect at once.
func TestAccountsThroughTheAPI(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	status := func(c *enginetest.Client, method, path string, body any, want int) enginetest.Response {
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
	env := enginetest.Start(t, enginetest.Options{})
	id := env.CreateUser(t, "gil", auth.RoleUser)
	gil := env.Login(t, "gil", enginetest.Password("gil"))
	newKey := func(body map[string]any) *enginetest.Client {
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
	env := enginetest.Start(t, enginetest.Options{})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	for _, mode := range []string{"transfer", "delete"} {
		t.Run(mode, func(t *testing.T) {
			name := "hal-" + mode
			id := env.CreateUser(t, name, auth.RoleUser)
			hal := env.Login(t, name, enginetest.Password(name))
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
				query = "?apps=transfer&to=u:" + enginetest.AdminName
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
			if _, err := store.GetDeletion(ctx, mongostore.ChatDeletionKey(sandbox.Scope{AppID: app.ID, UserID: "u:" + name, ChatID: "hal-chat-" + mode})); err != nil {
				t.Errorf("the deletion of hal's chat's sandbox: %v", err)
			}
			if _, err := env.Engine.Chats.Get(ctx, sandbox.Scope{AppID: app.ID, UserID: "u:" + name, ChatID: "hal-chat-" + mode}); err == nil {
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
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LOGIN_BURST": "3"}})
	c := env.Anonymous()
	for i := range 3 {
		if resp := c.Do(t, "POST", "/api/login", map[string]string{"name": "admin", "password": "a guess"}); resp.Status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d %s, want 401", i+1, resp.Status, resp.Body)
		}
	}
	resp := c.Do(t, "POST", "/api/login", map[string]string{"name": enginetest.AdminName, "password": enginetest.AdminPassword})
	if resp.Status != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("past the limit: %d %q %s; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"), resp.Body)
	}
}

// TestPasswordLinks: an admin invites a person with a one-time
// set-password link instead of a password; the person opens it, sets a
// password (the rule is enforced) and signs in with it; the link works
// once. A reset by link keeps the old password and sessions until the
// link is used, then ends every session.
func TestPasswordLinks(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	anon := env.Anonymous()
	check := func(t *testing.T, c *enginetest.Client, method, path string, body any, want int, says string) enginetest.Response {
		t.Helper()
		resp := c.Do(t, method, path, body)
		if resp.Status != want || !strings.Contains(string(resp.Body), says) {
			t.Fatalf("%s %s: %d %s, want %d saying %q", method, path, resp.Status, clip(resp.Body), want, says)
		}
		return resp
	}
	status := func(c *enginetest.Client, method, path string, body any, want int, says string) enginetest.Response {
		t.Helper()
		return check(t, c, method, path, body, want, says)
	}
	type link struct {
		User struct{ ID, Name string }
		ID   string
		URL  string    `json:"setPasswordUrl"`
		Exp  time.Time `json:"expiresAt"`
	}
	token := func(l link) string {
		t.Helper()
		tok, ok := strings.CutPrefix(l.URL, "/set-password/")
		if !ok || tok == "" {
			t.Fatalf("the link %q is not a relative /set-password/ path", l.URL)
		}
		return tok
	}
	use := func(tok, password string) enginetest.Response {
		return anon.Do(t, "POST", "/api/set-password", map[string]string{"token": tok, "password": password})
	}

	status(admin, "POST", "/admin/api/users", map[string]any{"name": "ida", "password": "long enough", "invite": true}, 400, "not both")
	var invited link
	resp := status(admin, "POST", "/admin/api/users", map[string]any{"name": "Ida", "invite": true}, 201, `"setPasswordUrl"`)
	resp.JSON(t, &invited)
	if invited.User.ID != "u:ida" || strings.Contains(string(resp.Body), "passwordHash") {
		t.Fatalf("invited %s; want u:ida without a password hash", resp.Body)
	}
	if left := time.Until(invited.Exp); left < 71*time.Hour || left > 73*time.Hour {
		t.Errorf("the link expires at %v, in %v; want about 72 hours", invited.Exp, left)
	}
	first := token(invited)

	// The page names the account; opening it does not use the link.
	for range 2 {
		status(anon, "GET", invited.URL, nil, 200, "Choose your password")
	}
	if page := passwordPageOf(t, anon.Do(t, "GET", invited.URL, nil)); page.Page != "setpassword" || page.Data.Name != "ida" ||
		page.Data.Token != first || page.Data.Problem != "" || page.Data.ExpiresAt.Sub(invited.Exp).Abs() > time.Second {
		t.Errorf("the page's data: %+v; want the form for ida, with the link's token and expiry %v", page, invited.Exp)
	}
	zh := env.Anonymous()
	zh.Header.Set("Accept-Language", "zh")
	if page := zh.Do(t, "GET", invited.URL, nil); page.Status != 200 || !strings.Contains(string(page.Body), "设置您的密码") {
		t.Errorf("the page in Chinese: %d, lacks its title", page.Status)
	}
	if page := zh.Do(t, "GET", "/set-password/fbp_made-up", nil); page.Status != 404 || !strings.Contains(string(page.Body), `<html lang="zh">`) ||
		passwordPageOf(t, page).Data.Problem != "linkInvalid" {
		t.Errorf("a made-up link's page in Chinese: %d %s, want 404 saying linkInvalid (what to do)", page.Status, clip(page.Body))
	}
	if r := use(first, "short"); r.Status != 400 || !strings.Contains(string(r.Body), "8 to 72 bytes") {
		t.Errorf("a short password: %d %s; want 400 with the rule", r.Status, r.Body)
	}
	if r := use(first, "ida's own password"); r.Status != 200 || !strings.Contains(string(r.Body), `"name":"ida"`) {
		t.Fatalf("set the password: %d %s", r.Status, r.Body)
	}
	ida := env.Login(t, "ida", "ida's own password")
	status(ida, "GET", "/api/me", nil, 200, `"name":"ida"`)
	// Once only.
	status(anon, "POST", "/api/set-password", map[string]string{"token": first, "password": "someone else's"}, 404, "ask an admin for a new one")
	if page := passwordPageOf(t, status(anon, "GET", invited.URL, nil, 404, "")); page.Data.Problem != "linkInvalid" || page.Data.Token != "" {
		t.Errorf("a used link's page: %+v, want linkInvalid and no form", page)
	}
	env.Login(t, "ida", "ida's own password")

	// A reset by link: until it is used, the old password and sessions
	// work; using it ends every session.
	var reset link
	status(admin, "POST", "/admin/api/users/u:ida/password", map[string]any{"invite": true}, 200, `"setPasswordUrl"`).JSON(t, &reset)
	status(ida, "GET", "/api/me", nil, 200, "ida")
	other := env.Login(t, "ida", "ida's own password")
	if r := use(token(reset), "ida's second password"); r.Status != 200 {
		t.Fatalf("use the reset link: %d %s", r.Status, r.Body)
	}
	status(ida, "GET", "/api/me", nil, 401, "")
	status(other, "GET", "/api/me", nil, 401, "")
	status(anon, "POST", "/api/login", map[string]string{"name": "ida", "password": "ida's own password"}, 401, "")
	env.Login(t, "ida", "ida's second password")
	status(admin, "POST", "/admin/api/users/u:nobody/password", map[string]any{"invite": true}, 404, "no such user")

	issue := func(t *testing.T) string {
		t.Helper()
		var l link
		check(t, admin, "POST", "/admin/api/users/u:ida/password", map[string]any{"invite": true}, 200, `"setPasswordUrl"`).JSON(t, &l)
		return token(l)
	}
	// Links that do not work, and the page and answer each gets.
	tests := []struct {
		name string
		// prepare returns the token to try, after making it unusable.
		prepare func(t *testing.T) string
		want    int
		// page is the label of the page's reason, says a part of the API's
		page, says string
		// after, when set, restores what prepare changed and checks the
		// link is whole again.
		after func(t *testing.T, tok string)
	}{
		{name: "expired", want: 410, page: "linkExpired", says: "expired", prepare: func(t *testing.T) string {
			tok := issue(t)
			// As if 72 hours had passed: the clock the server reads is the
			// real one, so the link's expiry moves instead.
			_, err := env.Engine.Services.DB.Collection(auth.PasswordLinks).UpdateOne(context.Background(),
				bson.D{{Key: "_id", Value: "u:ida"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: time.Now().Add(-time.Minute)}}}})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, after: func(t *testing.T, tok string) {
			// Read once, an expired link is gone.
			check(t, anon, "POST", "/api/set-password", map[string]string{"token": tok, "password": "whatever it is"}, 404, "")
		}},
		{name: "disabled user", want: 403, page: "linkDisabled", says: "disabled", prepare: func(t *testing.T) string {
			tok := issue(t)
			check(t, admin, "POST", "/admin/api/users/u:ida/disable", nil, 200, "")
			return tok
		}, after: func(t *testing.T, tok string) {
			check(t, admin, "POST", "/admin/api/users/u:ida/enable", nil, 200, "")
			if r := use(tok, "ida's third password"); r.Status != 200 {
				t.Errorf("the link once ida is enabled again: %d %s", r.Status, r.Body)
			}
		}},
		{name: "replaced by a newer link", want: 404, page: "linkInvalid", says: "replaced by a newer one", prepare: func(t *testing.T) string {
			tok := issue(t)
			issue(t)
			return tok
		}},
		{name: "password reset by an admin since", want: 404, page: "linkInvalid", says: "used already", prepare: func(t *testing.T) string {
			tok := issue(t)
			check(t, admin, "POST", "/admin/api/users/u:ida/password", map[string]any{"password": "set by the admin"}, 200, "")
			return tok
		}},
		{name: "account deleted and made again", want: 404, page: "linkInvalid", says: "mistyped", prepare: func(t *testing.T) string {
			tok := issue(t)
			check(t, admin, "DELETE", "/admin/api/users/u:ida", nil, 200, "")
			check(t, admin, "POST", "/admin/api/users", map[string]any{"name": "ida", "password": "the new ida's"}, 201, "")
			return tok
		}},
		{name: "made up", want: 404, page: "linkInvalid", says: "mistyped", prepare: func(*testing.T) string { return "fbp_made-up" }},
		{name: "not a link token", want: 404, page: "linkInvalid", says: "mistyped", prepare: func(*testing.T) string { return "fbk_a-key" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.prepare(t)
			if page := passwordPageOf(t, check(t, anon, "GET", "/set-password/"+tok, nil, tc.want, "")); page.Data.Problem != tc.page || page.Data.Name != "" {
				t.Errorf("the link's page: %+v, want %s and no account named", page, tc.page)
			}
			check(t, anon, "POST", "/api/set-password", map[string]string{"token": tok, "password": "a good password"}, tc.want, tc.says)
			if tc.after != nil {
				tc.after(t, tok)
			}
		})
	}
}

// passwordPage is the set-password page's data (web/account/setup.go)
// in the page's <script type="application/json" id="page-data">.
type passwordPage struct {
	Page string `json:"page"`
	Data struct {
		Token     string    `json:"token"`
		Name      string    `json:"name"`
		ExpiresAt time.Time `json:"expiresAt"`
		Problem   string    `json:"problem"`
	} `json:"data"`
}

func passwordPageOf(t *testing.T, resp enginetest.Response) passwordPage {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="page-data">(.*?)</script>`).FindSubmatch(resp.Body)
	if m == nil {
		t.Fatalf("the set-password page has no page data: %d %s", resp.Status, clip(resp.Body))
	}
	var page passwordPage
	if err := json.Unmarshal(m[1], &page); err != nil {
		t.Fatalf("the set-password page's data: %v\n%s", err, m[1])
	}
	return page
}

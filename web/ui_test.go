package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// TestPagesRender: the pages signed-in users get from the product, in
// English and Chinese, and a chat whose question, command, output and
// answer hold HTML, which the page shows as text.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	get := func(c *enginetest.Client, path, lang string) (int, string) {
		t.Helper()
		c.Header.Set("Accept-Language", lang)
		resp := c.Do(t, "GET", path, nil)
		return resp.Status, string(resp.Body)
	}

	if code, _ := get(env.Anonymous(), "/", "en"); code != http.StatusSeeOther {
		t.Errorf("anonymous visit: %d, want a redirect to sign in", code)
	}
	if code, body := get(env.Anonymous(), "/login", "en"); code != 200 || !strings.Contains(body, `id="login"`) {
		t.Errorf("login page: %d", code)
	}
	if code, body := get(alice, "/", "en"); code != 200 || !strings.Contains(body, `data-app="demo"`) {
		t.Errorf("app list: %d %s", code, body)
	}
	// The demo app is the first admin's: its canvas and Publish page are
	// theirs. The canvas draws the sandbox switch from the node template,
	// in both languages.
	for _, page := range []string{"/apps/demo/flow", "/apps/demo/edit"} {
		if code, _ := get(admin, page, "en"); code != http.StatusOK {
			t.Errorf("%s for its owner: %d", page, code)
		}
		if code, _ := get(alice, page, "en"); code != http.StatusForbidden {
			t.Errorf("%s of another's app: %d, want 403", page, code)
		}
	}
	// Run details (the nodes' inputs and outputs) are for those who build
	// the app, not for everyone who may chat with it.
	chatPage := func(c *enginetest.Client) string {
		t.Helper()
		resp := c.Do(t, "GET", "/apps/demo/chat/new", nil)
		_, body := get(c, resp.Header.Get("Location"), "en")
		if !strings.Contains(body, `id="chat-form"`) {
			t.Fatalf("the new chat's page (%d, %s) has no chat form", resp.Status, resp.Header.Get("Location"))
		}
		return body
	}
	if !strings.Contains(chatPage(admin), `data-details="true"`) {
		t.Errorf("the app's owner is not shown run details")
	}
	if strings.Contains(chatPage(alice), `data-details="true"`) {
		t.Errorf("a user of another's app is shown its run details")
	}
	if code, body := get(admin, "/api/node-templates", "en"); code != 200 || !strings.Contains(body, "Enable sandbox (Computer Use)") || !strings.Contains(body, "启用沙盒(Computer Use)") ||
		!strings.Contains(body, "When on, the agent gets its own Linux environment where it can run commands and work with files") {
		t.Errorf("the node templates: %d, lack the switch's labels", code)
	}

	// A real turn: the question holds HTML, the command prints a script,
	// and the demo model's answer quotes both.
	chat, answer := say(t, alice, apps.DemoAppID, "", "<b>hi</b>\n$ echo '<script>alert(1)</script>'")
	if !strings.Contains(answer, "<script>alert(1)</script>") {
		t.Fatalf("the answer does not show the command's output: %q", answer)
	}
	code, body := get(alice, "/apps/demo/chat/"+chat, "en")
	if code != 200 {
		t.Fatalf("chat page: %d", code)
	}
	for _, raw := range []string{"<script>alert", "<b>hi</b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the chat page contains %q unescaped", raw)
		}
	}
	for _, escaped := range []string{
		"&lt;b&gt;hi&lt;/b&gt;",                      // the question
		"&lt;script&gt;alert(1)&lt;/script&gt;",      // the command, the output, the answer
		`class="tool-card"`, `data-status="success"`, // the command's card
	} {
		if !strings.Contains(body, escaped) {
			t.Errorf("the chat page lacks %s:\n%s", escaped, body)
		}
	}
	// Chat ids are scoped per app and user: bob's page of that id is a
	// new chat of his own; naming alice's by her user is refused.
	if code, body := get(bob, "/apps/demo/chat/"+chat, "en"); code != 200 || strings.Contains(body, "&lt;b&gt;hi") || !strings.Contains(body, `id="chat-form"`) {
		t.Errorf("bob's chat of alice's chat id: %d, want a new chat of his own", code)
	}
	if code, _ := get(bob, "/apps/demo/chat/"+chat+"?userId="+aliceID, "en"); code != 404 {
		t.Errorf("another user's chat page: %d, want 404", code)
	}
	// An admin reads it, with no input: messages go to one's own chats.
	for lang, note := range map[string]string{"en": "another user's chat", "zh": "其他用户的对话"} {
		code, body := get(admin, "/apps/demo/chat/"+chat+"?userId="+aliceID, lang)
		if code != 200 || !strings.Contains(body, "&lt;b&gt;hi&lt;/b&gt;") || strings.Contains(body, `id="chat-form"`) || !strings.Contains(body, note) {
			t.Errorf("an admin's view of the chat in %s: %d", lang, code)
		}
	}
}

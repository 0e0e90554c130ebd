package web_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
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
	if code, body := get(env.Anonymous(), "/login", "en"); code != 200 {
		t.Errorf("login page: %d", code)
	} else if page, _ := pageShellOf(t, body); page != "login" {
		t.Errorf("the login page draws page %q", page)
	}
	if code, body := get(alice, "/", "en"); code != 200 || !slices.ContainsFunc(readAppListData(t, body).Apps, func(a listedApp) bool { return a.AppID == "demo" }) {
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
	chatPage := func(c *enginetest.Client) chatPageData {
		t.Helper()
		resp := c.Do(t, "GET", "/apps/demo/chat/new", nil)
		code, body := get(c, resp.Header.Get("Location"), "en")
		data := readPageData(t, body)
		if code != 200 || !data.Own {
			t.Fatalf("the new chat's page (%d, %s) is not the caller's own chat", code, resp.Header.Get("Location"))
		}
		return data
	}
	if !chatPage(admin).RunDetails {
		t.Errorf("the app's owner is not shown run details")
	}
	if chatPage(alice).RunDetails {
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
	// The page hands the chat to its script as JSON inside a <script>
	// element: nothing in it may end that element or open a tag.
	for _, raw := range []string{"<script>alert", "<b>hi</b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the chat page contains %q unescaped", raw)
		}
	}
	data := readPageData(t, body)
	if len(data.Items) != 2 || data.Items[0].Role != "user" || !strings.Contains(data.Items[0].Text, "<b>hi</b>") ||
		!strings.Contains(data.Items[1].Text, "<script>alert(1)</script>") {
		t.Fatalf("the page's history is not the question and its answer: %+v", data.Items)
	}
	if calls := data.Items[1].Calls; len(calls) != 1 || calls[0].Status != "success" || calls[0].Command != "echo '<script>alert(1)</script>'" {
		t.Errorf("the answer's tool call is not the command's: %+v", calls)
	}
	if data.Items[1].Responses != nil {
		t.Errorf("a user of another's app gets its nodes' responses")
	}
	// A title that tries to end the data's element stays data.
	title := "</script><script>alert(1)</script>"
	if resp := alice.Do(t, "PATCH", "/api/apps/demo/chats/"+chat, map[string]string{"title": title}); resp.Status != 200 {
		t.Fatalf("renaming the chat: %d %s", resp.Status, resp.Body)
	}
	_, body = get(alice, "/apps/demo/chat/"+chat, "en")
	if strings.Contains(body, "<script>alert") || strings.Count(body, "</script>") != strings.Count(body, "<script") {
		t.Errorf("the chat's title ends its element:\n%s", body)
	}
	if data := readPageData(t, body); data.Title != title {
		t.Errorf("the page's title is %q, want %q", data.Title, title)
	}
	// Chat ids are scoped per app and user: bob's page of that id is a
	// new chat of his own; naming alice's by her user is refused.
	if code, body := get(bob, "/apps/demo/chat/"+chat, "en"); code != 200 || len(readPageData(t, body).Items) != 0 || !readPageData(t, body).Own {
		t.Errorf("bob's chat of alice's chat id: %d, want a new chat of his own", code)
	}
	if code, _ := get(bob, "/apps/demo/chat/"+chat+"?userId="+aliceID, "en"); code != 404 {
		t.Errorf("another user's chat page: %d, want 404", code)
	}
	// An admin reads it, with no input: messages go to one's own chats.
	// (The browser tests check the note the page shows instead.)
	for _, lang := range []string{"en", "zh"} {
		code, body := get(admin, "/apps/demo/chat/"+chat+"?userId="+aliceID, lang)
		data := readPageData(t, body)
		if code != 200 || data.Own || data.UserID != aliceID || len(data.Items) != 2 || !strings.Contains(data.Items[0].Text, "<b>hi</b>") ||
			!strings.Contains(body, `<html lang="`+lang+`">`) || data.Files != "read" {
			t.Errorf("an admin's view of the chat in %s: %d %+v", lang, code, data)
		}
	}
}

// chatPageData is the part of the chat page's data (web/ui/chat.go)
// the tests read.
type chatPageData struct {
	AppID      string `json:"appId"`
	ChatID     string `json:"chatId"`
	Title      string `json:"title"`
	Own        bool   `json:"own"`
	UserID     string `json:"userId"`
	Files      string `json:"files"`
	ShowTools  bool   `json:"showTools"`
	RunDetails bool   `json:"runDetails"`
	Terminal   bool   `json:"terminal"`
	Variables  []struct {
		Key string `json:"key"`
	} `json:"variables"`
	Items []struct {
		Role  string `json:"role"`
		Text  string `json:"text"`
		Calls []struct {
			Status  string `json:"status"`
			Command string `json:"command"`
		} `json:"calls"`
		Responses json.RawMessage   `json:"responses"`
		Questions []json.RawMessage `json:"questions"`
	} `json:"items"`
}

// readPageData reads the chat page's data from its
// <script type="application/json" id="page-data"> element.
func readPageData(t *testing.T, page string) chatPageData {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="page-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no page data:\n%s", page)
	}
	var data chatPageData
	if err := json.Unmarshal([]byte(m[1]), &data); err != nil {
		t.Fatalf("the page's data: %v\n%s", err, m[1])
	}
	return data
}

// listedApp is one app of the app list's data (web/ui/ui.go appsPage).
type listedApp struct {
	AppID   string `json:"appId"`
	Name    string `json:"name"`
	OwnerID string `json:"ownerId"`
	Public  bool   `json:"public"`
}

// readAppListData reads the app list page's data: the page's own part of
// its <script type="application/json" id="page-data"> element.
func readAppListData(t *testing.T, page string) (data struct{ Apps []listedApp }) {
	t.Helper()
	name, raw := pageShellOf(t, page)
	if name != "apps" {
		t.Fatalf("the page is %q, want the app list", name)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatalf("the app list's data: %v\n%s", err, raw)
	}
	return data
}

// pageShellOf reads which page of the browser app (app/src/pages) a page
// is, and its own data, from its <script type="application/json"
// id="page-data"> element.
func pageShellOf(t *testing.T, page string) (string, json.RawMessage) {
	t.Helper()
	m := regexp.MustCompile(`<script type="application/json" id="page-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no page data:\n%s", page)
	}
	var shell struct {
		Page string
		Data json.RawMessage
	}
	if err := json.Unmarshal([]byte(m[1]), &shell); err != nil {
		t.Fatalf("the page's data: %v\n%s", err, m[1])
	}
	return shell.Page, shell.Data
}

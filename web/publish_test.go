package web_test

// Publishing an app, through the product as engine serve builds it: app
// keys bound to one app, and share links whose visitors chat without an
// account, each in chats and sandboxes of their own.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/visitor"
)

// expect sends a request and fails the test unless the status is want.
func expect(t *testing.T, c *enginetest.Client, method, path string, body any, want int) enginetest.Response {
	t.Helper()
	resp := c.Do(t, method, path, body)
	if resp.Status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.Status, clip(resp.Body), want)
	}
	return resp
}

// newApp makes an app of the client's caller with the demo graph (a
// message "$ cmd" runs cmd in the chat's sandbox).
func newApp(t *testing.T, c *enginetest.Client, name string) string {
	t.Helper()
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, c, "POST", "/api/apps", map[string]any{"name": name, "public": false, "graph": apps.DemoGraph()}, 201).JSON(t, &app)
	return app.ID
}

// scriptedApp makes an app of the client's caller whose agent talks to
// the scripted model (llmtest) the engine was started with; inputs sets
// more of the agent node's inputs, each as JSON.
func scriptedApp(t *testing.T, c *enginetest.Client, name string, inputs map[string]string) string {
	t.Helper()
	graph := apps.DemoGraph()
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	for k, v := range inputs {
		graph.Nodes[1].Inputs[k] = json.RawMessage(v)
	}
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, c, "POST", "/api/apps", map[string]any{"name": name, "public": false, "graph": graph}, 201).JSON(t, &app)
	return app.ID
}

// sendTurn sends one user message to the chat API at path and returns the
// chat id and the answer.
func sendTurn(t *testing.T, c *enginetest.Client, path string, body map[string]any, want int) (chatID, answer string) {
	t.Helper()
	resp := expect(t, c, "POST", path, body, want)
	if want != 200 {
		return "", string(resp.Body)
	}
	var out struct {
		ID      string
		Choices []struct{ Message struct{ Content string } }
	}
	resp.JSON(t, &out)
	if len(out.Choices) == 0 {
		t.Fatalf("no answer in %s", resp.Body)
	}
	return out.ID, out.Choices[0].Message.Content
}

// chatOf finds the one chat of app whose chat id is chatID, whoever's it
// is (chat ids are scoped per app and user; a test that made one chat
// under an id finds exactly one).
func chatOf(t *testing.T, env *enginetest.Env, appID, chatID string) history.Chat {
	t.Helper()
	list, err := env.Engine.Chats.List(t.Context(), appID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []history.Chat
	for _, c := range list {
		if c.ID == chatID {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d chats %q in app %s, want one: %+v", len(found), chatID, appID, found)
	}
	return found[0]
}

func message(text string) []map[string]string {
	return []map[string]string{{"role": "user", "content": text}}
}

func TestAppKeys(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	bound, other := newApp(t, alice, "published"), newApp(t, alice, "private")

	// Only the app's owner (and admins) publish it.
	expect(t, bob, "POST", "/api/apps/"+bound+"/keys", map[string]any{"name": "bob's"}, 404)
	expect(t, alice, "POST", "/api/apps/"+bound+"/keys", map[string]any{"name": ""}, 400)
	expect(t, alice, "POST", "/api/apps/"+bound+"/keys", map[string]any{"name": "past", "expiresAt": "2020-01-01T00:00:00Z"}, 400)
	var made struct {
		Key, ID, Prefix, AppID string
	}
	expect(t, alice, "POST", "/api/apps/"+bound+"/keys", map[string]any{"name": "website"}, 201).JSON(t, &made)
	if made.AppID != bound || !strings.HasPrefix(made.Key, made.Prefix) || made.ID == "" {
		t.Fatalf("made %+v", made)
	}
	list := expect(t, alice, "GET", "/api/apps/"+bound+"/keys", nil, 200)
	if !strings.Contains(string(list.Body), made.Prefix) || strings.Contains(string(list.Body), made.Key) {
		t.Errorf("the app's keys: %s; want the key by prefix, never its secret", list.Body)
	}
	if personal := expect(t, alice, "GET", "/api/keys", nil, 200); strings.Contains(string(personal.Body), made.Prefix) {
		t.Errorf("an app key is listed among alice's own keys: %s", personal.Body)
	}

	key := env.Bearer(made.Key)
	// The chat API: the key's app whatever the request names; customUid
	// names an end user of the app's own.
	chatID, answer := sendTurn(t, key, "/api/v1/chat/completions", map[string]any{"appId": other, "customUid": "visitor-7",
		"messages": message("$ echo from-a-program > note.txt && cat note.txt")}, 200)
	if !strings.Contains(answer, "from-a-program") {
		t.Fatalf("answer: %q", answer)
	}
	chat, err := env.Engine.Chats.Get(context.Background(), sandbox.Scope{AppID: bound, UserID: "app:" + bound + ":visitor-7", ChatID: chatID})
	if err != nil || chat.AppID != bound || chat.UserID != "app:"+bound+":visitor-7" {
		t.Fatalf("the chat: %+v, %v; want app %s, user app:%s:visitor-7", chat, err, bound, bound)
	}
	// Chat management and files of its app.
	if resp := expect(t, key, "GET", "/api/apps/"+bound+"/chats", nil, 200); !strings.Contains(string(resp.Body), chatID) {
		t.Errorf("the app's chats through its key: %s", resp.Body)
	}
	// The key names its end user with customUid, or with userId as its
	// chat list shows them; without either, its "api" user's chat of
	// that id, which does not exist.
	expect(t, key, "GET", "/api/apps/"+bound+"/chats/"+chatID+"?customUid=visitor-7", nil, 200)
	expect(t, key, "GET", "/api/apps/"+bound+"/chats/"+chatID+"?userId=app:"+bound+":visitor-7", nil, 200)
	expect(t, key, "GET", "/api/apps/"+bound+"/chats/"+chatID, nil, 404)
	expect(t, key, "PATCH", "/api/apps/"+bound+"/chats/"+chatID+"?customUid=visitor-7", map[string]any{"title": "renamed by the program"}, 200)
	read := expect(t, key, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": bound, "chatId": chatID, "customUid": "visitor-7", "path": "note.txt"}, 200)
	if !strings.Contains(string(read.Body), "from-a-program") {
		t.Errorf("read through the key: %s", read.Body)
	}
	// Nothing else: not the other app, not the account's routes.
	expect(t, key, "GET", "/api/apps/"+other+"/chats", nil, 404)
	expect(t, key, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "list", "appId": other, "chatId": chatID, "path": "/workspace"}, 404)
	for _, r := range [][2]string{{"GET", "/api/apps"}, {"GET", "/api/me"}, {"GET", "/api/keys"}, {"GET", "/api/apps/" + bound},
		{"GET", "/api/apps/" + bound + "/keys"}, {"DELETE", "/api/apps/" + bound}} {
		if resp := key.Do(t, r[0], r[1], nil); resp.Status != 403 || !strings.Contains(string(resp.Body), "app key") {
			t.Errorf("%s %s with an app key: %d %s, want 403 saying what an app key reaches", r[0], r[1], resp.Status, resp.Body)
		}
	}
	expect(t, key, "GET", "/admin/api/users", nil, 403)
	// The owner reads the program's chat like any chat of the app.
	expect(t, alice, "GET", "/api/apps/"+bound+"/chats/"+chatID+"?userId=app:"+bound+":visitor-7", nil, 200)

	// A key with an expiry stops when it passes; a revoked key at once.
	var brief struct{ Key string }
	expect(t, alice, "POST", "/api/apps/"+bound+"/keys", map[string]any{"name": "brief", "expiresAt": time.Now().Add(1500 * time.Millisecond).Format(time.RFC3339Nano)}, 201).JSON(t, &brief)
	expect(t, env.Bearer(brief.Key), "GET", "/api/apps/"+bound+"/chats", nil, 200)
	waitUntil(t, "the brief key expires", func() bool {
		resp := env.Bearer(brief.Key).Do(t, "GET", "/api/apps/"+bound+"/chats", nil)
		return resp.Status == 401 && strings.Contains(string(resp.Body), "expired")
	})
	expect(t, bob, "DELETE", "/api/apps/"+bound+"/keys/"+made.ID, nil, 404)
	expect(t, alice, "DELETE", "/api/apps/"+bound+"/keys/"+made.ID, nil, 200)
	expect(t, key, "GET", "/api/apps/"+bound+"/chats", nil, 401)
	expect(t, alice, "DELETE", "/api/apps/"+bound+"/keys/"+made.ID, nil, 404)

	// Keys go with their app.
	var last struct{ Key string }
	expect(t, alice, "POST", "/api/apps/"+other+"/keys", map[string]any{"name": "last"}, 201).JSON(t, &last)
	expect(t, env.Bearer(last.Key), "GET", "/api/apps/"+other+"/chats", nil, 200)
	expect(t, alice, "DELETE", "/api/apps/"+other, nil, 202)
	expect(t, env.Bearer(last.Key), "GET", "/api/apps/"+other+"/chats", nil, 401)
}

// waitUntil polls cond for up to ten seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// visit opens a share link (path with its query) as a new browser and
// returns the browser, signed in as a visitor, with the page's CSRF token.
func visit(t *testing.T, env *enginetest.Env, path string) *enginetest.Client {
	t.Helper()
	v := env.Anonymous()
	resp := v.Do(t, "GET", path, nil)
	if resp.Status != http.StatusSeeOther {
		t.Fatalf("open %s: %d %s, want 303 with a visitor cookie", path, resp.Status, clip(resp.Body))
	}
	return revisit(t, v, resp.Header.Get("Location"))
}

// revisit loads a share page with the visitor's cookie and takes its CSRF
// token.
func revisit(t *testing.T, v *enginetest.Client, path string) *enginetest.Client {
	t.Helper()
	resp := expect(t, v, "GET", path, nil, 200)
	m := csrfMeta.FindSubmatch(resp.Body)
	if m == nil || len(m[1]) == 0 {
		t.Fatalf("no CSRF token in the share page %s", clip(resp.Body))
	}
	v.CSRF = string(m[1])
	return v
}

type link struct {
	ID, URL   string
	Runs      int
	MaxRuns   int
	ShowTools bool
	Files     string
}

func newLink(t *testing.T, owner *enginetest.Client, appID string, spec map[string]any) link {
	t.Helper()
	var l link
	expect(t, owner, "POST", "/api/apps/"+appID+"/links", spec, 201).JSON(t, &l)
	if l.URL != "/share/"+l.ID {
		t.Fatalf("link %+v", l)
	}
	return l
}

func TestShareLinks(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	appID := newApp(t, alice, "published")

	expect(t, bob, "POST", "/api/apps/"+appID+"/links", map[string]any{"name": "bob's"}, 404)
	for _, bad := range []map[string]any{{"name": ""}, {"name": "x", "files": "everything"}, {"name": "x", "maxRuns": -1},
		{"name": "x", "hookUrl": "ftp://example.com"}, {"name": "x", "expiresAt": "2020-01-01T00:00:00Z"}} {
		expect(t, alice, "POST", "/api/apps/"+appID+"/links", bad, 400)
	}
	l := newLink(t, alice, appID, map[string]any{"name": "website", "showTools": true, "files": "read", "maxRuns": 3})

	// Two visitors, each with chats and a sandbox of their own.
	first, second := visit(t, env, l.URL), visit(t, env, l.URL)
	api := l.URL + "/api/v1/chat/completions"
	chatID, answer := sendTurn(t, first, api, map[string]any{"appId": "ignored", "messages": message("$ echo visitor-one-secret > mine.txt && cat mine.txt")}, 200)
	if !strings.Contains(answer, "visitor-one-secret") {
		t.Fatalf("the first visitor's answer: %q", answer)
	}
	chat := chatOf(t, env, appID, chatID)
	if chat.AppID != appID || !strings.HasPrefix(chat.UserID, "share:"+l.ID+":") {
		t.Fatalf("the visitor's chat: %+v", chat)
	}
	if page := expect(t, first, "GET", l.URL, nil, 200); !strings.Contains(string(page.Body), chatID) {
		t.Errorf("the first visitor's chat list lacks their chat")
	}
	expect(t, first, "GET", l.URL+"/chat/"+chatID, nil, 200)
	read := map[string]any{"action": "read", "appId": appID, "chatId": chatID, "path": "mine.txt"}
	expect(t, first, "POST", l.URL+"/api/core/ai/sandbox/file", read, 200)

	// The second visitor reaches none of it.
	if page := expect(t, second, "GET", l.URL, nil, 200); strings.Contains(string(page.Body), chatID) {
		t.Errorf("the second visitor's chat list shows the first one's chat")
	}
	// The same chat id names the second visitor's own chat (chat ids are
	// scoped per app and user), which holds none of the first's; naming
	// the first visitor is refused.
	firstID := chatOf(t, env, appID, chatID).UserID
	if page := expect(t, second, "GET", l.URL+"/chat/"+chatID, nil, 200); strings.Contains(string(page.Body), "visitor-one-secret") {
		t.Errorf("the second visitor's chat of the first one's id shows the first one's turn")
	}
	expect(t, second, "GET", l.URL+"/chat/"+chatID+"?userId="+url.QueryEscape(firstID), nil, 404)
	expect(t, second, "POST", l.URL+"/api/core/ai/sandbox/file", read, 404)
	named := map[string]any{"action": "read", "appId": appID, "chatId": chatID, "userId": firstID, "path": "mine.txt"}
	expect(t, second, "POST", l.URL+"/api/core/ai/sandbox/file", named, 404)
	expect(t, second, "POST", l.URL+"/api/core/ai/sandbox/download", named, 404)
	// Nor do visitors reach the signed-in users' API with their cookie.
	expect(t, second, "GET", "/api/apps/"+appID+"/chats", nil, 401)
	expect(t, second, "POST", "/api/v1/chat/completions", map[string]any{"appId": appID, "messages": message("hi")}, 401)

	// The link's choices: files read-only; changes need the CSRF token.
	write := map[string]any{"action": "write", "appId": appID, "chatId": chatID, "path": "mine.txt", "content": "changed"}
	if resp := expect(t, first, "POST", l.URL+"/api/core/ai/sandbox/file", write, 403); !strings.Contains(string(resp.Body), "read-only") {
		t.Errorf("a write on a read-only link: %s", resp.Body)
	}
	noCSRF := *first
	noCSRF.CSRF = ""
	expect(t, &noCSRF, "POST", api, map[string]any{"messages": message("hi")}, 403)

	// The cap of runs: 3 in all, the first visitor used 1.
	sendTurn(t, second, api, map[string]any{"messages": message("hello")}, 200)
	sendTurn(t, first, api, map[string]any{"chatId": chatID, "messages": message("hello again")}, 200)
	if _, refusal := sendTurn(t, second, api, map[string]any{"messages": message("one more")}, 429); !strings.Contains(refusal, "used all its 3 runs") {
		t.Errorf("past the cap: %s", refusal)
	}
	var links struct{ Links []link }
	expect(t, alice, "GET", "/api/apps/"+appID+"/links", nil, 200).JSON(t, &links)
	if len(links.Links) != 1 || links.Links[0].Runs != 3 {
		t.Errorf("the owner's list: %+v, want one link with 3 runs", links.Links)
	}

	// A visitor session is its link's alone. Browsers send the cookie to
	// its link's path only; sent to another link of the app by hand, it
	// opens nothing there (a new visitor is made instead).
	other := newLink(t, alice, appID, map[string]any{"name": "other"})
	u, _ := url.Parse(env.URL + l.URL)
	var token string
	for _, ck := range first.HTTP.Jar.Cookies(u) {
		if ck.Name == visitor.Cookie {
			token = ck.Value
		}
	}
	if token == "" {
		t.Fatal("the first visitor has no session cookie")
	}
	stray := env.Anonymous()
	stray.Header = http.Header{"Cookie": {visitor.Cookie + "=" + token}}
	if resp := stray.Do(t, "GET", other.URL, nil); resp.Status != http.StatusSeeOther {
		t.Errorf("another link's page with the first visitor's cookie: %d, want 303 to a new visitor session", resp.Status)
	}
	expect(t, stray, "POST", other.URL+"/api/core/ai/sandbox/file", read, 401)

	// Revoked: refused at once; the chats stay for the owner.
	expect(t, alice, "DELETE", "/api/apps/"+appID+"/links/"+l.ID, nil, 200)
	expect(t, first, "GET", l.URL, nil, 404)
	expect(t, first, "POST", l.URL+"/api/core/ai/sandbox/file", read, 404)
	expect(t, alice, "GET", "/api/apps/"+appID+"/chats/"+chatID+"?userId="+url.QueryEscape(firstID), nil, 200)
	expect(t, env.Anonymous(), "GET", "/share/no-such-link", nil, 404)
}

func TestShareLinkChoices(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID := newApp(t, alice, "published")

	// Tool cards and files hidden: the stream carries the answer only and
	// the file API is closed.
	hidden := newLink(t, alice, appID, map[string]any{"name": "answers only", "showTools": false, "files": "hidden"})
	v := visit(t, env, hidden.URL)
	resp := expect(t, v, "POST", hidden.URL+"/api/v1/chat/completions", map[string]any{"stream": true, "detail": true,
		"messages": message("$ echo hidden-card")}, 200)
	body := string(resp.Body)
	if strings.Contains(body, "event: toolCall") || strings.Contains(body, "event: toolResponse") || !strings.Contains(body, "hidden-card") {
		t.Errorf("a link without tool cards streamed:\n%s", clip(resp.Body))
	}
	chatID := regexp.MustCompile(`"id":"([0-9a-f]+)"`).FindStringSubmatch(body)
	if chatID == nil {
		t.Fatalf("no chat id in the stream %s", clip(resp.Body))
	}
	page := expect(t, v, "GET", hidden.URL+"/chat/"+chatID[1], nil, 200)
	if data := readPageData(t, string(page.Body)); data.ShowTools || data.Files != "" || len(data.Items) != 2 || data.Items[1].Calls != nil {
		t.Errorf("the page of a link without cards and files shows them: %+v", data)
	}
	list := map[string]any{"action": "list", "appId": appID, "chatId": chatID[1], "path": "/workspace"}
	expect(t, v, "POST", hidden.URL+"/api/core/ai/sandbox/file", list, 403)

	// Each visitor's rate.
	slow := newLink(t, alice, appID, map[string]any{"name": "slow", "ratePerMinute": 1, "files": "write"})
	s := visit(t, env, slow.URL)
	expect(t, s, "POST", slow.URL+"/api/core/ai/sandbox/file", map[string]any{"action": "list", "appId": appID, "chatId": "fresh", "path": "/workspace"}, 200)
	if resp := s.Do(t, "POST", slow.URL+"/api/core/ai/sandbox/file", list); resp.Status != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the visitor's rate: %d %s", resp.Status, resp.Body)
	}
	// Another visitor has a bucket of their own.
	expect(t, visit(t, env, slow.URL), "POST", slow.URL+"/api/core/ai/sandbox/file", map[string]any{"action": "list", "appId": appID, "chatId": "fresh2", "path": "/workspace"}, 200)

	// Expiry: the link stops when it passes.
	brief := newLink(t, alice, appID, map[string]any{"name": "brief", "expiresAt": time.Now().Add(1500 * time.Millisecond).Format(time.RFC3339Nano)})
	b := visit(t, env, brief.URL)
	waitUntil(t, "the link expires", func() bool {
		resp := b.Do(t, "GET", brief.URL, nil)
		return resp.Status == http.StatusGone && strings.Contains(string(resp.Body), "expired")
	})
	expect(t, b, "POST", brief.URL+"/api/v1/chat/completions", map[string]any{"messages": message("hi")}, 410)
}

func TestShareLinkIdentityHook(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Token string }
		if r.Method != "POST" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		seen = append(seen, body.Token)
		mu.Unlock()
		switch body.Token {
		case "token-of-zoe":
			json.NewEncoder(w).Encode(map[string]string{"uid": "zoe"})
		case "fastgpt-style":
			json.NewEncoder(w).Encode(map[string]any{"success": true, "data": map[string]string{"uid": "yan"}})
		default:
			http.Error(w, `{"message":"unknown token"}`, 403)
		}
	}))
	t.Cleanup(hook.Close)
	// The hook is on loopback: allowed as an operator would.
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_OUTBOUND_ALLOW": hook.Listener.Addr().String()}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID := newApp(t, alice, "published")
	l := newLink(t, alice, appID, map[string]any{"name": "members", "hookUrl": hook.URL + "/check"})

	if resp := expect(t, env.Anonymous(), "GET", l.URL, nil, 401); !strings.Contains(string(resp.Body), "token") {
		t.Errorf("no token: %s", resp.Body)
	}
	if resp := expect(t, env.Anonymous(), "GET", l.URL+"?token=forged", nil, 403); !strings.Contains(string(resp.Body), "did not accept") {
		t.Errorf("a refused token: %s", resp.Body)
	}
	// The hook's uid names the visitor: the same person on two browsers
	// has the same chats.
	zoe := visit(t, env, l.URL+"?token=token-of-zoe")
	chatID, _ := sendTurn(t, zoe, l.URL+"/api/v1/chat/completions", map[string]any{"messages": message("$ echo hi")}, 200)
	if chat := chatOf(t, env, appID, chatID); chat.UserID != "share:"+l.ID+":zoe" {
		t.Fatalf("zoe's chat: %+v", chat)
	}
	zoeAgain := visit(t, env, l.URL+"?token=token-of-zoe")
	expect(t, zoeAgain, "GET", l.URL+"/chat/"+chatID, nil, 200)
	yan := visit(t, env, l.URL+"?token=fastgpt-style")
	expect(t, yan, "GET", l.URL+"/chat/"+chatID+"?userId="+url.QueryEscape("share:"+l.ID+":zoe"), nil, 404)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Errorf("the hook was asked %d times (%v), want 4", len(seen), seen)
	}
}

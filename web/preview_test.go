package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/preview"
)

// TestPreviewLinks (L2): a server the agent starts in the background is
// reached through the link its sandbox_process "link" action gives, over
// HTTP and WebSocket, in the sandbox that has no network; the page runs
// in an opaque origin and never sees the engine's cookies. The link is
// the chat owner's alone until shared; a token of another port or chat is
// refused; a port nothing listens on says so; revoking ends it; a request
// to a stopped sandbox starts it again.
func TestPreviewLinks(t *testing.T) {
	t.Parallel()
	srv := newPreviewServer(t)
	call := func(id, tool, args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(id, tool, args)}}
	}
	setup := "mkdir -p site && echo '<h1>hello preview</h1>' > site/index.html && echo 'h1 { color: red }' > site/style.css && " + srv.write
	model := llmtest.New(t,
		call("c1", "sandbox_shell", mustJSON(t, map[string]string{"command": setup})),
		call("c2", "sandbox_process", mustJSON(t, map[string]string{"action": "start", "command": srv.start})),
		call("c3", "sandbox_shell", mustJSON(t, map[string]string{"command": srv.wait})),
		call("c4", "sandbox_process", `{"action":"link","port":8765}`),
		call("c5", "sandbox_process", `{"action":"link","port":8766}`),
		llmtest.Reply{Text: "open it"},
	)
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	danaID := env.CreateUser(t, "dana", auth.RoleUser)
	dana := env.Login(t, "dana", enginetest.Password("dana"))
	env.CreateUser(t, "eve", auth.RoleUser)
	eve := env.Login(t, "eve", enginetest.Password("eve"))
	anon := env.Anonymous()
	appID := scriptedApp(t, dana, "site", nil)
	chatID, _ := sendTurn(t, dana, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "pv-1", "messages": message("serve it")}, 200)

	statuses, responses := toolStatuses(t, dana, appID, chatID)
	if len(statuses) != 5 || !strings.Contains(responses[2], "up") {
		t.Fatalf("tool calls %v %v", statuses, responses)
	}
	var got struct {
		Link      string
		Listening bool
		Note      string
	}
	if err := json.Unmarshal([]byte(responses[3]), &got); err != nil || !got.Listening || !strings.HasPrefix(got.Link, "/preview/") {
		t.Fatalf("link 8765: %s (%v)", responses[3], err)
	}
	link := got.Link
	var closed struct {
		Link      string
		Listening bool
		Note      string
	}
	if err := json.Unmarshal([]byte(responses[4]), &closed); err != nil || closed.Listening || !strings.Contains(closed.Note, "nothing listens on port 8766") {
		t.Fatalf("link 8766: %s (%v)", responses[4], err)
	}

	// Not shared: anonymous callers and other users are refused; the
	// owner, signed in, is sent on with a grant.
	for who, c := range map[string]*enginetest.Client{"anonymous": anon, "eve": eve} {
		if r := c.Do(t, "GET", link, nil); r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "not shared") {
			t.Errorf("%s opens the owner's link: %d %s", who, r.Status, clip(r.Body))
		}
	}
	r := dana.Do(t, "GET", link+"site/?q=1", nil)
	granted := r.Header.Get("Location")
	if r.Status != http.StatusFound || !strings.HasPrefix(granted, strings.TrimSuffix(link, "/")+"~") || !strings.HasSuffix(granted, "/site/?q=1") {
		t.Fatalf("the owner's open: %d to %q", r.Status, granted)
	}
	grantPath := strings.TrimSuffix(granted, "site/?q=1")
	// The grant works for whoever holds it, as the pages' own requests
	// need: they carry no cookie.
	page := anon.Do(t, "GET", grantPath+"site/", nil)
	if page.Status != 200 || !strings.Contains(string(page.Body), "hello preview") {
		t.Fatalf("the page: %d %s", page.Status, clip(page.Body))
	}
	if csp := page.Header.Get("Content-Security-Policy"); csp != preview.Policy {
		t.Errorf("the page's policy is %q, want %q", csp, preview.Policy)
	}
	// The program sees none of the engine's cookies or credentials, and
	// sets none on the engine's host.
	h := dana.Do(t, "GET", grantPath+"headers", nil)
	if h.Status != 200 || strings.Contains(string(h.Body), "flowbox_session") || strings.Contains(strings.ToLower(string(h.Body)), "x-csrf-token") ||
		!strings.Contains(string(h.Body), "Host: localhost:8765") {
		t.Errorf("the program saw: %s", h.Body)
	}
	if h.Header.Get("Set-Cookie") != "" {
		t.Errorf("the program set a cookie on the engine's host: %q", h.Header.Get("Set-Cookie"))
	}

	// WebSocket, through the same link.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(env.URL, "http")+grantPath+"ws", nil)
	if err != nil {
		t.Fatalf("WebSocket: %v", err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || string(msg) != "echo: ping" {
		t.Errorf("WebSocket answered %q, %v", msg, err)
	}
	ws.Close(websocket.StatusNormalClosure, "")

	// Tokens of another port or chat, or a made-up grant, are refused.
	var other struct{ Preview shownPreview }
	expect(t, dana, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "open", "appId": appID, "chatId": chatID, "port": 8766}, 200).JSON(t, &other)
	if r := anon.Do(t, "GET", other.Preview.Open, nil); r.Status != http.StatusBadGateway || !strings.Contains(string(r.Body), "Nothing listens on port 8766") {
		t.Errorf("port 8766: %d %s", r.Status, clip(r.Body))
	}
	token := strings.TrimSuffix(strings.TrimPrefix(link, "/preview/"), "/")
	otherToken := strings.TrimSuffix(strings.TrimPrefix(other.Preview.Path, "/preview/"), "/")
	key8766 := otherToken[:strings.LastIndexByte(otherToken, '-')]
	secret8765 := token[strings.LastIndexByte(token, '-')+1:]
	for _, bad := range []string{"/preview/" + key8766 + "-" + secret8765 + "/", "/preview/" + token + "x/", strings.Replace(grantPath, "~", "~x", 1)} {
		if r := anon.Do(t, "GET", bad, nil); r.Status != http.StatusNotFound && r.Status != http.StatusForbidden {
			t.Errorf("%s: %d, want refused", bad, r.Status)
		}
	}
	expect(t, eve, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "list", "appId": appID, "chatId": chatID}, 404)
	expect(t, eve, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "update", "appId": appID, "chatId": chatID, "port": 8765, "shared": true}, 404)

	// The link to the workspace's files (an HTML file opened rendered):
	// files are read, not run, from /workspace alone, under a policy that
	// loads nothing from elsewhere; for the owner alone until shared.
	previews := "/api/core/ai/sandbox/previews"
	var files struct{ Preview shownPreview }
	expect(t, dana, "POST", previews, map[string]any{"action": "open", "appId": appID, "chatId": chatID, "files": true}, 200).JSON(t, &files)
	if !files.Preview.Files || files.Preview.Port != 0 || files.Preview.Open == "" {
		t.Fatalf("the files link: %+v", files.Preview)
	}
	expect(t, eve, "POST", previews, map[string]any{"action": "open", "appId": appID, "chatId": chatID, "files": true}, 404)
	expect(t, dana, "POST", previews, map[string]any{"action": "open", "appId": appID, "chatId": chatID, "files": true, "port": 8765}, 400)
	if r := anon.Do(t, "GET", files.Preview.Path+"site/", nil); r.Status != http.StatusForbidden {
		t.Errorf("the owner's files link without a grant: %d", r.Status)
	}
	open := files.Preview.Open
	if r := anon.Do(t, "GET", open+"site/", nil); r.Status != 200 || !strings.Contains(string(r.Body), "hello preview") ||
		r.Header.Get("Content-Security-Policy") != preview.FilesPolicy || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("site/ through the files link: %d %q %q %s", r.Status, r.Header.Get("Content-Security-Policy"), r.Header.Get("Content-Type"), clip(r.Body))
	}
	if r := anon.Do(t, "GET", open+"site/style.css", nil); r.Status != 200 || string(r.Body) != "h1 { color: red }\n" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/css") {
		t.Errorf("site/style.css: %d %q %q", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if r := anon.Do(t, "GET", open+"site", nil); r.Status != http.StatusFound || r.Header.Get("Location") != open+"site/" {
		t.Errorf("the folder site: %d to %q", r.Status, r.Header.Get("Location"))
	}
	for _, p := range []string{"nothing.html", "site/../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd"} {
		if r := anon.Do(t, "GET", open+p, nil); r.Status == 200 || strings.Contains(string(r.Body), "root:") {
			t.Errorf("%s: %d %s", p, r.Status, clip(r.Body))
		}
	}
	if r := anon.Do(t, "POST", open+"site/index.html", nil); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("a POST to a file: %d", r.Status)
	}

	// Shared, anyone with the link may use it; revoked, nobody.
	expect(t, dana, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "update", "appId": appID, "chatId": chatID, "port": 8765, "shared": true}, 200)
	if r := anon.Do(t, "GET", link+"site/", nil); r.Status != 200 || !strings.Contains(string(r.Body), "hello preview") {
		t.Errorf("a shared link: %d %s", r.Status, clip(r.Body))
	}
	var list struct{ Previews []shownPreview }
	expect(t, dana, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "list", "appId": appID, "chatId": chatID}, 200).JSON(t, &list)
	if len(list.Previews) != 3 {
		t.Errorf("listed %+v, want the links to the files, 8765 and 8766", list.Previews)
	}
	expect(t, dana, "POST", "/api/core/ai/sandbox/previews", map[string]any{"action": "revoke", "appId": appID, "chatId": chatID, "port": 8765}, 200)
	if r := anon.Do(t, "GET", link+"site/", nil); r.Status != http.StatusNotFound {
		t.Errorf("a revoked link: %d", r.Status)
	}

	// Wake-on-request: a request to a stopped sandbox starts it, and
	// says that nothing listens (its server ended with the stop).
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	id := sandbox.Scope{AppID: appID, UserID: danaID, ChatID: chatID}.SandboxID()
	expect(t, admin, "POST", "/admin/api/sandboxes/"+id+"/stop", nil, 200)
	status := func() string {
		var s struct{ Status string }
		expect(t, dana, "POST", "/api/core/ai/sandbox/status", map[string]any{"appId": appID, "chatId": chatID}, 200).JSON(t, &s)
		return s.Status
	}
	if s := status(); s != string(sandbox.StatusStopped) {
		t.Fatalf("after the stop the sandbox is %q", s)
	}
	if r := anon.Do(t, "GET", other.Preview.Open, nil); r.Status != http.StatusBadGateway || !strings.Contains(string(r.Body), "Nothing listens on port 8766") {
		t.Errorf("a stopped sandbox's link: %d %s", r.Status, clip(r.Body))
	}
	if s := status(); s != string(sandbox.StatusRunning) {
		t.Errorf("after a request the sandbox is %q, want running", s)
	}
}

// shownPreview is a preview link as the previews API shows it.
type shownPreview struct {
	Port   int
	Files  bool
	Path   string
	Open   string
	Shared bool
}

// previewServer is testdata/preview/server.py as a sandbox's commands:
// write puts it at /workspace/server.py, start serves the work
// directory's site/ on port 8765 (a background command), and wait
// prints "up" once it listens (exit 1 after 10 s).
type previewServer struct{ write, start, wait string }

func newPreviewServer(t testing.TB) previewServer {
	t.Helper()
	server, err := os.ReadFile("testdata/preview/server.py")
	if err != nil {
		t.Fatal(err)
	}
	return previewServer{
		write: "cat > /workspace/server.py <<'EOF'\n" + string(server) + "EOF\n",
		start: "exec python3 /workspace/server.py 8765",
		wait:  `for i in $(seq 200); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8765))' 2>/dev/null && echo up && exit 0; sleep 0.05; done; exit 1`,
	}
}

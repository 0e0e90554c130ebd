package web_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// dialTerminal opens the chat's terminal as c, with origin as the page's
// Origin ("" for the engine's own).
func dialTerminal(ctx context.Context, env *enginetest.Env, c *enginetest.Client, appID, chatID, origin string) (*websocket.Conn, *http.Response, error) {
	return dialTerminalAt(ctx, env, c, "", appID, chatID, origin)
}

// dialTerminalAt is dialTerminal below base: a share link's path for its
// visitors.
func dialTerminalAt(ctx context.Context, env *enginetest.Env, c *enginetest.Client, base, appID, chatID, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	u, _ := url.Parse(env.URL + base + "/api/")
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		h.Add("Cookie", ck.Name+"="+ck.Value)
	}
	if origin == "" {
		origin = env.URL
	}
	h.Set("Origin", origin)
	q := url.Values{"appId": {appID}, "chatId": {chatID}, "cols": {"80"}, "rows": {"24"}}
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(env.URL, "http")+base+"/api/core/ai/sandbox/terminal?"+q.Encode(), &websocket.DialOptions{HTTPHeader: h})
}

// readUntil reads the terminal's output until it holds want.
func readUntil(ctx context.Context, t testing.TB, ws *websocket.Conn, want string) string {
	t.Helper()
	var got bytes.Buffer
	for !strings.Contains(got.String(), want) {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the terminal never showed %q (%v); it showed %q", want, err, got.String())
		}
		if typ == websocket.MessageBinary {
			got.Write(data)
		}
	}
	return got.String()
}

// TestTerminalAccess (L1): the chat's owner opens its terminal; another
// user cannot, nor can another site's page with the owner's cookie; the
// session is audited when it ends; an app's builder turns them off and
// on; a share link's visitor opens one where the link allows it; a
// policy that asks for transcripts gets them, redacted; an engine with
// terminals off opens none.
func TestTerminalAccess(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "tm-dana", auth.RoleUser)
	dana := env.Login(t, "tm-dana", enginetest.Password("tm-dana"))
	env.CreateUser(t, "tm-eve", auth.RoleUser)
	eve := env.Login(t, "tm-eve", enginetest.Password("tm-eve"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	ws, _, err := dialTerminal(ctx, env, dana, "demo", "tm-1", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo owner-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(ctx, t, ws, "owner-42")
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("exit 5\r")); err != nil {
		t.Fatal(err)
	}
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no exit message: %v", err)
		}
		if typ == websocket.MessageText {
			if string(data) != `{"code":5,"type":"exit"}` {
				t.Errorf("the end: %s", data)
			}
			break
		}
	}

	if _, resp, err := dialTerminal(ctx, env, dana, "demo", "tm-1", "https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another site's page opened the owner's terminal: %v", err)
	}
	// Eve may name dana's chat; she learns nothing of it.
	if r := eve.Do(t, "GET", "/api/core/ai/sandbox/terminal?appId=demo&chatId=tm-1&userId=u:tm-dana", nil); r.Status != http.StatusNotFound {
		t.Errorf("eve asking for dana's terminal: %d %s", r.Status, r.Body)
	}

	// The session's audit record.
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	waitFor(t, "the terminal's audit record", func() (bool, string) {
		page := getAudit(t, admin, "/admin/api/audit", url.Values{"chat": {"tm-1"}})
		i := slices.IndexFunc(page.Records, func(r auditRecord) bool { return r.Kind == "terminal" })
		if i < 0 {
			return false, "no record"
		}
		r := page.Records[i]
		return r.ActorID == "u:tm-dana" && r.ExitCode == 5 && r.Bytes > 10 && r.StdoutBytes > 10, ""
	})

	// The app's builder turns terminals off, then on again.
	appID := newApp(t, dana, "tm-app")
	expect(t, dana, "PATCH", "/api/apps/"+appID, map[string]any{"terminalOff": true}, 200)
	if r := dana.Do(t, "GET", "/api/core/ai/sandbox/terminal?appId="+appID+"&chatId=tm-2", nil); r.Status != http.StatusForbidden ||
		!strings.Contains(string(r.Body), "turned terminals off") {
		t.Errorf("a terminal of an app that turned them off: %d %s", r.Status, r.Body)
	}
	var got struct {
		TerminalOff bool
		Graph       struct{ Nodes []any }
	}
	expect(t, dana, "GET", "/api/apps/"+appID, nil, 200).JSON(t, &got)
	if !got.TerminalOff || len(got.Graph.Nodes) == 0 {
		t.Errorf("after the switch the app is %+v", got)
	}
	if readPageData(t, string(expect(t, dana, "GET", "/apps/"+appID+"/chat/tm-2", nil, 200).Body)).Terminal {
		t.Error("the chat page offers a terminal the app turned off")
	}
	expect(t, dana, "PATCH", "/api/apps/"+appID, map[string]any{"terminalOff": false}, 200)
	if ws, _, err := dialTerminal(ctx, env, dana, appID, "tm-2", ""); err != nil {
		t.Errorf("a terminal after the app turned them on again: %v", err)
	} else {
		ws.CloseNow()
	}

	// Share links: a terminal needs files read-write; a visitor of a link
	// that allows it opens one into their own chat's sandbox.
	expect(t, dana, "POST", "/api/apps/"+appID+"/links", map[string]any{"name": "read", "files": "read", "terminal": true}, 400)
	var l link
	expect(t, dana, "POST", "/api/apps/"+appID+"/links", map[string]any{"name": "shell", "files": "write", "terminal": true}, 201).JSON(t, &l)
	visitor := visit(t, env, l.URL)
	if !readPageData(t, string(expect(t, visitor, "GET", l.URL+"/chat/tm-v1", nil, 200).Body)).Terminal {
		t.Error("the visitor's chat page offers no terminal, though the link allows it")
	}
	vs, _, err := dialTerminalAt(ctx, env, visitor, l.URL, appID, "tm-v1", "")
	if err != nil {
		t.Fatalf("a visitor's terminal: %v", err)
	}
	if err := vs.Write(ctx, websocket.MessageBinary, []byte("echo visitor-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(ctx, t, vs, "visitor-42")
	vs.CloseNow()

	// An app whose policy asks for transcripts: the session's record
	// keeps what the terminal showed, redacted; other apps' keep none.
	var tapp struct {
		ID string `json:"appId"`
	}
	expect(t, dana, "POST", "/api/apps", map[string]any{"name": "tm-transcript", "graph": withPolicy(`{"terminal": {"transcript": true}}`)}, 201).JSON(t, &tapp)
	ts, _, err := dialTerminal(ctx, env, dana, tapp.ID, "tm-3", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Write(ctx, websocket.MessageBinary, []byte("echo typed-$((6*7)) token=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4Ab3dE6gH9jK2mN5pQ8sT1vW4; exit\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(ctx, t, ts, "typed-42")
	waitFor(t, "the transcript", func() (bool, string) {
		page := getAudit(t, admin, "/admin/api/audit", url.Values{"chat": {"tm-3"}})
		i := slices.IndexFunc(page.Records, func(r auditRecord) bool { return r.Kind == "terminal" })
		if i < 0 {
			return false, "no record"
		}
		tr := page.Records[i].Transcript
		return strings.Contains(tr, "typed-42") && !strings.Contains(tr, "sk-proj-Ab3d") && strings.Contains(tr, "REDACTED"), tr
	})
	if page := getAudit(t, admin, "/admin/api/audit", url.Values{"chat": {"tm-1"}}); len(page.Records) == 0 || page.Records[0].Transcript != "" {
		t.Errorf("a session of an app without transcripts: %+v", page.Records)
	}

	off := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_TERMINAL": "false"}})
	off.CreateUser(t, "tm-dana", auth.RoleUser)
	d := off.Login(t, "tm-dana", enginetest.Password("tm-dana"))
	if _, resp, err := dialTerminal(ctx, off, d, "demo", "tm-1", ""); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("with terminals off: %v", err)
	}
}

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
	h := http.Header{}
	u, _ := url.Parse(env.URL)
	for _, ck := range c.HTTP.Jar.Cookies(u) {
		h.Add("Cookie", ck.Name+"="+ck.Value)
	}
	if origin == "" {
		origin = env.URL
	}
	h.Set("Origin", origin)
	q := url.Values{"appId": {appID}, "chatId": {chatID}, "cols": {"80"}, "rows": {"24"}}
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(env.URL, "http")+"/api/core/ai/sandbox/terminal?"+q.Encode(), &websocket.DialOptions{HTTPHeader: h})
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
// session is audited when it ends; an engine with terminals off opens
// none.
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

	off := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_TERMINAL": "false"}})
	off.CreateUser(t, "tm-dana", auth.RoleUser)
	d := off.Login(t, "tm-dana", enginetest.Password("tm-dana"))
	if _, resp, err := dialTerminal(ctx, off, d, "demo", "tm-1", ""); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("with terminals off: %v", err)
	}
}

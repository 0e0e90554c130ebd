package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPublishTab: an app's Publish page as its owner uses it, opened from
// the canvas. An API key made there is shown once and
// reaches this app on the chat API and no other; a share link made there
// is listed with its address and settings; revoked, both leave the lists
// and the key stops working.
func TestPublishTab(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	tb := e.signIn(t, "alice")
	appID := e.newAppOnCanvas(t, tb, "Support desk")

	// The app's Publish page, linked from the canvas's bar and the app
	// list, opens with its keys and links listed.
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar a[href$="/edit#publish"]`)))
	publish := e.url + "/apps/" + appID + "/edit#publish"
	tb.do(t,
		chromedp.WaitVisible(chromedp.CSS(`#app-keys [data-role=empty]`)),
		chromedp.WaitVisible(chromedp.CSS(`#links [data-role=empty]`)),
	)
	if loc := tb.location(); loc != publish {
		t.Errorf("the canvas's Publish link opened %s, want %s", loc, publish)
	}

	// An API key for the app, with an expiry date and a rate; its secret
	// is shown once, with how to use it.
	expiry := time.Now().AddDate(0, 1, 0).Format("2006-01-02")
	key := `#app-key-list tr[data-name="website"]`
	tb.do(t,
		chromedp.SendKeys(chromedp.ID("new-app-key-name"), "website"),
		chromedp.SetValue(chromedp.ID("new-app-key-expires"), expiry),
		chromedp.SendKeys(chromedp.ID("new-app-key-rate"), "30"),
		chromedp.Click(chromedp.CSS(`#new-app-key button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("app-key-secret")),
		chromedp.WaitVisible(chromedp.CSS(key)),
	)
	secret := run(t, tb, chromedp.Value(chromedp.CSS(`#app-key-secret input`)))
	if !strings.HasPrefix(secret, "fbk_") {
		t.Fatalf("the page shows %q as the new key", secret)
	}
	if got := tb.text(t, `#app-key-secret`); !strings.Contains(got, "website") || !strings.Contains(got, "only time the key is shown") ||
		!strings.Contains(got, "Authorization: Bearer <key>") || !strings.Contains(got, "/api/v1/chat/completions") || !strings.Contains(got, "customUid") {
		t.Errorf("the new key's note says %q", got)
	}
	prefix, ok := strings.CutSuffix(tb.text(t, key+` [data-role=prefix]`), "…")
	if !ok || prefix == "" || len(prefix) >= len(secret) || !strings.HasPrefix(secret, prefix) {
		t.Errorf("the list shows the key as %q, want the start of %q and an ellipsis", prefix, secret)
	}
	for _, c := range []struct{ role, want string }{{"last-used", "never"}, {"expires", expiry + " 23:59"}, {"rate", "30/min"}} {
		if got := tb.text(t, key+` [data-role=`+c.role+`]`); got != c.want {
			t.Errorf("the key's %s is shown as %q, want %q", c.role, got, c.want)
		}
	}

	// The key works, as a program sends it, and reaches this app only: a
	// turn that names another app is refused or runs on this one.
	if code, body := appKeyTurn(t, e.url, secret, appID, ""); code != http.StatusOK {
		t.Fatalf("a turn on %s with the app's key: %d %s, want 200", appID, code, body)
	}
	const stray = "publish-tab-stray"
	if code, body := appKeyTurn(t, e.url, secret, "demo", stray); code == http.StatusOK {
		waitFor(t, "the stray turn's chat", func() (bool, string) {
			chat, err := e.chatNamed(context.Background(), stray)
			if err != nil {
				return false, err.Error()
			}
			if chat.AppID != appID {
				t.Fatalf("a turn naming the demo app with %s's key ran on %q", appID, chat.AppID)
			}
			return true, ""
		})
	} else if code < 400 {
		t.Errorf("a turn naming another app with this app's key: %d %s", code, body)
	}

	// A share link: visitors may send 5 requests a minute, 100 runs in
	// all, see read-only files and no tool cards, and are named by a hook.
	const hook = "https://id.example.com/check"
	link := `#link-list tr[data-name="visitors"]`
	tb.do(t,
		chromedp.SendKeys(chromedp.ID("new-link-name"), "visitors"),
		chromedp.SendKeys(chromedp.ID("new-link-rate"), "5"),
		chromedp.SendKeys(chromedp.ID("new-link-max-runs"), "100"),
		chromedp.SetValue(chromedp.ID("new-link-files"), "read"),
		chromedp.Click(chromedp.CSS(`label[for="new-link-tools"]`)),
		chromedp.SendKeys(chromedp.ID("new-link-hook"), hook),
		chromedp.Click(chromedp.CSS(`#new-link button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(link)),
	)
	if got := tb.text(t, `#links [data-role=status]`); got != `The link "visitors" was created.` {
		t.Errorf("after creating the link the page says %q", got)
	}
	linkID := run(t, tb, chromedp.AttributeValue(chromedp.CSS(link), "data-link")).Value
	if url := run(t, tb, chromedp.Value(chromedp.CSS(link+` [data-role=url] input`))); linkID == "" || url != e.url+"/share/"+linkID {
		t.Errorf("the link %q is shown as %q, want %s/share/<id>", linkID, url, e.url)
	}
	for _, c := range []struct{ role, want string }{
		{"expires", "never"}, {"runs", "0 / 100"}, {"rate", "5/min"}, {"tools", "hidden"}, {"files", "read-only"}, {"hook", hook},
	} {
		if got := tb.text(t, link+` [data-role=`+c.role+`]`); got != c.want {
			t.Errorf("the link's %s is shown as %q, want %q", c.role, got, c.want)
		}
	}
	e.screenshot(t, tb, "publish-tab.png")

	// Copy selects the link's address (and puts it on the clipboard where
	// the browser allows); Hide forgets the key's secret.
	tb.do(t, chromedp.Click(chromedp.CSS(link+` [data-role=url] button`)))
	if sel := run(t, tb, chromedp.Evaluate[string](`(() => { const i = document.querySelector('`+link+` [data-role=url] input'); return i.value.slice(i.selectionStart, i.selectionEnd); })()`)); sel != e.url+"/share/"+linkID {
		t.Errorf("after Copy the selection is %q, want the link's address", sel)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`#app-key-secret [data-role=hide]`)), chromedp.WaitNotVisible(chromedp.ID("app-key-secret")))
	if v := run(t, tb, chromedp.Value(chromedp.CSS(`#app-key-secret input`))); v != "" {
		t.Errorf("after Hide the secret's box still holds %q", v)
	}

	// After a reload the tab is still Publish, the key is listed with its
	// use, and its secret is nowhere on the page.
	tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(key)), chromedp.WaitVisible(chromedp.CSS(link)))
	quoted, _ := json.Marshal(secret)
	if run(t, tb, chromedp.Evaluate[bool](`document.documentElement.outerHTML.includes(`+string(quoted)+`)`)) {
		t.Error("after a reload the page still holds the key's secret")
	}
	if got := tb.text(t, key+` [data-role=last-used]`); got == "never" {
		t.Error("the key was used, yet the list says never")
	}

	// Revoked, each asks first, leaves its list and says so.
	tb.do(t,
		chromedp.Click(chromedp.CSS(key+` [data-key-action=revoke]`)),
		chromedp.WaitVisible(chromedp.CSS(`#app-keys [data-role=empty]`)),
		chromedp.Click(chromedp.CSS(link+` [data-link-action=revoke]`)),
		chromedp.WaitVisible(chromedp.CSS(`#links [data-role=empty]`)),
	)
	for _, c := range []struct{ css, want string }{
		{`#app-keys [data-role=status]`, `The key "website" was revoked.`},
		{`#links [data-role=status]`, `The link "visitors" was revoked.`},
	} {
		if got := tb.text(t, c.css); got != c.want {
			t.Errorf("after revoking the page says %q, want %q", got, c.want)
		}
	}
	for _, css := range []string{key, link} {
		if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll('`+css+`').length`)); n != 0 {
			t.Errorf("%s is still listed after revoking it", css)
		}
	}
	tb.mu.Lock()
	asked := slices.Clone(tb.dialogs)
	tb.mu.Unlock()
	if len(asked) != 2 || !strings.Contains(asked[0], `Revoke the key "website"?`) ||
		!strings.Contains(asked[1], `Revoke the link "visitors"?`) || !strings.Contains(asked[1], "Visitors lose access at once") {
		t.Errorf("dialogs %q, want a confirmation of each revocation", asked)
	}
	if code, _ := appKeyTurn(t, e.url, secret, appID, ""); code != http.StatusUnauthorized {
		t.Errorf("a turn with the revoked key: %d, want 401", code)
	}

	// In Chinese the tab speaks Chinese.
	tb.do(t,
		chromedp.Navigate(e.url+"/apps/"+appID+"/edit?lang=zh#publish"),
		chromedp.WaitVisible(chromedp.CSS(`#links [data-role=empty]`)),
	)
	for _, c := range []struct{ css, want string }{
		{"#links h3", "分享链接"}, {`#links [data-role=empty]`, "此应用还没有分享链接。"},
	} {
		if got := tb.text(t, c.css); got != c.want {
			t.Errorf("in Chinese %s says %q, want %q", c.css, got, c.want)
		}
	}
}

// appKeyTurn asks app one question on the chat API with an API key, as a
// program does, in chat chatID (empty: a new one), and returns the status
// and the body.
func appKeyTurn(t *testing.T, url, key, appID, chatID string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"appId": appID, "chatId": chatID, "customUid": "customer-7",
		"messages": []map[string]string{{"role": "user", "content": "hello"}}})
	req, err := http.NewRequest("POST", url+"/api/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /api/v1/chat/completions: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

package web_test

// The whole path of publishing, in Chromium: an admin creates a user; the
// user signs in, makes an API key, builds an app with the sandbox on and
// publishes it as a share link; an anonymous browser opens the link and
// runs a command; a second anonymous browser cannot see the first one's
// chat.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestBrowserPublishToVisitors(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)

	// The admin creates pia on the users page.
	admin := e.signIn(t, "admin")
	admin.do(t,
		chromedp.Navigate(e.url+"/admin/users"),
		chromedp.WaitVisible(chromedp.CSS(`#users tr[data-user="admin"]`)),
		chromedp.SendKeys(chromedp.ID("new-user-name"), "pia"),
		chromedp.SendKeys(chromedp.ID("new-user-password"), "pia-password-1"),
		chromedp.Click(chromedp.CSS(`#new-user button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#users tr[data-user="pia"]`)),
	)

	// Pia signs in and makes a key on her account page.
	pia := e.signInWith(t, "pia", "pia-password-1")
	pia.do(t,
		chromedp.Navigate(e.url+"/account"),
		chromedp.WaitVisible(chromedp.ID("new-key")),
		chromedp.SendKeys(chromedp.CSS(`#new-key input[name=name]`), "pia's script"),
		chromedp.Click(chromedp.CSS(`#new-key button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("key-secret")),
	)
	key := run(t, pia, chromedp.Value(chromedp.CSS(`#key-secret input`)))
	if !strings.HasPrefix(key, "fbk_") {
		t.Fatalf("the key shown: %q", key)
	}

	// She builds an app with the sandbox on.
	appID := e.newAppOnCanvas(t, pia, "Data helper")
	pia.openNode(t, "agent")
	pia.do(t, chromedp.Click(chromedp.ID("field-useAgentSandbox")))
	save(t, pia, "All changes saved")

	// And publishes it: a share link whose visitors see the cards and read
	// the files.
	pia.do(t,
		chromedp.Navigate(e.url+"/apps/"+appID+"/edit"),
		chromedp.WaitVisible(chromedp.ID("new-link")),
		chromedp.SendKeys(chromedp.ID("new-link-name"), "For the team"),
		chromedp.SetValue(chromedp.ID("new-link-files"), "read"),
		chromedp.Click(chromedp.CSS(`#new-link button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#link-list tr[data-name="For the team"]`)),
	)
	// Her key reads what the page shows, as a program of hers would.
	req, _ := http.NewRequest("GET", e.url+"/api/apps/"+appID+"/links", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var links struct {
		Links []struct{ URL, Name, Files string }
	}
	err = json.NewDecoder(resp.Body).Decode(&links)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(links.Links) != 1 || links.Links[0].Files != "read" {
		t.Fatalf("the app's links through pia's key: %d %+v %v", resp.StatusCode, links, err)
	}
	shareURL := e.url + links.Links[0].URL
	if shown := pia.js(t, `document.querySelector('#link-list tr[data-name="For the team"] input').value`); shown != shareURL {
		t.Errorf("the link's row shows %q, not its address %s", shown, shareURL)
	}

	// An anonymous visitor opens the link and runs a command.
	first := e.newTab(t)
	first.do(t,
		chromedp.Navigate(shareURL),
		chromedp.WaitVisible(chromedp.ID("new-chat")),
		chromedp.Click(chromedp.ID("new-chat")),
		chromedp.WaitVisible(chromedp.ID("chat-form")),
	)
	if n := run(t, first, chromedp.Evaluate[int](`document.querySelectorAll('header nav a, #logout').length`)); n != 0 {
		t.Errorf("a visitor's page shows %d links of signed-in users", n)
	}
	// No terminal for visitors (L1; the link's API has no such route).
	if n := run(t, first, chromedp.Evaluate[int](`document.querySelectorAll('.terminal-toggle').length`)); n != 0 {
		t.Errorf("a visitor's page offers the terminal")
	}
	chatID := path.Base(first.location())
	first.ask(t, "$ echo visitor-data > found.txt && cat found.txt")
	if out := first.js(t, `document.querySelector('#messages .tool-card [data-role="stdout"]').textContent`); !strings.Contains(out, "visitor-data") {
		t.Errorf("the visitor's card shows %q", out)
	}
	first.do(t, chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/found.txt"]`)))
	if n := run(t, first, chromedp.Evaluate[int](`document.querySelectorAll('#save-file').length`)); n != 0 {
		t.Errorf("a read-only link's files panel offers saving")
	}
	first.do(t, chromedp.Click(chromedp.CSS(`#messages .tool-card summary`)))
	e.screenshot(t, first, "share-visitor.png")

	// The chat is the visitor's; pia reads it as the app's owner.
	chat, err := e.chatNamed(t.Context(), chatID)
	if err != nil || chat.AppID != appID || !strings.HasPrefix(chat.UserID, "share:") {
		t.Fatalf("the visitor's chat: %+v %v", chat, err)
	}
	// Her list links it with its user (chat ids are scoped per app and
	// user); its page shows the turn and the files, and no input.
	link := `a[href*="/chat/` + chatID + `?userId=share"]`
	pia.do(t, chromedp.Navigate(e.url+"/apps/"+appID+"/chats"), chromedp.WaitVisible(chromedp.CSS(link)))
	pia.do(t, chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS(`[data-role="not-own"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#messages .tool-card`)), chromedp.WaitVisible(chromedp.CSS(`#files [data-role="file-list"] li`)))
	if n := run(t, pia, chromedp.Evaluate[int](`document.querySelectorAll("#chat-form").length`)); n != 0 {
		t.Errorf("another user's chat page offers an input")
	}
	e.screenshot(t, pia, "chat-of-another-user.png")

	// A second anonymous browser sees none of it.
	second := e.newTab(t)
	second.expected = []string{"status of 404"}
	second.do(t, chromedp.Navigate(shareURL), chromedp.WaitVisible(chromedp.ID("new-chat")))
	if n := run(t, second, chromedp.Evaluate[int](`document.querySelectorAll('a[href$="/chat/`+chatID+`"]').length`)); n != 0 {
		t.Errorf("the second visitor's list links to the first one's chat")
	}
	second.do(t, chromedp.Navigate(shareURL+"/chat/"+chatID+"?userId="+url.QueryEscape(chat.UserID)), chromedp.WaitReady("body"))
	if body := second.text(t, "body"); !strings.Contains(body, "no such chat") {
		t.Errorf("the first visitor's chat, opened by the second: %q", body)
	}
	// The same chat id without a user is the second visitor's own, new.
	second.do(t, chromedp.Navigate(shareURL+"/chat/"+chatID), chromedp.WaitVisible(chromedp.ID("chat-form")))
	if n := run(t, second, chromedp.Evaluate[int](`document.querySelectorAll("#messages .msg").length`)); n != 0 {
		t.Errorf("the second visitor's chat of the first one's id shows %d messages", n)
	}
}

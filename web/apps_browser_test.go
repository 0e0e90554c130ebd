package web_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/auth"
)

// TestAppPagesBrowser: the app list, an app's chat list and its Publish
// page as a first-time user meets them, on a desktop and a phone, in both
// languages. Until she has an app of her own the list says how to make
// one; her chats link to her chats, an admin's list links them with her
// user; no page scrolls sideways.
func TestAppPagesBrowser(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	if _, err := e.engine.Accounts.CreateUser(t.Context(), "dora", "dora-password-1", auth.RoleUser); err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, "dora", "dora-password-1")
	if got := tb.text(t, "#apps-empty"); !strings.Contains(got, "no apps of your own") || !strings.Contains(got, "New app") {
		t.Errorf("a first-time user's app list says %q, want how to make an app", got)
	}
	// looks screenshots a page in both languages on a desktop and a phone
	// and checks the page never scrolls sideways (wide tables scroll in
	// their own box).
	looks := func(page, ready, name string) {
		t.Helper()
		for _, lang := range []string{"en", "zh"} {
			for _, width := range []int64{1280, 390} {
				tb.do(t, chromedp.EmulateViewport(width, 844), chromedp.Navigate(e.url+page+"?lang="+lang), chromedp.WaitVisible(chromedp.CSS(ready)))
				if w := tb.js(t, `String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
					t.Errorf("%s at %d px in %s scrolls sideways by %s px", page, width, lang, w)
				}
				e.screenshot(t, tb, fmt.Sprintf("%s-%s-%d.png", name, lang, width))
			}
		}
		tb.do(t, chromedp.EmulateViewport(1280, 844))
	}
	looks("/", "#apps-empty", "apps-first-time")

	appID := e.newAppOnCanvas(t, tb, "Dora's desk")
	row := `#app-list tr[data-app="` + appID + `"]`
	tb.do(t, chromedp.Navigate(e.url+"/"), chromedp.WaitVisible(chromedp.CSS(row)))
	if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#apps-empty").length`)); n != 0 {
		t.Error("the app list still says she has no app of her own")
	}
	if got := tb.text(t, row+` [data-role=name]`); got != "Dora's desk" {
		t.Errorf("her app is listed as %q", got)
	}
	for _, href := range []string{"/chat/new", "/flow", "/edit", "/chats"} {
		if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll('`+row+` a[href="/apps/`+appID+href+`"]').length`)); n != 1 {
			t.Errorf("her app's row has %d links to %s", n, href)
		}
	}
	looks("/", row, "apps")
	looks("/apps/"+appID+"/edit", `#links [data-role=empty]`, "publish")

	// No chat yet: the list says how to start one.
	chats := "/apps/" + appID + "/chats"
	tb.do(t, chromedp.Navigate(e.url+chats), chromedp.WaitVisible(chromedp.ID("chats-empty")))
	tb.do(t, chromedp.Click(chromedp.ID("new-chat")), chromedp.WaitVisible(chromedp.ID("chat-form")))
	chatID := tb.chatID(t)
	tb.send(t, "Where is my parcel?")
	run(t, tb, poll[bool](`() => { const a = document.querySelector("#messages .msg.assistant .text"); return a !== null && a.textContent.trim() !== ""; }`))
	// The answer shows before its turn is written down; the list page
	// reads the chats once, when it loads.
	chatItems(t, e, chatID)

	// Her chat is listed by its title, linked plainly, with its time in
	// her zone to the minute.
	link := `#chat-list a[href="/apps/` + appID + `/chat/` + chatID + `"]`
	tb.do(t, chromedp.Navigate(e.url+chats), chromedp.WaitVisible(chromedp.CSS(link)))
	if got := tb.text(t, link); got != "Where is my parcel?" {
		t.Errorf("her chat is listed as %q", got)
	}
	updated := `#chat-list tr[data-chat="` + chatID + `"] [data-role=updated] time`
	if got := tb.text(t, updated); !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d$`).MatchString(got) {
		t.Errorf("her chat's time is shown as %q", got)
	}
	looks(chats, link, "chats")

	// The admin reads it in the app's list, linked with her user.
	admin := e.signIn(t, "admin")
	dora, err := e.chatNamed(t.Context(), chatID)
	if err != nil {
		t.Fatal(err)
	}
	theirs := `#chat-list a[href="/apps/` + appID + `/chat/` + chatID + `?userId=` + url.QueryEscape(dora.UserID) + `"]`
	admin.do(t, chromedp.Navigate(e.url+chats), chromedp.WaitVisible(chromedp.CSS(theirs)))
	if got := admin.text(t, `#chat-list tr[data-chat="`+chatID+`"] [data-role=owner]`); got != dora.UserID {
		t.Errorf("the admin's list names the chat's owner %q, want %q", got, dora.UserID)
	}
}

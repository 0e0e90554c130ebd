package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/engine/enginetest"
)

// TestChatEarlierMessages opens a chat of 130 turns: the page holds the
// last 100, opens at the newest, renders the answers out of view once the
// browser is idle, and "Show earlier messages" brings the first 30. The
// page's ?before= answers only those who may read the chat.
func TestChatEarlierMessages(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	seedChat(t, e, "long-chat", 130, 10)
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	tb.do(t, chromedp.EmulateViewport(1280, 844), chromedp.Navigate(e.url+"/apps/demo/chat/long-chat"))
	run(t, tb, poll[bool](`() => document.querySelectorAll("#messages .msg").length === 200`))
	questions := func() []string {
		var qs []string
		if err := json.Unmarshal([]byte(tb.js(t, `JSON.stringify([...document.querySelectorAll("#messages .msg.user")].map((m) => m.textContent))`)), &qs); err != nil {
			t.Fatal(err)
		}
		return qs
	}
	if qs := questions(); !strings.HasPrefix(qs[0], "question 30:") || !strings.HasPrefix(qs[99], "question 129:") {
		t.Fatalf("the page shows questions %q to %q, want the last 100 (30 to 129)", qs[0], qs[99])
	}
	// At its end, give or take a pixel of rounding (layout works in
	// fractions of a pixel, scrolling in whole ones).
	if gap := run(t, tb, chromedp.Evaluate[float64](`document.documentElement.scrollHeight - innerHeight - scrollY`)); gap > 2 {
		t.Errorf("the page opened %.0f px above its end, want the newest turn in view", gap)
	}
	// Every answer ends up rendered, the first as well as the last.
	run(t, tb, poll[bool](`() => !document.querySelector("#messages .text.pending") &&
		document.querySelectorAll("#messages .msg.assistant .text h2").length === 100`))
	if got := tb.text(t, "#messages .msg.assistant .text h2"); got != "Step 30" {
		t.Errorf("the first answer's heading reads %q, want Step 30", got)
	}
	// The README's pictures of the chat page: a desktop, and a phone in
	// Chinese.
	e.viewShot(t, tb, "chat-desktop.png")
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/demo/chat/long-chat?lang=zh"))
	run(t, tb, poll[bool](`() => document.querySelectorAll("#messages .msg").length === 200 && !document.querySelector("#messages .msg.assistant:last-child .text.pending")`))
	e.viewShot(t, tb, "chat-phone-zh.png")
	tb.do(t, chromedp.EmulateViewport(1280, 844), chromedp.Navigate(e.url+"/apps/demo/chat/long-chat?lang=en"))
	run(t, tb, poll[bool](`() => document.querySelectorAll("#messages .msg").length === 200`))

	tb.do(t, chromedp.Click(chromedp.CSS(`#messages [data-role=earlier]`)))
	run(t, tb, poll[bool](`() => document.querySelectorAll("#messages .msg").length === 260 && !document.querySelector("#messages [data-role=earlier]")`))
	if qs := questions(); !strings.HasPrefix(qs[0], "question 0:") || !strings.HasPrefix(qs[30], "question 30:") || len(qs) != 130 {
		t.Errorf("after earlier messages the page shows %d questions from %q, want 130 from question 0", len(qs), qs[0])
	}
	if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#messages .tool-card").length`)); n != 10 {
		t.Errorf("%d command cards, want the 10 the chat ran", n)
	}

	// The page's JSON: a bad before is refused with what to send; a good
	// one answers the items before it.
	fetch := func(tb *tab, query string) (int, string) {
		var got struct {
			Status int
			Body   string
		}
		raw := run(t, tb, chromedp.Evaluate[string](`fetch("/apps/demo/chat/long-chat`+query+`").then(async (r) => JSON.stringify({status: r.status, body: await r.text()}))`, chromedp.EvalAwaitPromise))
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		return got.Status, got.Body
	}
	tb.expected = []string{"status of 400"}
	if status, body := fetch(tb, "?before=abc"); status != 400 || !strings.Contains(body, "before must be") {
		t.Errorf("?before=abc: %d %s, want 400 saying what before must be", status, body)
	}
	status, body := fetch(tb, "?before=60")
	var page struct {
		Items []struct {
			Role, Text string
		}
		Earlier int
	}
	if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil || len(page.Items) != 60 || page.Earlier != 0 ||
		page.Items[0].Text != "question 0: what is in the workspace?" {
		t.Errorf("?before=60: %d, %d items, earlier %d (%v), want the first 60 items and nothing earlier", status, len(page.Items), page.Earlier, err)
	}
	// Another user reads neither the page nor its earlier items.
	alice := e.signIn(t, "alice")
	alice.expected = []string{"status of 404"}
	if status, body := fetch(alice, "?before=60&userId=u:"+enginetest.AdminName); status != 404 || strings.Contains(body, "question") {
		t.Errorf("alice asking for the admin's chat: %d %.80s, want 404 and no items", status, body)
	}
}

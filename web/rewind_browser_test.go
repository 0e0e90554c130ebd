package web_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox/checkpoint/checkpointtest"
)

// TestRewindBrowser: on the chat page, regenerating the last answer
// runs its command again in the sandbox as it was before it; editing a
// question sends the edited one there; branching at the first answer
// opens a new chat whose sandbox is as it was after it. Phone and zh
// screenshots.
func TestRewindBrowser(t *testing.T) {
	t.Parallel()
	e := newBrowserEnvWith(t, enginetest.Options{Env: map[string]string{"FLOWBOX_CHECKPOINTS": "on", "FLOWBOX_CHECKPOINT_POOL": checkpointtest.Pool(t)}})
	tb := e.signIn(t, "alice")
	e.openChat(t, tb, "demo")
	lastText := func() string {
		t.Helper()
		return tb.js(t, `[...document.querySelectorAll("#messages .msg.assistant")].pop().querySelector(".text").textContent`)
	}
	// answered waits until the page shows the stored turns again (after
	// a run, the page reads them back, with their actions).
	// (not, when unlike is set, an answer that reads unlike: the one a
	// click replaces, which the page still shows for a moment after it.)
	answered := func(want string, unlike ...string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			got := lastText()
			if tb.js(t, `String(document.querySelector("[data-role=regenerate]") !== null)`) == "true" && strings.Contains(got, want) && !slices.Contains(unlike, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed the answer %q with its actions; it shows %q, and the error %q", want, lastText(),
					tb.js(t, `[...document.querySelectorAll("#messages .error")].map((e) => e.textContent).join(" | ")`))
			}
		}
	}
	tb.ask(t, "$ echo one > a.txt; cat a.txt")
	answered("one")
	// Each run of the second command prints a stamp of its own.
	tb.ask(t, "$ echo two >> a.txt; echo two > /workspace/uploads/two.txt; cat a.txt; echo run-$(date +%s%N)")
	answered("one\ntwo")
	// The files panel shows the turn's upload-to-be.
	two := `#files li[data-path="/workspace/uploads/two.txt"]`
	tb.do(t, browse(`#files li[data-path="/workspace/uploads"] a`, two))

	// Regenerate: the command runs again where a.txt holds "one".
	before := lastText()
	tb.do(t, chromedp.Click(chromedp.CSS(`[data-role=regenerate]`)))
	answered("one\ntwo", before)
	if got := lastText(); strings.Contains(got, "two\ntwo") {
		t.Errorf("the regenerated answer %q: the command ran in the sandbox after it", got)
	}
	if n := tb.js(t, `String(document.querySelectorAll("#messages .msg.user").length)`); n != "2" {
		t.Errorf("%s questions after regenerating, want 2", n)
	}
	e.screenshot(t, tb, "rewind.png")

	// Edit the second question.
	tb.do(t, chromedp.Click(chromedp.CSS(`#messages .msg.user:nth-of-type(1) ~ .msg.user [data-role=edit]`)))
	tb.setValue(t, `.msg-edit textarea`, "$ cat a.txt; echo edited")
	tb.do(t, chromedp.Click(chromedp.CSS(`[data-role=edit-send]`)))
	answered("edited")
	if got := lastText(); !strings.Contains(got, "one\nedited") || strings.Contains(got, "two") {
		t.Errorf("the edited turn answered %q, want one then edited", got)
	}
	// The chat's files went back with it: the panel no longer lists the
	// file turn 2 wrote into uploads.
	waitFor(t, "the files panel without the rewound turn's file", func() (bool, string) {
		got := tb.js(t, `document.getElementById("files")?.innerText ?? ""`)
		return strings.Contains(got, "/workspace/uploads") && strings.Contains(got, "This folder is empty.") && !strings.Contains(got, "two.txt"), got
	})

	// Branch at the first answer: a new chat, its sandbox after turn 1.
	page := tb.location()
	tb.do(t, chromedp.Click(chromedp.CSS(`#messages .msg.assistant [data-role=branch]`)))
	for deadline := time.Now().Add(time.Minute); tb.location() == page; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("branching did not open a new chat")
		}
	}
	tb.do(t, chromedp.WaitVisible(chromedp.ID("chat-form")))
	if n := tb.js(t, `String(document.querySelectorAll("#messages .msg.user").length)`); n != "1" {
		t.Errorf("the branch has %s questions, want 1", n)
	}
	if got := tb.text(t, `.chat-title`); !strings.HasSuffix(got, " (branch)") {
		t.Errorf("the branch is titled %q, want its chat's title marked as a branch", got)
	}
	tb.ask(t, "$ echo branch >> a.txt; cat a.txt")
	answered("one\nbranch")

	// On a phone, in Chinese.
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(tb.location()+"?lang=zh"), chromedp.WaitVisible(chromedp.CSS(`[data-role=regenerate]`)))
	if got := tb.text(t, `[data-role=regenerate]`); got != "重新生成" {
		t.Errorf("the regenerate button says %q", got)
	}
	e.viewShot(t, tb, "rewind-phone-zh.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))

	// The app's retention on its Publish page (R4), where the engine
	// keeps checkpoints: saved, then shown again after a reload.
	admin := e.signIn(t, "admin")
	admin.do(t, chromedp.Navigate(e.url+"/apps/demo/edit#publish"), chromedp.WaitVisible(chromedp.ID("rewind-setting")))
	admin.setValue(t, `#app-rewind-keep`, "5")
	admin.do(t, chromedp.Click(chromedp.CSS(`#rewind-setting button[type=submit]`)))
	// Read by script: the section is drawn again as the app is read back.
	waitFor(t, "the retention saved", func() (bool, string) {
		got := admin.js(t, `document.querySelector("#rewind-setting [data-role=status]")?.textContent ?? ""`)
		return got == "Saved how far chats can go back", got
	})
	admin.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("rewind-setting")))
	waitFor(t, "the retention shown after a reload", func() (bool, string) {
		got := admin.js(t, `document.getElementById("app-rewind-keep")?.value ?? ""`)
		return got == "5", got
	})
	admin.do(t, chromedp.ScrollIntoView(chromedp.ID("rewind-setting")))
	e.viewShot(t, admin, "publish-rewind.png")
	admin.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/demo/edit?lang=zh#publish"), chromedp.WaitVisible(chromedp.ID("rewind-setting")),
		chromedp.ScrollIntoView(chromedp.ID("rewind-setting")))
	e.viewShot(t, admin, "publish-rewind-phone-zh.png")
	admin.do(t, chromedp.EmulateViewport(1280, 800))
}

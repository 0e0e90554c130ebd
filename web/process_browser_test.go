package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// TestBackgroundProcessBrowser (L3): the agent starts a server in the
// background; the chat's files panel lists it running, shows its output
// and stops it, on a desktop and on a phone in Chinese.
func TestBackgroundProcessBrowser(t *testing.T) {
	t.Parallel()
	e, _, appID := newScriptedBrowser(t, "Server",
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_srv", "sandbox_process",
			`{"action":"start","command":"echo serving on port 8000; exec sleep 7451"}`)}},
		llmtest.Reply{Text: "The server runs in the background."})

	tb := e.signIn(t, "alice")
	chatID := e.openChat(t, tb, appID)
	tb.ask(t, "start the server")
	proc := `#files [data-process="p1"]`
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(proc)))
	if got := tb.text(t, proc+` [data-role=state]`); got != "running" {
		t.Errorf("the process is shown %q, want running", got)
	}
	if got := tb.text(t, proc+` .process-command`); got != "echo serving on port 8000; exec sleep 7451" {
		t.Errorf("the process's command is shown as %q", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(proc+` [data-role=output]`)))
	out := run(t, tb, poll[string](`() => { const p = document.querySelector('#files [data-role=process-output]'); return p && p.textContent.includes("serving") ? p.textContent : ""; }`))
	if out != "serving on port 8000\n" {
		t.Errorf("the output shown: %q", out)
	}
	e.screenshot(t, tb, "processes.png")

	// On a phone, in Chinese: the panel is a sheet, opened from the chat.
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/"+appID+"/chat/"+chatID+"?lang=zh"),
		chromedp.WaitVisible(chromedp.CSS(`.files-toggle`)), chromedp.Click(chromedp.CSS(`.files-toggle`)),
		chromedp.WaitVisible(chromedp.CSS(proc)))
	if got := tb.text(t, proc+` [data-role=state]`); got != "运行中" {
		t.Errorf("on the phone the process is shown %q", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(proc+` [data-role=output]`)), chromedp.WaitVisible(chromedp.CSS(`#files [data-role=process-output]`)))
	tb.js(t, `(document.querySelector('#files [data-role=processes]').scrollIntoView({ block: "center" }), "")`)
	e.viewShot(t, tb, "processes-phone-zh.png")

	// Stop: the process ends, and the panel says so.
	tb.do(t, chromedp.Click(chromedp.CSS(proc+` [data-role=stop]`)))
	run(t, tb, poll[bool](`() => document.querySelector('#files [data-process="p1"]')?.dataset.state === "ended"`))
	if got := tb.text(t, proc+` [data-role=state]`); !strings.Contains(got, "已停止") {
		t.Errorf("after the stop the process is shown %q", got)
	}
	tb.do(t, chromedp.EmulateViewport(1280, 800))
}

package web_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// screenText is what the page's terminal shows, line by line.
const screenText = `(() => { const t = window.flowboxTerminal; if (!t) return ""; const b = t.buffer.active; let s = ""; for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString(true) + "\n"; return s; })()`

// TestTerminalBrowser (L1): the chat's owner opens the terminal in
// Chromium and types cd and export; the agent's next command starts
// there; a reload reconnects to the same shell with its screen; on a
// phone, in Chinese.
func TestTerminalBrowser(t *testing.T) {
	t.Parallel()
	e, alice, appID := newScriptedBrowser(t, "Shell",
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", `{"command":"echo \"$(pwd) $A\""}`)}},
		llmtest.Reply{Text: "Checked."})

	tb := e.signIn(t, "alice")
	chatID := e.openChat(t, tb, appID)
	screenHas := func(want string) string {
		t.Helper()
		var s string
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s = tb.js(t, screenText); strings.Contains(s, want) {
				return s
			}
		}
		t.Fatalf("the terminal never showed %q; it shows %q", want, s)
		return ""
	}
	// Typing: the text as the keyboard's input, then Enter.
	typeLine := func(line string) {
		t.Helper()
		tb.do(t, chromedp.Focus(chromedp.CSS(`#terminal .xterm-helper-textarea`)))
		if _, err := chromedp.Call(tb.ctx, input.InsertText, input.InsertTextParams{Text: line}); err != nil {
			t.Fatal(err)
		}
		tb.do(t, chromedp.KeyEvent(kb.Enter))
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.terminal-toggle`)), chromedp.WaitVisible(chromedp.CSS(`#terminal[data-state=open]`)))
	screenHas("# ")
	typeLine("cd /tmp; export A=1; echo typed-$A; echo pid-$$-end")
	screenHas("typed-1")
	shellPID := waitPID(t, func() string { return tb.js(t, screenText) })
	screenHas("/tmp # ")
	e.screenshot(t, tb, "terminal.png")

	tb.ask(t, "where am I?")
	_, responses := toolStatuses(t, alice, appID, chatID)
	if len(responses) != 1 || !strings.Contains(responses[0], `/tmp 1\n`) {
		t.Errorf("the agent's command after the terminal saw %v, want /tmp 1", responses)
	}

	// A reload returns to the same shell, its screen replayed. The
	// terminal's box is laid out narrow for a moment, as a page settling
	// may: the shell must not be told that passing size, or its prompt's
	// redraw at the real one erases the lines above it.
	tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.terminal-toggle`)))
	tb.js(t, `document.head.insertAdjacentHTML("beforeend", "<style id=narrow>.terminal-box { width: 16px }</style>"), ""`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.terminal-toggle`)), chromedp.WaitVisible(chromedp.CSS(`#terminal`)), chromedp.Sleep(300*time.Millisecond))
	tb.js(t, `document.getElementById("narrow").remove(), ""`)
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#terminal[data-state=open]`)))
	// The replay is the screen as it was: the typed line, its output and
	// the prompt after it.
	replayed := "echo pid-$$-end\ntyped-1\npid-" + shellPID + "-end\n/tmp # "
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(tb.js(t, screenText), replayed); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			// Which shell the page has: the same one, not drawn, or a
			// new one (the first ended)?
			typeLine("echo pid-$$-now")
			t.Fatalf("after the reload the screen was not replayed whole: it shows %q; the shell was pid %s before the reload and is pid %s now",
				tb.js(t, screenText), shellPID, waitPID(t, func() string { return tb.js(t, screenText) }))
		}
	}
	typeLine("echo again-$A")
	screenHas("again-1")

	// On a phone, in Chinese.
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/"+appID+"/chat/"+chatID+"?lang=zh"),
		chromedp.WaitVisible(chromedp.CSS(`.terminal-toggle`)), chromedp.Click(chromedp.CSS(`.terminal-toggle`)),
		chromedp.WaitVisible(chromedp.CSS(`#terminal[data-state=open]`)))
	screenHas("again-1")
	if got := tb.text(t, `.terminal-toggle`); got != "终端" {
		t.Errorf("the terminal's button says %q", got)
	}
	e.viewShot(t, tb, "terminal-phone-zh.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))
}

// waitPID waits until the screen's last "pid-N-" is the echo's output
// (not the typed "pid-$$-") and returns N.
func waitPID(t *testing.T, screen func() string) string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		last = screen()
		if i := strings.LastIndex(last, "pid-"); i >= 0 {
			n, _, _ := strings.Cut(last[i+len("pid-"):], "-")
			if _, err := strconv.Atoi(n); err == nil {
				return n
			}
		}
	}
	t.Fatalf("the terminal never printed its shell's pid; it shows %q", last)
	return ""
}

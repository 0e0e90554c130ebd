package web_test

// The approval card on the chat page (P10): a command an ask rule matches
// waits on the page for the chat's owner, who approves, edits or rejects
// it; the run goes on in the page, and a reloaded chat shows what became
// of each card.

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/engine/enginetest"
)

// newApprovalBrowserEnv is newBrowserEnv with a policy that asks before
// rm and forbids nc.
func newApprovalBrowserEnv(t *testing.T) *browserEnv {
	t.Helper()
	return newBrowserEnvWith(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": policyFile(t, approvalPolicy)}})
}

// lastAnswer is the last answer on the chat page: the last message of
// the history, or the answer of the last turn sent from the page.
const lastAnswer = `:is(#messages > .msg.assistant:last-child, #messages > div:last-child > .msg.assistant)`

// askApproval sends a message whose command needs approval and waits for
// its card to take answers: its buttons are disabled until the run that
// paused on it has ended (a click before that does nothing).
func (tb *tab) askApproval(t *testing.T, message string) {
	t.Helper()
	before := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#messages .approval").length`))
	tb.send(t, message)
	run(t, tb, poll[bool](`(before) => document.querySelectorAll("#messages .approval").length > before &&
		document.querySelector("`+lastAnswer+` .approval button[data-answer=approve]:not([disabled])") !== null`,
		chromedp.WithPollingArgs(before)))
	// The card in the middle of the window, clear of the sticky composer
	// at its bottom, before anything is clicked on it.
	tb.js(t, `(document.querySelector("`+lastAnswer+` .approval").scrollIntoView({ block: "center" }), "")`)
}

// waitAnswer waits until the last answer's text holds want.
func (tb *tab) waitAnswer(t *testing.T, want string) {
	t.Helper()
	run(t, tb, poll[bool](`(want) => {
		const last = document.querySelector("`+lastAnswer+` .text");
		return last !== null && last.textContent.includes(want);
	}`, chromedp.WithPollingArgs(want)))
}

func TestApprovalBrowser(t *testing.T) {
	t.Parallel()
	e := newApprovalBrowserEnv(t)
	tb := e.signIn(t, "alice")
	e.openChat(t, tb, "demo")

	// Approve.
	tb.askApproval(t, "$ touch a.txt && rm -f a.txt && echo approved-in-page")
	if got := tb.text(t, lastAnswer+` .approval [data-role=approval-command]`); got != "touch a.txt && rm -f a.txt && echo approved-in-page" {
		t.Errorf("the card shows %q", got)
	}
	if got := tb.text(t, lastAnswer+` .approval [data-role=approval-why]`); !strings.Contains(got, "ask-rm") || !strings.Contains(got, "deleting files needs a person") {
		t.Errorf("the card's reason %q", got)
	}
	if got := tb.text(t, lastAnswer+` .tool-card [data-role=status]`); got != "awaiting approval" {
		t.Errorf("the command's badge %q", got)
	}
	e.screenshot(t, tb, "approval.png")
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=approve]`)))
	tb.waitAnswer(t, "approved-in-page")

	// Edit: the edited command runs instead.
	tb.askApproval(t, "$ rm -rf build")
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=edit]`)),
		chromedp.WaitVisible(chromedp.CSS(lastAnswer+` .approval textarea`)))
	if got := tb.js(t, `document.querySelector("`+lastAnswer+` .approval textarea").value`); got != "rm -rf build" {
		t.Errorf("the edit box holds %q, want the command", got)
	}
	tb.setValue(t, lastAnswer+` .approval textarea`, "echo edited-in-page")
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=edit]`)))
	tb.waitAnswer(t, "edited-in-page")

	// Reject, with a reason the model reads.
	tb.askApproval(t, "$ rm -rf data")
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=reject]`)),
		chromedp.WaitVisible(chromedp.CSS(lastAnswer+` .approval input`)))
	tb.setValue(t, lastAnswer+` .approval input`, "keep-the-data")
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=reject]`)))
	tb.waitAnswer(t, "keep-the-data")

	// One left waiting, then the page is reloaded: the answered cards
	// show their outcome, the waiting one can still be answered.
	tb.askApproval(t, "$ rm -f waiting.txt")
	tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chat-form")))
	outcomes := tb.js(t, `[...document.querySelectorAll("#messages .approval")].map((c) => c.querySelector("[data-role=approval-outcome]").textContent || "waiting").join("|")`)
	if want := "Approved|Edited and approved: echo edited-in-page|Rejected: keep-the-data|waiting"; outcomes != want {
		t.Errorf("reloaded cards %q, want %q", outcomes, want)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(lastAnswer+` .approval button[data-answer=approve]`)))
	tb.waitAnswer(t, "waiting.txt")
}

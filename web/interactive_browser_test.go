package web_test

// The cards of the workflow's questions on the chat page: a userSelect's
// options are buttons, a formInput's fields a form; the run goes on in
// the page, and a reloaded chat shows each question's answer and still
// offers the one it waits for.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
)

const lastQuestion = lastAnswer + ` .question`

// waitQuestion waits until the last answer holds a question card of kind
// that can be answered.
func (tb *tab) waitQuestion(t *testing.T, kind string) {
	t.Helper()
	run(t, tb, poll[bool](`(kind) => {
		const q = document.querySelector("`+lastQuestion+`");
		return q !== null && q.dataset.kind === kind && !q.classList.contains("answered") && q.querySelector("button:not([disabled])") !== null;
	}`, chromedp.WithPollingArgs(kind)))
}

func TestInteractiveBrowser(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	var g nodes.Graph
	if err := json.Unmarshal([]byte(planGraph), &g); err != nil {
		t.Fatal(err)
	}
	if err := e.apps.Put(context.Background(), apps.App{ID: "plans", Name: "Plans", OwnerID: "u:alice", Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb := e.signIn(t, "alice")
	e.openChat(t, tb, "plans")

	// The select: one button per option.
	tb.send(t, "sign me up")
	tb.waitQuestion(t, "userSelect")
	if got := tb.text(t, lastQuestion+` [data-role=question-description]`); got != "Which plan?" {
		t.Errorf("the card asks %q", got)
	}
	if got := tb.js(t, `[...document.querySelectorAll("`+lastQuestion+` button[data-option]")].map((b) => b.dataset.option + "=" + b.textContent).join("|")`); got != "basic=Basic plan|pro=Pro plan" {
		t.Errorf("the options %q", got)
	}
	e.screenshot(t, tb, "question-select.png")
	tb.do(t, chromedp.Click(chromedp.CSS(lastQuestion+` button[data-option=pro]`)))

	// The form: a field per form field, the default filled in.
	tb.waitQuestion(t, "formInput")
	if got := tb.js(t, `[...document.querySelectorAll("`+lastQuestion+` .question-field")].map((f) => f.dataset.type + ":" + f.querySelector("label").textContent).join("|")`); got != "input:Name *|numberInput:Seats" {
		t.Errorf("the form's fields %q", got)
	}
	if got := tb.js(t, `document.querySelector("`+lastQuestion+` [data-field=seats]").value`); got != "1" {
		t.Errorf("seats holds %q, want the default 1", got)
	}
	tb.setValue(t, lastQuestion+` [data-field=name]`, "Ada")
	tb.setValue(t, lastQuestion+` [data-field=seats]`, "3")
	e.screenshot(t, tb, "question-form.png")
	tb.do(t, chromedp.Click(chromedp.CSS(lastQuestion+` [data-role=question-submit]`)))
	tb.waitAnswer(t, "Welcome Ada: 3 seats of Pro plan.")

	// Asked again, then the page is reloaded: the answered cards show
	// their answers, the waiting one can still be answered.
	tb.send(t, "another one")
	tb.waitQuestion(t, "userSelect")
	tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chat-form")))
	outcomes := tb.js(t, `[...document.querySelectorAll("#messages .question")].map((c) => c.querySelector("[data-role=question-outcome]").textContent || "waiting").join("|")`)
	if want := "Answered: Pro plan|Answered: Name: Ada\nSeats: 3|waiting"; outcomes != want {
		t.Errorf("reloaded cards %q, want %q", outcomes, want)
	}
	tb.waitQuestion(t, "userSelect")
	tb.do(t, chromedp.Click(chromedp.CSS(lastQuestion+` button[data-option=basic]`)))
	tb.waitAnswer(t, "You chose Basic plan.")
}

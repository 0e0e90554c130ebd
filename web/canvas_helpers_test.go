package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newAppOnCanvas makes an app from the app list as a user does, and
// returns its id once its canvas is open (the starter graph's tool-call
// node is "agent").
func (e *browserEnv) newAppOnCanvas(t *testing.T, tb *tab, name string) string {
	t.Helper()
	tb.do(t,
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.ID("new-app")),
		chromedp.SendKeys(chromedp.ID("new-app-name"), name),
		chromedp.Click(chromedp.CSS(`#new-app button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.react-flow__node[data-id="agent"]`)),
	)
	id := strings.TrimSuffix(strings.TrimPrefix(tb.location(), e.url+"/apps/"), "/flow")
	if id == "" || strings.Contains(id, "/") {
		t.Fatalf("the new app opened at %s, want its canvas", tb.location())
	}
	return id
}

// openNode opens a node's settings in the canvas's side panel. A canvas
// just opened fits its view to the nodes once it has measured them: the
// node is clicked once it stays where it is drawn.
func (tb *tab) openNode(t testing.TB, nodeID string) {
	t.Helper()
	sel := `.react-flow__node[data-id="` + nodeID + `"]`
	rect := `(() => { const r = document.querySelector('` + sel + `').getBoundingClientRect(); return [r.x, r.y, r.width].join(","); })()`
	for last, i := "", 0; i < 50; i++ {
		now := tb.js(t, rect)
		if now == last {
			break
		}
		last = now
		time.Sleep(100 * time.Millisecond)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(sel)))
	run(t, tb, poll[bool](`(id) => { const c = document.querySelector(".panel .node-id code"); return c !== null && c.textContent === id; }`, chromedp.WithPollingArgs(nodeID)))
}

// typeInto types text into the element css matches, as key events sent
// to the page once the element has the focus. chromedp.SendKeys reads
// the element's attributes without a lock while the page may change
// them (the canvas's React re-renders), which the race detector reports
// inside chromedp; this reads none.
func (tb *tab) typeInto(t testing.TB, css, text string) {
	t.Helper()
	// A node the canvas just added stays hidden until it is measured, and
	// a hidden element takes no focus: try until it has it, so that the
	// keys never go to the button clicked before.
	run(t, tb, poll[bool](`(css) => { const e = document.querySelector(css); if (!e) return false; e.focus(); return document.activeElement === e; }`,
		chromedp.WithPollingArgs(css)))
	tb.do(t, chromedp.KeyEvent(text))
}

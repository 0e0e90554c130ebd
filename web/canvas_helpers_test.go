package web_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
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
// just opened fits its view to the nodes once it has measured them, which
// on a busy machine may come after the node first showed: the node is
// clicked once the view and the node stay where they are drawn, and
// clicked again if the click fell where the node no longer was.
func (tb *tab) openNode(t testing.TB, nodeID string) {
	t.Helper()
	sel := `.react-flow__node[data-id="` + nodeID + `"]`
	rect := `(() => { const r = document.querySelector('` + sel + `').getBoundingClientRect(); return [r.x, r.y, r.width].join(","); })()`
	open := `(() => { const c = document.querySelector(".panel .node-id code"); return String(c !== null && c.textContent === ` + strconv.Quote(nodeID) + `); })()`
	run(t, tb, poll[bool](`(sel) => document.querySelector(sel) !== null`, chromedp.WithPollingArgs(sel)))
	for attempt := 0; attempt < 5; attempt++ {
		tb.settled(t)
		for last, i := "", 0; i < 50; i++ {
			now := tb.js(t, rect)
			if now == last {
				break
			}
			last = now
			time.Sleep(100 * time.Millisecond)
		}
		tb.do(t, chromedp.Click(chromedp.CSS(sel)))
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if tb.js(t, open) == "true" {
				return
			}
		}
	}
	t.Fatalf("clicking node %s did not open its settings in the side panel", nodeID)
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

// center is the middle of the element css matches, in the page's
// coordinates; it fails unless that point shows the element itself (or
// something inside it), so that a click there reaches it. An element of
// the canvas that lies under the minimap or the controls, or outside the
// pane (the side panel, once open, narrows it), is first brought to the
// pane's middle by dragging the pane, as a builder would.
func (tb *tab) center(t testing.TB, css string) (float64, float64) {
	t.Helper()
	reach := `(() => {
		const e = document.querySelector(` + strconv.Quote(css) + `);
		if (!e) return [];
		const r = e.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
		const top = document.elementFromPoint(x, y);
		return top && (top === e || e.contains(top)) ? [x, y] : [];
	})()`
	p := run(t, tb, chromedp.Evaluate[[]float64](reach))
	for attempt := 0; len(p) != 2 && attempt < 3; attempt++ {
		// A point of the pane nothing covers, and how far the element
		// is from the pane's middle.
		pan := run(t, tb, chromedp.Evaluate[[]float64](`(() => {
			const e = document.querySelector(`+strconv.Quote(css)+`), pane = document.querySelector(".react-flow__pane");
			if (!e || !pane) return [];
			const r = e.getBoundingClientRect(), b = pane.getBoundingClientRect();
			for (let fy = 0.1; fy < 0.95; fy += 0.05) for (let fx = 0.1; fx < 0.95; fx += 0.05) {
				const x = b.x + b.width * fx, y = b.y + b.height * fy;
				if (document.elementFromPoint(x, y) === pane)
					return [x, y, b.x + b.width / 2 - (r.x + r.width / 2), b.y + b.height / 2 - (r.y + r.height / 2)];
			}
			return [];
		})()`))
		if len(pan) != 4 {
			break
		}
		steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, pan[0], pan[1], chromedp.ButtonLeft)}
		for i := 1; i <= 8; i++ {
			f := float64(i) / 8
			steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, pan[0]+pan[2]*f, pan[1]+pan[3]*f, chromedp.ButtonLeft))
		}
		tb.do(t, append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, pan[0]+pan[2], pan[1]+pan[3], chromedp.ButtonLeft))...)
		tb.settled(t)
		p = run(t, tb, chromedp.Evaluate[[]float64](reach))
	}
	if len(p) != 2 {
		what := tb.js(t, `(() => { const e = document.querySelector(`+strconv.Quote(css)+`); if (!e) return "missing"; const r = e.getBoundingClientRect(); const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2); return "at " + JSON.stringify(r) + " covered by " + (top ? top.outerHTML.slice(0, 200) : "nothing"); })()`)
		t.Fatalf("%s cannot be reached on the page: %s", css, what)
	}
	return p[0], p[1]
}

// connect draws an edge on the canvas as a builder does: a drag from
// the source node's handle (branch, when given) to the target's.
func (tb *tab) connect(t testing.TB, source, branch, target string) {
	t.Helper()
	from := `.react-flow__node[data-id="` + source + `"] .react-flow__handle.source`
	if branch != "" {
		from += `[data-handleid="` + branch + `"]`
	}
	to := `.react-flow__node[data-id="` + target + `"] .react-flow__handle.target`
	// Bringing one end into reach may move the other out of it: both
	// are looked up until neither moves the view.
	sx, sy := tb.center(t, from)
	tx, ty := tb.center(t, to)
	for i := 0; i < 3; i++ {
		ax, ay := tb.center(t, from)
		bx, by := tb.center(t, to)
		if ax == sx && ay == sy && bx == tx && by == ty {
			break
		}
		sx, sy, tx, ty = ax, ay, bx, by
	}
	steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, sx, sy, chromedp.ButtonLeft)}
	for i := 1; i <= 8; i++ {
		f := float64(i) / 8
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, sx+(tx-sx)*f, sy+(ty-sy)*f, chromedp.ButtonLeft))
	}
	tb.do(t, append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, tx, ty, chromedp.ButtonLeft))...)
	id := source + "->" + target
	if branch != "" {
		id += "#" + branch
	}
	for deadline := time.Now().Add(10 * time.Second); tb.js(t, `String(document.querySelector('[data-testid="rf__edge-`+id+`"]') !== null)`) != "true"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			shot := run(t, tb, chromedp.FullScreenshot(100))
			name := filepath.Join(os.TempDir(), "connect-"+strings.ReplaceAll(t.Name(), "/", "_")+".png")
			_ = os.WriteFile(name, shot, 0o644)
			edges := tb.js(t, `[...document.querySelectorAll(".react-flow__edge")].map((e) => e.dataset.testid).join(" ")`)
			t.Fatalf("a drag from %s to %s made no edge %s; the canvas's edges: %s (the page: %s)", from, target, id, edges, name)
		}
	}
}

// setValue gives a React input (text, textarea or select) a value as if
// typed or chosen, then takes the focus away, which commits the panel's
// texts. The value is set in one step and the focus left in another, so
// that React has drawn the new value before its blur handler reads it.
func (tb *tab) setValue(t testing.TB, css, value string) {
	t.Helper()
	run(t, tb, poll[bool](`(css) => document.querySelector(css) !== null`, chromedp.WithPollingArgs(css)))
	tb.js(t, `(() => {
		const e = document.querySelector(`+strconv.Quote(css)+`);
		e.focus();
		const proto = e instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : e instanceof HTMLSelectElement ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, "value").set.call(e, `+strconv.Quote(value)+`);
		e.dispatchEvent(new Event(e instanceof HTMLSelectElement ? "change" : "input", { bubbles: true }));
		return "";
	})()`)
	run(t, tb, poll[bool](`(css, v) => document.querySelector(css).value === v`, chromedp.WithPollingArgs(css, value)))
	tb.js(t, `(() => { document.querySelector(`+strconv.Quote(css)+`).blur(); return ""; })()`)
}

// tidy lays the canvas out (the bar's button) and fits it in view, one
// step of zoom smaller, so that no node lies under the minimap.
func (tb *tab) tidy(t testing.TB) {
	t.Helper()
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar .layout`)), chromedp.Click(chromedp.CSS(`.react-flow__controls-fitview`)),
		chromedp.Click(chromedp.CSS(`.react-flow__controls-zoomout`)))
	time.Sleep(300 * time.Millisecond) // the view's transition
}

// settled waits until the canvas's view stays put: a canvas just opened
// fits its view to the nodes once it has measured them, after they show.
func (tb *tab) settled(t testing.TB) {
	t.Helper()
	view := `(document.querySelector(".react-flow__viewport") || {style: {}}).style.transform || ""`
	for last, same, i := "", 0, 0; same < 3 && i < 100; i++ {
		now := tb.js(t, view)
		if now != "" && now == last {
			same++
		} else {
			same = 0
		}
		last = now
		time.Sleep(100 * time.Millisecond)
	}
}

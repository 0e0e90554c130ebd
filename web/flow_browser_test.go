package web_test

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// The workflow canvas (web/ui/app) in Chromium on the real engine: the
// app's nodes drawn with their kinds in the page's language, a node moved
// by dragging it, the positions saved to the app and drawn there again
// after a reload; auto-layout places every node and saves like a drag.
func TestFlowCanvas(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	demo, err := e.apps.Get(ctx, apps.DemoAppID)
	if err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	flow := e.url + "/apps/" + apps.DemoAppID + "/flow"
	allNodes := `() => document.querySelectorAll(".react-flow__node").length === ` + strconv.Itoa(len(demo.Graph.Nodes))

	tb.do(t, chromedp.Navigate(flow+"?lang=en"))
	run(t, tb, poll[bool](allNodes))
	tb.settled(t)
	for _, n := range demo.Graph.Nodes {
		got := tb.text(t, `[data-node-id="`+n.NodeID+`"] .step-kind`)
		if n.Type == "tools" && got != "Tool call" {
			t.Errorf("the tool-call node's kind reads %q, want %q", got, "Tool call")
		}
	}
	if got := tb.text(t, ".save-state"); got != "All changes saved" {
		t.Errorf("a freshly opened canvas says %q, want it saved", got)
	}
	e.screenshot(t, tb, "canvas.png")

	// Drag the tool-call node 150 px to the right.
	var tools string
	for _, n := range demo.Graph.Nodes {
		if n.Type == "tools" {
			tools = n.NodeID
		}
	}
	box := run(t, tb, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('.react-flow__node[data-id="`+tools+`"]').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`))
	x, y := box[0], box[1]
	// The canvas is zoomed to fit the app: 150 px on the screen are
	// 150/zoom units on the canvas.
	zoom := run(t, tb, chromedp.Evaluate[float64](`Number(/scale\(([0-9.]+)\)/.exec(document.querySelector(".react-flow__viewport").style.transform)[1])`))
	tb.do(t,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x, y, chromedp.ButtonLeft),
		// The drag begins with the first move past the threshold (5 px);
		// the node follows the pointer from there.
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+5, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+50, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+100, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+150, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x+150, y, chromedp.ButtonLeft),
	)
	run(t, tb, poll[bool](`() => document.querySelector(".save-state").textContent === "Unsaved changes"`))
	save(t, tb, "All changes saved")
	saved, err := e.apps.Get(ctx, apps.DemoAppID)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]float64{}
	for _, n := range saved.Graph.Nodes {
		if n.Position == nil {
			t.Fatalf("node %s was saved without a position", n.NodeID)
		}
		before[n.NodeID] = n.Position.X
	}
	laidOut := 320.0 * float64(column(demo, tools))
	if moved := before[tools] - laidOut; math.Abs(moved-145/zoom) > 3 {
		t.Errorf("the dragged node was saved at x=%v, %v right of its column (x=%v); want the 145 px it was dragged after the drag began, at zoom %v: %v", before[tools], moved, laidOut, zoom, 145/zoom)
	}
	if got, err := e.apps.Get(ctx, apps.DemoAppID); err != nil || len(got.Graph.Nodes) != len(demo.Graph.Nodes) || len(got.Graph.Edges) != len(demo.Graph.Edges) {
		t.Errorf("saving the positions changed the graph: %+v, %v", got.Graph, err)
	}

	// After a reload, in Chinese: the node is where it was saved.
	tb.do(t, chromedp.Navigate(flow+"?lang=zh"))
	run(t, tb, poll[bool](allNodes))
	if got := tb.text(t, `[data-node-id="`+tools+`"] .step-kind`); got != "工具调用" {
		t.Errorf("in Chinese the tool-call node's kind reads %q, want 工具调用", got)
	}
	reloaded := tb.js(t, `document.querySelector('.react-flow__node[data-id="`+tools+`"]').style.transform`)
	want := "translate(" + strconv.FormatFloat(before[tools], 'f', -1, 64) + "px"
	if !strings.HasPrefix(reloaded, want) {
		t.Errorf("after a reload the node is drawn at %q, want it at its saved x (%s…)", reloaded, want)
	}
	e.screenshot(t, tb, "canvas-zh.png")
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(flow+"?lang=zh"))
	run(t, tb, poll[bool](allNodes))
	e.screenshot(t, tb, "canvas-phone.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(flow+"?lang=zh"))
	run(t, tb, poll[bool](allNodes))

	state := func(want string) {
		t.Helper()
		run(t, tb, poll[bool](`() => document.querySelector(".save-state").textContent === `+strconv.Quote(want)))
	}
	transform := func(id string) string {
		return tb.js(t, `document.querySelector('.react-flow__node[data-id="`+id+`"]').style.transform`)
	}

	// An edge selected and deleted with the Delete key; Ctrl+Z brings it
	// back, and the canvas is what was saved again.
	edgeCount := `document.querySelectorAll(".react-flow__edge").length`
	mid := run(t, tb, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector(".react-flow__edge path").getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`))
	tb.do(t, chromedp.MouseClickXY(mid[0], mid[1]))
	run(t, tb, poll[bool](`() => document.querySelector(".react-flow__edge.selected") !== null`))
	tb.do(t, chromedp.KeyEvent(kb.Delete))
	run(t, tb, poll[bool](`() => `+edgeCount+` === `+strconv.Itoa(len(demo.Graph.Edges)-1)))
	state("有未保存的更改")
	tb.do(t, chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	run(t, tb, poll[bool](`() => `+edgeCount+` === `+strconv.Itoa(len(demo.Graph.Edges))))
	state("已保存全部更改")

	// Auto-layout puts the dragged node back in its column; Undo and Redo
	// walk over it; saved, every node is at a column's x.
	dragged := transform(tools)
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.layout`)))
	state("有未保存的更改")
	if transform(tools) == dragged {
		t.Errorf("auto-layout left the dragged node where it was (%s)", dragged)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.undo`)))
	state("已保存全部更改")
	if got := transform(tools); got != dragged {
		t.Errorf("after Undo the node is drawn at %s, want %s where it was before the layout", got, dragged)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.redo`)))
	state("有未保存的更改")
	save(t, tb, "已保存全部更改")
	laid, err := e.apps.Get(ctx, apps.DemoAppID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range laid.Graph.Nodes {
		if n.Position == nil || int(n.Position.X)%320 != 0 {
			t.Errorf("after auto-layout node %s is at %+v, want a column's x (a multiple of 320)", n.NodeID, n.Position)
		}
	}
}

// column is how many nodes run before id on the longest path to it: its
// column in the canvas's automatic layout.
func column(a apps.App, id string) int {
	best := 0
	for _, e := range a.Graph.Edges {
		if e.Target == id && e.Source != id {
			best = max(best, column(a, e.Source)+1)
		}
	}
	return best
}

// save clicks the canvas's Save button and waits for the save to end; it
// fails the test with what the page says unless the state reads saved.
func save(t testing.TB, tb *tab, saved string) {
	t.Helper()
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.primary`)))
	run(t, tb, poll[bool](`() => !["save-state save-saving", "save-state save-unsaved"].includes(document.querySelector(".save-state").className)`))
	if got := tb.text(t, ".save-state"); got != saved {
		problem := tb.js(t, `(document.querySelector(".problem") || {}).textContent || ""`)
		t.Fatalf("after Save the canvas says %q (%s), want %q", got, problem, saved)
	}
}

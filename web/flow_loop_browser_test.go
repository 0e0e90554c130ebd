package web_test

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
)

// A loop on the canvas, in Chromium on the real engine, is a box with its
// body drawn inside it, as FastGPT and Dify draw it: dragging the loop
// takes its body along, a node dragged into the box joins the body, and
// what is saved keeps every position in the canvas's own units, each body
// node's parentNodeId and the loop's size.
func TestFlowLoopNested(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)
	ctx := context.Background()
	var g nodes.Graph
	if err := json.Unmarshal([]byte(`{"variables":[{"key":"items","type":"json","defaultValue":["a","b"]}],
		"nodes":[
		{"nodeId":"start","type":"workflowStart","name":"Start","position":{"x":0,"y":0}},
		{"nodeId":"loop","type":"loop","name":"Each item","inputs":{"loopInputArray":"{{$VARIABLE_NODE_ID.items$}}"},
			"position":{"x":320,"y":0},"size":{"width":960,"height":280}},
		{"nodeId":"ls","type":"loopStart","name":"Loop start","parentNodeId":"loop","position":{"x":344,"y":72}},
		{"nodeId":"upper","type":"textEditor","name":"Shout","parentNodeId":"loop","inputs":{"system_textareaInput":"{{$ls.loopStartInput$}}!"},"position":{"x":664,"y":72}},
		{"nodeId":"le","type":"loopEnd","name":"Loop end","parentNodeId":"loop","inputs":{"loopEndInput":"{{$upper.system_text$}}"},"position":{"x":984,"y":72}},
		{"nodeId":"after","type":"answerNode","name":"Results","inputs":{"text":"{{$loop.loopArray$}}"},"position":{"x":1400,"y":0}}],
		"edges":[{"source":"start","target":"loop"},{"source":"loop","target":"after"},
			{"source":"ls","target":"upper"},{"source":"upper","target":"le"}]}`), &g); err != nil {
		t.Fatal(err)
	}
	if err := e.apps.Put(ctx, apps.App{ID: "looped", Name: "Looped", OwnerID: "u:" + enginetest.AdminName, Graph: g}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb := e.signInWith(t, enginetest.AdminName, enginetest.AdminPassword)
	flow := e.url + "/apps/looped/flow"
	count := func(css string) string { return `document.querySelectorAll(` + strconv.Quote(css) + `).length` }
	waitFor := func(cond string) {
		t.Helper()
		run(t, tb, poll[bool](`() => `+cond))
	}
	rect := func(id string) []float64 {
		t.Helper()
		return run(t, tb, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('.react-flow__node[data-id="`+id+`"]').getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()`))
	}
	// steady waits until the canvas has fitted its view to the measured
	// nodes: a node's rectangle stays the same.
	steady := func(id string) {
		t.Helper()
		for last, i := "", 0; i < 50; i++ {
			now := tb.js(t, `(() => { const r = document.querySelector('.react-flow__node[data-id="`+id+`"]').getBoundingClientRect(); return [r.x, r.y, r.width, r.height].join(","); })()`)
			if now == last {
				return
			}
			last = now
			time.Sleep(100 * time.Millisecond)
		}
	}
	inside := func(what string, ids ...string) {
		t.Helper()
		box := rect("loop")
		for _, id := range ids {
			r := rect(id)
			if r[0] < box[0] || r[1] < box[1] || r[2] > box[2] || r[3] > box[3] {
				t.Errorf("%s: node %s is drawn at %v, outside the loop's box %v", what, id, r, box)
			}
		}
	}
	// drag presses at x,y and releases dx,dy px away. The drag begins
	// with the first move past the threshold (5 px), 6 px to the right:
	// the node follows the pointer from there, dx-6,dy px in all.
	drag := func(x, y, dx, dy float64) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{
			chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x, y, chromedp.ButtonLeft),
			chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+6, y, chromedp.ButtonLeft),
		}
		for i := 1; i <= 5; i++ {
			steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+6+(dx-6)*float64(i)/5, y+dy*float64(i)/5, chromedp.ButtonLeft))
		}
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x+dx, y+dy, chromedp.ButtonLeft))
		tb.do(t, steps...)
	}
	zoom := func() float64 {
		return run(t, tb, chromedp.Evaluate[float64](`Number(/scale\(([0-9.]+)\)/.exec(document.querySelector(".react-flow__viewport").style.transform)[1])`))
	}
	body := []string{"ls", "upper", "le"}

	tb.do(t, chromedp.Navigate(flow+"?lang=en"))
	waitFor(count(".react-flow__node") + ` === 6`)
	steady("loop")
	inside("as opened", body...)
	if got := tb.js(t, `getComputedStyle(document.querySelector('.react-flow__node[data-id="loop"]')).width`); got != "960px" {
		t.Errorf("the loop is drawn %s wide, want the 960 px of its size", got)
	}
	e.screenshot(t, tb, "canvas-loop.png")

	// Drag the loop by its header: its body comes along.
	z := zoom()
	before := map[string][]float64{}
	for _, id := range body {
		before[id] = rect(id)
	}
	head := rect("loop")
	drag(head[0]+80, head[1]+20, 150, 90)
	waitFor(`document.querySelector(".save-state").textContent === "Unsaved changes"`)
	for _, id := range body {
		r := rect(id)
		if math.Abs(r[0]-before[id][0]-144) > 2 || math.Abs(r[1]-before[id][1]-90) > 2 {
			t.Errorf("after dragging the loop 144,90 px node %s moved from %v to %v", id, before[id], r)
		}
	}
	inside("after the loop was dragged", body...)
	save(t, tb, "All changes saved")
	got, err := e.apps.Get(ctx, "looped")
	if err != nil {
		t.Fatal(err)
	}
	saved := map[string]nodes.Node{}
	for _, n := range got.Graph.Nodes {
		saved[n.NodeID] = n
	}
	// 144,90 px on the screen are 144/zoom,90/zoom units on the canvas.
	dx := saved["loop"].Position.X - 320
	dy := saved["loop"].Position.Y - 0
	if math.Abs(dx-144/z) > 1 || math.Abs(dy-90/z) > 1 {
		t.Errorf("the loop was saved at %+v, want it moved %v,%v", *saved["loop"].Position, 144/z, 90/z)
	}
	for _, n := range g.Nodes {
		s := saved[n.NodeID]
		want := *n.Position
		if n.ParentNodeID != "" || n.NodeID == "loop" {
			want = nodes.Position{X: want.X + dx, Y: want.Y + dy}
		}
		if s.ParentNodeID != n.ParentNodeID || s.Position == nil || math.Abs(s.Position.X-want.X) > 1 || math.Abs(s.Position.Y-want.Y) > 1 {
			t.Errorf("node %s was saved in %q at %+v, want in %q at %+v (canvas units, not relative to the loop)", n.NodeID, s.ParentNodeID, s.Position, n.ParentNodeID, want)
		}
	}
	if s := saved["loop"].Size; s == nil || *s != (nodes.Size{Width: 960, Height: 280}) {
		t.Errorf("the loop's size was saved as %+v, want 960×280", s)
	}

	// A text node added from the palette, off the loop, then dragged into
	// it: it joins the loop's body, and is connected from the loop start.
	tb.do(t, chromedp.Click(chromedp.CSS(`.palette-item[data-type="textEditor"]`)))
	waitFor(count(`.react-flow__node[data-id="textEditor1"] .step`) + ` === 1`)
	if got := tb.js(t, `document.querySelector('[data-node-id="textEditor1"]').className`); strings.Contains(got, "step-in-loop") {
		t.Fatalf("the new node is drawn as %q, want it added outside the loop", got)
	}
	// Fit the view, so that the new node is on the screen with the loop.
	tb.do(t, chromedp.Click(chromedp.CSS(`.react-flow__controls-fitview`)))
	steady("textEditor1")
	from, box := rect("textEditor1"), rect("loop")
	fx, fy := (from[0]+from[2])/2, (from[1]+from[3])/2
	tx, ty := box[0]+(box[2]-box[0])/2, box[3]-40 // below the body, inside the box
	drag(fx, fy, tx-fx, ty-fy)
	waitFor(count(`[data-node-id="textEditor1"].step-in-loop`) + ` === 1`)
	steady("loop")
	inside("after a node was dragged in", append(body, "textEditor1")...)
	e.screenshot(t, tb, "canvas-loop-dragged-in.png")
	ls, in := rect("ls"), rect("textEditor1")
	sx, sy := ls[2], (ls[1]+ls[3])/2 // the loop start's handle, on its right edge
	tb.do(t,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, sx, sy, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (sx+in[0])/2, (sy+in[1])/2, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, in[0], (in[1]+in[3])/2, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, in[0], (in[1]+in[3])/2, chromedp.ButtonLeft),
	)
	waitFor(count(`.react-flow__edge[data-id="ls->textEditor1"]`) + ` === 1`)
	tb.openNode(t, "textEditor1")
	tb.typeInto(t, `.panel [data-field="system_textareaInput"] textarea`, "round {{$ls.loopStartIndex$}}")
	tb.do(t, chromedp.Click(chromedp.CSS(`.panel #node-name`))) // the text is committed when it loses the focus
	save(t, tb, "All changes saved")
	got, err = e.apps.Get(ctx, "looped")
	if err != nil {
		t.Fatal(err)
	}
	var added *nodes.Node
	for i, n := range got.Graph.Nodes {
		if n.NodeID == "textEditor1" {
			added = &got.Graph.Nodes[i]
		}
		if n.NodeID == "loop" {
			saved["loop"] = n
		}
	}
	if added == nil || added.ParentNodeID != "loop" || added.Position == nil {
		t.Fatalf("the node dragged into the loop was saved as %+v, want it inside the loop", added)
	}
	l := saved["loop"]
	if p := *added.Position; p.X < l.Position.X || p.Y < l.Position.Y || p.X > l.Position.X+l.Size.Width || p.Y > l.Position.Y+l.Size.Height {
		t.Errorf("the node dragged into the loop was saved at %+v, want it within the loop at %+v (%+v)", p, *l.Position, *l.Size)
	}

	// The loop resized from its corner: the size is saved with it. The
	// view is panned first, so that the corner is off the side panel.
	pane := rect("loop")
	drag(pane[0]+40, pane[1]-40, -300, 0)
	steady("loop")
	z = zoom()
	corner := run(t, tb, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector('.react-flow__node[data-id="loop"] .loop-resize').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`))
	steps := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, corner[0], corner[1], chromedp.ButtonLeft)}
	for i := 1; i <= 5; i++ {
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, corner[0]+float64(i)*20, corner[1]+float64(i)*12, chromedp.ButtonLeft))
	}
	tb.do(t, append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, corner[0]+100, corner[1]+60, chromedp.ButtonLeft))...)
	save(t, tb, "All changes saved")
	if got, err = e.apps.Get(ctx, "looped"); err != nil {
		t.Fatal(err)
	}
	for _, n := range got.Graph.Nodes {
		if n.NodeID != "loop" {
			continue
		}
		if s := n.Size; s == nil || math.Abs(s.Width-960-100/z) > 2 || math.Abs(s.Height-280-60/z) > 2 {
			t.Errorf("after resizing the loop by 100,60 px its size was saved as %+v, want about %v×%v", s, 960+100/z, 280+60/z)
		}
	}
	inside("after the loop was resized", append(body, "textEditor1")...)

	// The side panel takes the node out of the loop: it is drawn outside
	// the box; Undo puts it back.
	tb.js(t, `(() => { const s = document.getElementById("node-parent"); s.value = ""; s.dispatchEvent(new Event("change", { bubbles: true })); return ""; })()`)
	waitFor(count(`[data-node-id="textEditor1"].step-in-loop`) + ` === 0`)
	if r, box := rect("textEditor1"), rect("loop"); r[1] < box[3] {
		t.Errorf("the node taken out of the loop by the side panel is drawn at %v, want it below the loop's box %v", r, box)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.undo`)))
	waitFor(count(`[data-node-id="textEditor1"].step-in-loop`) + ` === 1`)
	inside("after Undo", "textEditor1")

	// Deleting the loop deletes its body; one Undo brings all back.
	box = rect("loop")
	tb.do(t, chromedp.MouseClickXY(box[0]+80, box[1]+20))
	waitFor(count(`.react-flow__node.selected[data-id="loop"]`) + ` === 1`)
	tb.do(t, chromedp.KeyEvent(kb.Delete))
	waitFor(count(".react-flow__node") + ` === 2`)
	waitFor(count(".react-flow__edge") + ` === 0`)
	tb.do(t, chromedp.Click(chromedp.CSS(`.builder-bar button.undo`)))
	waitFor(count(".react-flow__node") + ` === 7 && ` + count(".react-flow__edge") + ` === 5`)
	waitFor(`document.querySelector(".save-state").textContent === "All changes saved"`)

	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(flow+"?lang=zh"))
	waitFor(count(".react-flow__node") + ` === 7`)
	steady("loop")
	inside("on a phone", append(body, "textEditor1")...)
	e.screenshot(t, tb, "canvas-loop-phone.png")
}

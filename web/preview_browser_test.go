package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// previewPage is the site the agent serves in TestPreviewBrowser: its
// script fetches a file beside it, talks to the server's WebSocket and
// tries to read the cookies, and writes what happened.
const previewPage = `<meta charset="utf-8"><h1>hello preview</h1><p id="f">-</p><p id="w">-</p><p id="c">-</p>
<script>
const say = (id, text) => { document.getElementById(id).textContent = text; };
fetch("data.json").then((r) => r.json()).then((d) => say("f", "fetched " + d.v)).catch((e) => say("f", "fetch failed: " + e));
const u = new URL("../ws", location.href);
u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
const ws = new WebSocket(u);
ws.onopen = () => ws.send("hi");
ws.onmessage = (e) => say("w", e.data);
ws.onerror = () => say("w", "websocket failed");
try { say("c", "cookies: " + document.cookie); } catch (e) { say("c", "cookies blocked"); }
</script>
`

// reportPage is an HTML file the agent writes in TestPreviewBrowser, to
// be opened rendered: its style sheet and script are files beside it, and
// the script fetches a third and tries to read the cookies.
const reportPage = `<meta charset="utf-8"><link rel="stylesheet" href="report.css"><h1>Quarterly report</h1>
<p id="f">-</p><p id="c">-</p><script src="report.js"></script>
`

const reportScript = `const say = (id, text) => { document.getElementById(id).textContent = text; };
fetch("data.json").then((r) => r.json()).then((d) => say("f", "fetched " + d.v)).catch((e) => say("f", "fetch failed: " + e));
try { say("c", "cookies: " + document.cookie); } catch (e) { say("c", "cookies blocked"); }
`

// TestPreviewBrowser (L2): the chat's files panel lists the agent's link;
// its owner opens it in Chromium and the page works in its opaque origin
// (its own requests and WebSocket go through, the engine's cookies stay
// out of reach); the same page as a workspace file, opened rendered from
// the panel; the panel on a desktop and a phone in Chinese.
func TestPreviewBrowser(t *testing.T) {
	t.Parallel()
	srv := newPreviewServer(t)
	call := func(id, tool, args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(id, tool, args)}}
	}
	setup := "mkdir -p site && cat > site/index.html <<'EOF'\n" + previewPage + "EOF\ncat > site/report.html <<'EOF'\n" + reportPage +
		"EOF\ncat > site/report.js <<'EOF'\n" + reportScript + "EOF\necho 'h1 { color: rgb(200, 0, 0) }' > site/report.css && echo '{\"v\": 42}' > site/data.json && " + srv.write
	e, _, appID := newScriptedBrowser(t, "Site",
		call("c1", "sandbox_shell", mustJSON(t, map[string]string{"command": setup})),
		call("c2", "sandbox_process", mustJSON(t, map[string]string{"action": "start", "command": srv.start})),
		call("c3", "sandbox_shell", mustJSON(t, map[string]string{"command": srv.wait})),
		call("c4", "sandbox_process", `{"action":"link","port":8765}`),
		llmtest.Reply{Text: "Your site is up: open it from the Preview links."})

	tb := e.signIn(t, "alice")
	chatID := e.openChat(t, tb, appID)
	tb.ask(t, "build me a site")
	row := `#files [data-preview="8765"]`
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(row)))
	if got := tb.text(t, row+` [data-role=preview-state]`); got != "only you" {
		t.Errorf("the link is shown %q, want only you", got)
	}
	// One more, for a port nothing listens on yet.
	tb.setValue(t, `#files [data-role=preview-port]`, "5173")
	tb.do(t, chromedp.Click(chromedp.CSS(`#files [data-role=preview-open]`)), chromedp.WaitVisible(chromedp.CSS(`#files [data-preview="5173"]`)))
	// What the sandbox uses, while it runs (L4).
	if got := run(t, tb, poll[string](`() => document.querySelector('#files [data-role=usage-memory]')?.textContent ?? ""`)); !strings.Contains(got, "iB") {
		t.Errorf("the panel shows the sandbox's memory as %q", got)
	}
	e.screenshot(t, tb, "previews.png")
	href := run(t, tb, chromedp.Evaluate[string](`document.querySelector('#files [data-preview="8765"] a').getAttribute("href")`))
	if !strings.HasPrefix(href, "/preview/") {
		t.Fatalf("the link is %q", href)
	}

	// The owner opens it (as the link's new tab would): sent on with a
	// grant, to a page that works in its own origin.
	tb.do(t, chromedp.Navigate(e.url+href+"site/"))
	got := run(t, tb, poll[string](`() => { const w = document.getElementById("w"); return w && w.textContent !== "-" && document.getElementById("f").textContent !== "-" ? [document.getElementById("f").textContent, w.textContent, document.getElementById("c").textContent].join(" | ") : ""; }`))
	if got != "fetched 42 | echo: hi | cookies blocked" {
		t.Errorf("the page says %q", got)
	}
	if loc := run(t, tb, chromedp.Evaluate[string](`location.pathname`)); !strings.Contains(loc, "~") {
		t.Errorf("the page is at %q, without the owner's grant", loc)
	}

	// An HTML file of the workspace, opened rendered from the files panel
	// (FastGPT's HTML preview): in a sandboxed frame, through the link to
	// the workspace's files, its relative fetch served from the
	// workspace, the engine's cookies out of its reach.
	tb.do(t, chromedp.Navigate(e.url+"/apps/"+appID+"/chat/"+chatID),
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/site"] a`)),
		chromedp.Click(chromedp.CSS(`#files li[data-path="/workspace/site"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/site/report.html"] a`)),
		chromedp.Click(chromedp.CSS(`#files li[data-path="/workspace/site/report.html"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#files [data-role=render-file]`)),
		chromedp.Click(chromedp.CSS(`#files [data-role=render-file]`)),
		chromedp.WaitVisible(chromedp.CSS(`#files iframe[data-role=rendered][data-loaded]`)))
	tb.js(t, `(document.querySelector('#files iframe[data-role=rendered]').scrollIntoView({ block: "center" }), "")`)
	e.viewShot(t, tb, "html-file-rendered.png")
	rendered := run(t, tb, chromedp.Evaluate[string](`document.querySelector('#files iframe[data-role=rendered]').getAttribute("src")`))
	if !strings.HasPrefix(rendered, "/preview/") || !strings.HasSuffix(rendered, "/site/report.html") {
		t.Fatalf("the file is rendered from %q", rendered)
	}
	tb.do(t, chromedp.Navigate(e.url+rendered))
	got = run(t, tb, poll[string](`() => { const f = document.getElementById("f"); return f && f.textContent !== "-" ? [getComputedStyle(document.querySelector("h1")).color, f.textContent, document.getElementById("c").textContent].join(" | ") : ""; }`))
	if got != "rgb(200, 0, 0) | fetched 42 | cookies blocked" {
		t.Errorf("the rendered file says %q", got)
	}

	// On a phone, in Chinese.
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/apps/"+appID+"/chat/"+chatID+"?lang=zh"),
		chromedp.WaitVisible(chromedp.CSS(`.files-toggle`)), chromedp.Click(chromedp.CSS(`.files-toggle`)),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if got := tb.text(t, row+` [data-role=preview-state]`); got != "仅自己" {
		t.Errorf("on the phone the link is shown %q", got)
	}
	tb.js(t, `(document.querySelector('#files [data-role=previews]').scrollIntoView({ block: "center" }), "")`)
	e.viewShot(t, tb, "previews-phone-zh.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800))
}

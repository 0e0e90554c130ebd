package web_test

// The tools besides the sandbox in Chromium (N6): an admin registers MCP
// servers on the MCP servers page, lists a server's tools, edits one
// without seeing or losing its secrets, and deletes one; a builder
// chooses an exec tool and a server for an app, and sees a chosen server
// that is no longer available; in a chat the scripted model calls the
// exec tool and the server's tool in one round and both cards show what
// they gave.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// browserExecTools are the operator's exec tools of the scenario: one on
// the host that changes nothing, one in the sandbox that deletes.
const browserExecTools = `[
  {"name": "shout", "description": "Upper-case a text.", "runIn": "host", "readOnly": true, "concurrencySafe": true,
   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
   "exec": ["python3", "-c", "import json, sys; print(json.load(sys.stdin)['text'].upper())"]},
  {"name": "wipe_scratch", "description": "Delete the chat's scratch folder.", "runIn": "sandbox", "destructive": true,
   "exec": ["rm", "-rf", "/workspace/intermediate/scratch"]}
]`

const echoToken = "s3cret-token"

func TestToolsBrowser(t *testing.T) {
	t.Parallel()
	tools := writeFile(t, t.TempDir(), "tools.json", browserExecTools)
	echo := newEchoServer(t, echoToken)
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("call_shout", "shout", `{"text":"hello"}`),
			llmtest.Call("call_echo", "team__echo", `{"text":"ping"}`)}},
		llmtest.Reply{Text: "Both tools answered."})
	e := newBrowserEnvWith(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_LLM_BASE_URL": model.BaseURL,
		"FLOWBOX_EXEC_TOOLS":   tools,
		// The MCP server is on loopback: allowed as an operator would.
		"FLOWBOX_OUTBOUND_ALLOW": echo.Listener.Addr().String(),
	}})
	srv := &enginetest.Env{URL: e.url, Engine: e.engine}

	mcpServersPage(t, e, echo.URL)

	// Alice's app runs on the scripted model; it chose the stdio server
	// before the admin disabled it.
	alice := srv.Login(t, "alice", browserUsers["alice"])
	appID := scriptedApp(t, alice, "Tool user", map[string]string{"tools": `["mcp:local"]`})

	// The builder lists the exec tools and the enabled servers; the
	// chosen server that is no longer offered stays listed, marked.
	tb := e.signIn(t, "alice")
	tb.do(t, chromedp.Navigate(e.url+"/apps/"+appID+"/flow"))
	openTools := func() {
		t.Helper()
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.react-flow__node[data-id="agent"]`)))
		tb.openNode(t, "agent")
		tb.do(t, chromedp.WaitVisible(chromedp.CSS(`.panel [data-field="tools"] li[data-choice="shout"]`)))
	}
	openTools()
	choices := func() string {
		return tb.js(t, `[...document.querySelectorAll('.panel [data-field="tools"] li')].map((li) =>
			(li.querySelector("input").checked ? "[x] " : "[ ] ") + li.dataset.choice + ": " +
			[...li.querySelectorAll("label > span")].map((s) => s.textContent).join(" · ")).join("\n")`)
	}
	want := strings.Join([]string{
		"[ ] shout: shout · runs on the engine's host · read-only · Upper-case a text.",
		"[ ] wipe_scratch: wipe_scratch · runs in the chat's sandbox · destructive · Delete the chat's scratch folder.",
		"[ ] mcp:team: Team echo · HTTP · ID: team",
		"[ ] mcp:team/echo: Team echo / echo · HTTP · read-only · Send the text back.",
		"[x] mcp:local: local · no longer available",
	}, "\n")
	if got := choices(); got != want {
		t.Errorf("the builder's tools:\n%s\nwant\n%s", got, want)
	}
	// The builder takes the exec tool and the server, and lets the
	// server that is gone go.
	list := `.panel [data-field="tools"] `
	tb.do(t,
		chromedp.Click(chromedp.CSS(list+`li[data-choice="shout"] input`)),
		chromedp.Click(chromedp.CSS(list+`li[data-choice="mcp:team"] input`)),
		chromedp.Click(chromedp.CSS(list+`li[data-choice="mcp:local"] input`)),
	)
	save(t, tb, "All changes saved")
	openTools()
	want = strings.Join([]string{
		"[x] shout: shout · runs on the engine's host · read-only · Upper-case a text.",
		"[ ] wipe_scratch: wipe_scratch · runs in the chat's sandbox · destructive · Delete the chat's scratch folder.",
		"[x] mcp:team: Team echo · HTTP · ID: team",
		"[ ] mcp:team/echo: Team echo / echo · HTTP · read-only · Send the text back.",
	}, "\n")
	if got := choices(); got != want {
		t.Errorf("after saving and reloading, the builder's tools:\n%s\nwant\n%s", got, want)
	}
	e.screenshot(t, tb, "tools-builder.png")
	var stored struct {
		Graph struct {
			Nodes []struct {
				Type   string
				Inputs map[string]json.RawMessage
			}
		}
	}
	expect(t, alice, "GET", "/api/apps/"+appID, nil, 200).JSON(t, &stored)
	var chosen []string
	for _, n := range stored.Graph.Nodes {
		if n.Type == "tools" {
			if err := json.Unmarshal(n.Inputs["tools"], &chosen); err != nil {
				t.Fatalf("the node's tools input %s: %v", n.Inputs["tools"], err)
			}
		}
	}
	if !slices.Equal(chosen, []string{"shout", "mcp:team"}) {
		t.Errorf("the app's node has the tools %q, want shout and mcp:team", chosen)
	}

	// A chat: the model calls both tools in one round; each card shows
	// its tool, arguments, status and result, live and from the history.
	tb = e.signIn(t, "alice")
	e.openChat(t, tb, appID)
	tb.ask(t, "Shout hello and echo ping")
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the question, both results)", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if !slices.Contains(offered, "shout") || !slices.Contains(offered, "team__echo") || slices.Contains(offered, "wipe_scratch") {
		t.Errorf("the model was offered %q, want shout and team__echo, not wipe_scratch", offered)
	}
	cards := []struct{ id, tool, args, stdout string }{
		{"call_shout", "shout", `{"text":"hello"}`, "HELLO"},
		{"call_echo", "team__echo", `{"text":"ping"}`, "echo: ping"},
	}
	for _, view := range []string{"streamed", "from history"} {
		if view == "from history" {
			tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#messages .tool-card .badge.success`)))
		}
		for _, c := range cards {
			card := `#messages .tool-card[data-tool-id="` + c.id + `"]`
			tb.do(t, chromedp.Click(chromedp.CSS(card+" summary")), chromedp.WaitVisible(chromedp.CSS(card+" [data-role=stdout]")))
			got := tb.text(t, card+" .label") + " | " + tb.text(t, card+" [data-role=command]") + " | " +
				tb.text(t, card+" [data-role=status]") + " | " + tb.text(t, card+" [data-role=stdout]")
			if want := c.tool + " | " + c.args + " | success | " + c.stdout; got != want {
				t.Errorf("%s: the card of %s shows %q, want %q", view, c.tool, got, want)
			}
		}
		if got := tb.text(t, `#messages .msg.assistant:last-child .text`); got != "Both tools answered." {
			t.Errorf("%s: the answer is %q", view, got)
		}
	}
	e.screenshot(t, tb, "tools-chat.png")

	// The admin deletes the stdio server.
	tb = e.signIn(t, "admin")
	tb.do(t, chromedp.Navigate(e.url+"/admin/mcp"), chromedp.WaitVisible(chromedp.CSS(`#mcp-servers tr[data-server="local"]`)))
	if got, ok := clickForStatus(t, tb, `#mcp-servers tr[data-server="local"] [data-mcp-action=delete]`, "#mcp-status"); !ok || got != `The server "Local files" was deleted.` {
		t.Errorf("deleting the server shows %q (ok %v)", got, ok)
	}
	tb.do(t, chromedp.WaitNotPresent(chromedp.CSS(`#mcp-servers tr[data-server="local"]`)))
	tb.mu.Lock()
	asked := slices.Clone(tb.dialogs)
	tb.mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], `Delete the MCP server "Local files"?`) {
		t.Errorf("dialogs %q, want one confirmation of the deletion", asked)
	}
	if _, err := e.engine.Services.MCPServers.Get(context.Background(), "local"); err == nil {
		t.Error("the deleted server is still registered")
	}
}

// mcpServersPage: the admin registers an HTTP server with a header and a
// token, and a disabled stdio server, through the page's form (mistakes
// answered with their reasons); lists their tools, or why they cannot be
// listed; and edits the HTTP server, the masked secrets kept.
func mcpServersPage(t *testing.T, e *browserEnv, echoURL string) {
	tb := e.signIn(t, "admin")
	tb.expected = []string{"status of 400"} // the refused id, the stdio server's listing
	tb.do(t,
		chromedp.Navigate(e.url+"/admin"),
		chromedp.Click(chromedp.CSS(`header nav a[href="/admin/mcp"]`)),
		chromedp.WaitVisible(chromedp.ID("mcp-empty")),
	)
	if got := tb.text(t, "#mcp-empty"); got != "No MCP servers are registered." {
		t.Errorf("an empty registry shows %q", got)
	}
	const formStatus = "#mcp-form [data-role=status]"
	submit := `#mcp-form button[type=submit]`

	// A header line without a colon is caught before anything is sent;
	// an id the server refuses shows the server's reason.
	tb.do(t,
		chromedp.SendKeys(chromedp.ID("mcp-id"), "Team Echo"),
		chromedp.SendKeys(chromedp.ID("mcp-name"), "Team tools"),
		chromedp.SendKeys(chromedp.ID("mcp-url"), echoURL),
		chromedp.SendKeys(chromedp.ID("mcp-headers"), "X-Team blue"),
		chromedp.SendKeys(chromedp.ID("mcp-token"), echoToken),
	)
	if got, ok := clickForStatus(t, tb, submit, formStatus); ok || got != `Header line 1 is not "Name: value".` {
		t.Errorf("a header line without a colon shows %q (ok %v)", got, ok)
	}
	tb.do(t, chromedp.SetValue(chromedp.ID("mcp-headers"), "X-Team: blue"))
	if got, ok := clickForStatus(t, tb, submit, formStatus); ok || !strings.Contains(got, "must be 1 to 32 lowercase letters") {
		t.Errorf("a bad id shows %q (ok %v), want the server's reason", got, ok)
	}
	tb.do(t, chromedp.SetValue(chromedp.ID("mcp-id"), "team"))
	if got, ok := clickForStatus(t, tb, submit, formStatus); !ok || got != `The server "Team tools" was added.` {
		t.Fatalf("adding the server shows %q (ok %v)", got, ok)
	}
	row := `#mcp-servers tr[data-server="team"]`
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(row)))
	if got, want := rowCells(t, tb, row), "id=team|name=Team tools|transport=HTTP|where="+echoURL+"Headers: X-Team|token=yes|enabled=enabled"; got != want {
		t.Errorf("the server's row:\n got %s\nwant %s", got, want)
	}
	if got := formValues(t, tb); got != " |  | http |  |  |  | true" {
		t.Errorf("after adding, the form holds %q, want it empty again", got)
	}

	// A stdio server: its command, one argument per line; disabled.
	tb.do(t,
		chromedp.SendKeys(chromedp.ID("mcp-transport"), "s"),
		chromedp.WaitVisible(chromedp.ID("mcp-command")),
		chromedp.WaitNotVisible(chromedp.ID("mcp-url")),
		chromedp.SendKeys(chromedp.ID("mcp-id"), "local"),
		chromedp.SendKeys(chromedp.ID("mcp-name"), "Local files"),
		chromedp.SendKeys(chromedp.ID("mcp-command"), "/workspace/mcp-server\n--root\n/workspace/my uploads"),
		chromedp.Click(chromedp.CSS(`label[for="mcp-enabled"]`)),
	)
	if got, ok := clickForStatus(t, tb, submit, formStatus); !ok || got != `The server "Local files" was added.` {
		t.Fatalf("adding the stdio server shows %q (ok %v)", got, ok)
	}
	local := `#mcp-servers tr[data-server="local"]`
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(local)))
	if got, want := rowCells(t, tb, local), `id=local|name=Local files|transport=stdio|where=/workspace/mcp-server --root "/workspace/my uploads"|token=no|enabled=disabled`; got != want {
		t.Errorf("the stdio server's row:\n got %s\nwant %s", got, want)
	}
	if srv, err := e.engine.Services.MCPServers.Get(context.Background(), "local"); err != nil ||
		!slices.Equal(srv.Command, []string{"/workspace/mcp-server", "--root", "/workspace/my uploads"}) || srv.Enabled {
		t.Errorf("the stdio server as registered: %+v %v", srv, err)
	}

	// Its tools: the HTTP server's are listed; the stdio server's cannot
	// be, and the page says why.
	if got, ok := clickForStatus(t, tb, row+` [data-mcp-action=tools]`, "#mcp-tools [data-role=status]"); !ok || got != "The server offers 1 tool(s)." {
		t.Errorf("listing the tools shows %q (ok %v)", got, ok)
	}
	if got := tb.text(t, "#mcp-tools [data-role=title]"); got != "Tools of Team tools" {
		t.Errorf("the tools are titled %q", got)
	}
	if got, want := rowCells(t, tb, `#mcp-tools tr[data-tool="team__echo"]`), "name=team__echo|tool=echo|description=Send the text back.|read-only=yes"; got != want {
		t.Errorf("the echo tool's row:\n got %s\nwant %s", got, want)
	}
	e.screenshot(t, tb, "mcp-servers.png")
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/admin/mcp?lang=zh"), chromedp.WaitVisible(chromedp.CSS(row)))
	e.phoneFits(t, tb, "mcp-servers-phone-zh.png")
	tb.do(t, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(e.url+"/admin/mcp?lang=en"), chromedp.WaitVisible(chromedp.CSS(row)))
	got, ok := clickForStatus(t, tb, local+` [data-mcp-action=tools]`, "#mcp-tools [data-role=status]")
	if ok || !strings.HasPrefix(got, "The tools of Local files could not be listed: ") || !strings.Contains(got, "listed when a chat first uses it") {
		t.Errorf("listing the stdio server's tools shows %q (ok %v), want the server's reason", got, ok)
	}
	if visible := run(t, tb, chromedp.Evaluate[bool](`document.querySelector("#mcp-tools [data-role=tools]").checkVisibility()`)); visible {
		t.Error("the tools of the previous server are still shown")
	}

	// Edit: the form shows the secrets masked, never their values; a new
	// name saved keeps them.
	tb.do(t, chromedp.Click(chromedp.CSS(row+` [data-mcp-action=edit]`)), chromedp.WaitVisible(chromedp.CSS(`#mcp-form [data-role=cancel]`)))
	if got, want := formValues(t, tb), "team (read-only) | Team tools | http | "+echoURL+" | X-Team: ••• | ••• | true"; got != want {
		t.Errorf("the edit form:\n got %s\nwant %s", got, want)
	}
	if got := tb.text(t, "#mcp-form [data-role=title]"); got != "Edit the server team" {
		t.Errorf("the edit form is titled %q", got)
	}
	tb.do(t, chromedp.SetValue(chromedp.ID("mcp-name"), "Team echo"))
	if got, ok := clickForStatus(t, tb, submit, formStatus); !ok || got != `The server "Team echo" was saved.` {
		t.Fatalf("saving the server shows %q (ok %v)", got, ok)
	}
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(row+` td[data-role=name]`)))
	run(t, tb, poll[bool](`() => document.querySelector('#mcp-servers tr[data-server="team"] td[data-role=name]').textContent === "Team echo"`))
	srv, err := e.engine.Services.MCPServers.Get(context.Background(), "team")
	if err != nil || srv.Name != "Team echo" || srv.Token != echoToken || srv.Headers["X-Team"] != "blue" || srv.URL != echoURL || !srv.Enabled {
		t.Errorf("the server after the edit: %+v %v, want the new name with its token and header kept", srv, err)
	}
	// The token kept, the server still answers.
	if got, ok := clickForStatus(t, tb, row+` [data-mcp-action=tools]`, "#mcp-tools [data-role=status]"); !ok || got != "The server offers 1 tool(s)." {
		t.Errorf("listing the tools after the edit shows %q (ok %v)", got, ok)
	}
}

// clickForStatus clicks css and waits until the status line at status
// says how the action went: its text, and whether it went well.
func clickForStatus(t *testing.T, tb *tab, css, status string) (string, bool) {
	t.Helper()
	// The line may still show the previous action's outcome.
	run(t, tb, chromedp.Evaluate[bool](`((css) => { const l = document.querySelector(css); l.className = "status"; l.textContent = ""; return true; })(`+jsString(status)+`)`))
	tb.do(t, chromedp.Click(chromedp.CSS(css)))
	run(t, tb, poll[bool](`(css) => { const l = document.querySelector(css); return l.classList.contains("ok") || l.classList.contains("error"); }`,
		chromedp.WithPollingArgs(status)))
	ok := run(t, tb, chromedp.Evaluate[bool](`document.querySelector(`+jsString(status)+`).classList.contains("ok")`))
	return tb.text(t, status), ok
}

// formValues is what the MCP server form holds: id, name, transport,
// URL, headers, token, enabled.
func formValues(t *testing.T, tb *tab) string {
	t.Helper()
	return tb.js(t, `(() => { const f = document.getElementById("mcp-form").elements;
		return [f.id.value + (f.id.readOnly ? " (read-only)" : ""), f.name.value, f.transport.value, f.url.value, f.headers.value, f.token.value, f.enabled.checked].join(" | "); })()`)
}

// rowCells is a table row's cells that have a role, as "role=text|...".
func rowCells(t *testing.T, tb *tab, row string) string {
	t.Helper()
	return tb.js(t, `[...document.querySelectorAll(`+jsString(row+" td[data-role]")+`)].map((td) => td.dataset.role + "=" + td.textContent).join("|")`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

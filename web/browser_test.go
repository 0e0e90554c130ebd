package web_test

// Browser tests: the product's pages in Debian's Chromium, started headless
// by the test, against the real handler on a loopback server with the
// embedded MongoDB-wire database, a bwrap sandbox provider, the workers on
// the embedded Redis and the offline demo model. Each scenario checks what
// a user would look at.

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox"
)

// ScreenshotDirEnv names the directory the browser tests write their
// screenshots to; unset, they go to a temporary directory. A relative path
// is relative to this package's directory.
const ScreenshotDirEnv = "FLOWBOX_SCREENSHOT_DIR"

// browserWait bounds one tab's whole scenario, every wait in it; nothing
// sleeps. It only ends a test that hangs: a scenario of several pages and
// model rounds took over a minute on a loaded CI machine.
const browserWait = 3 * time.Minute

// browserUsers are the first passwords of the scenarios' users; bea's is
// the one the admin gives her on the users page.
var browserUsers = map[string]string{"admin": enginetest.AdminPassword, "alice": enginetest.Password("alice"), "bea": "bea-password-1"}

type browserEnv struct {
	url      string
	engine   *engine.Engine
	manager  *sandbox.Manager
	provider sandbox.Provider
	apps     *apps.Store
	chats    *history.Store
	browser  context.Context // a running Chromium; each tab is a child
	shots    string
}

// newBrowserEnv serves the product as engine serve builds it
// (enginetest) and starts Chromium. The workers record deletions but only
// run once a scenario starts them.
func newBrowserEnv(t testing.TB) *browserEnv {
	t.Helper()
	return newBrowserEnvWith(t, enginetest.Options{})
}

// newBrowserEnvWith is newBrowserEnv with the product started with opts.
func newBrowserEnvWith(t testing.TB, opts enginetest.Options) *browserEnv {
	t.Helper()
	chromium, err := chromiumBinary()
	if err != nil {
		testenv.Need(t, "chromium", err)
	}
	env := enginetest.Start(t, opts)
	env.CreateUser(t, "alice", auth.RoleUser)
	shots := os.Getenv(ScreenshotDirEnv)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	svc := env.Engine.Services
	return &browserEnv{url: env.URL, engine: env.Engine, manager: svc.Manager, provider: svc.Provider,
		apps: env.Engine.Apps, chats: env.Engine.Chats, browser: startChromium(t, chromium), shots: shots}
}

// newScriptedBrowser is newBrowserEnv with a scripted model that answers
// with replies, and alice's app named name whose agent talks to it; it
// returns alice's API client too.
func newScriptedBrowser(t *testing.T, name string, replies ...llmtest.Reply) (*browserEnv, *enginetest.Client, string) {
	t.Helper()
	model := llmtest.New(t, replies...)
	e := newBrowserEnvWith(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	alice := (&enginetest.Env{URL: e.url, Engine: e.engine}).Login(t, "alice", browserUsers["alice"])
	return e, alice, scriptedApp(t, alice, name, nil)
}

// chromiumBinary finds Debian's Chromium: its headless shell (the package
// chromium-headless-shell: the same browser without a window system, half
// the CPU time of chromium --headless for the same scenario), else the
// full browser.
func chromiumBinary() (string, error) {
	for _, name := range []string{"chromium-headless-shell", "chromium"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin, nil
		}
	}
	return "", errors.New("no Chromium (apt-get install chromium-headless-shell)")
}

// startChromium starts a headless Chromium on a fresh profile. The flags
// keep it off the network: without them it calls home for updates,
// sync and field trials, and this machine has no internet.
func startChromium(t testing.TB, bin string) context.Context {
	t.Helper()
	profile := t.TempDir() // registered first, removed after Chromium exits
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		if err := chromedp.Cancel(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing Chromium: %v", err)
		}
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", bin, err)
	}
	return ctx
}

// tab is one browser tab with its own cookies. Dialogs are accepted
// (prompts answered with promptText) and recorded; errors on the page's
// console fail the test.
type tab struct {
	ctx        context.Context
	mu         sync.Mutex
	dialogs    []string
	promptText string
	// expected are console errors the scenario causes on purpose.
	expected []string
}

func (e *browserEnv) newTab(t testing.TB) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(e.browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	tb := &tab{ctx: ctx}
	dialogs := chromedp.Events(ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, ev.Message)
			answer := tb.promptText
			tb.mu.Unlock()
			_, _ = chromedp.Call(ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true, PromptText: answer})
		}
	}()
	console := chromedp.Console(ctx)
	var problems []string // written by the reader, read once it is done
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range console {
			if err != nil {
				return
			}
			// ERR_NETWORK_CHANGED is Chromium noticing that another test
			// added or removed a network interface on this machine (the
			// network tests' namespaces), not the page's doing.
			if (m.Type == "error" || m.IsException()) && !strings.Contains(m.Text, "net::ERR_NETWORK_CHANGED") {
				problems = append(problems, fmt.Sprintf("%s (%s)", m.Text, m.URL))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, p := range problems {
			if !slices.ContainsFunc(tb.expected, func(s string) bool { return strings.Contains(p, s) }) {
				t.Errorf("the page logged an error: %s", p)
			}
		}
	})
	// The scenario's deadline bounds every wait; the tab outlives it.
	wctx, wcancel := context.WithTimeout(ctx, browserWait)
	t.Cleanup(wcancel)
	tb.ctx = wctx
	return tb
}

func (tb *tab) do(t testing.TB, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		t.Fatalf("%v (%s)", err, tb.where())
	}
}

func (tb *tab) location() string {
	// On a busy machine a call may take a while: a few tries, each
	// bounded, so that a tab that hangs does not hang the test.
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.ctx), 5*time.Second)
		loc, err := chromedp.Run(ctx, chromedp.Location())
		cancel()
		if err == nil || try == 5 {
			return loc
		}
	}
}

// chatID is the id of the chat the tab shows (its page's URL ends with
// it); the test fails if it shows none.
func (tb *tab) chatID(t *testing.T) string {
	t.Helper()
	loc := tb.location()
	id := path.Base(loc)
	if !strings.Contains(loc, "/chat/") || id == "new" {
		t.Fatalf("the tab shows %q, not a chat", loc)
	}
	return id
}

// where says, for a failed step, which page the tab shows and how the
// chat's last message there ends, if the page has one.
func (tb *tab) where() string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.ctx), 2*time.Second)
	defer cancel()
	loc := tb.location()
	last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const m = document.querySelector("#messages > :last-child");
		return m === null ? "" : m.innerText.slice(-600);
	})()`))
	if last == "" {
		return "page " + loc
	}
	return fmt.Sprintf("page %s, whose last chat message ends %q", loc, last)
}

func run[T any](t testing.TB, tb *tab, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, a)
	if err != nil {
		t.Fatalf("%v (%s)", err, tb.where())
	}
	return v
}

// poll waits until the page function returns a truthy value. Its only bound
// is the tab's scenario deadline: chromedp's own default (30 s) is a timing
// assertion that a loaded machine trips.
func poll[T any](pageFunction string, opts ...chromedp.PollOption) chromedp.Action[T] {
	return chromedp.PollFunction[T](pageFunction, append(opts, chromedp.WithPollingTimeout(0))...)
}

func (tb *tab) text(t testing.TB, css string) string {
	t.Helper()
	return strings.TrimSpace(run(t, tb, chromedp.Text(chromedp.CSS(css))))
}

func (tb *tab) js(t testing.TB, expr string) string {
	t.Helper()
	return run(t, tb, chromedp.Evaluate[string](expr))
}

// signIn uses the sign-in form with the user's first password and waits
// for the app list.
func (e *browserEnv) signIn(t testing.TB, user string) *tab {
	t.Helper()
	return e.signInWith(t, user, browserUsers[user])
}

func (e *browserEnv) signInWith(t testing.TB, user, password string) *tab {
	t.Helper()
	tb := e.newTab(t)
	tb.do(t,
		chromedp.Navigate(e.url+"/login"),
		chromedp.SendKeys(chromedp.ID("name"), user),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("app-list")),
	)
	return tb
}

func (e *browserEnv) screenshot(t testing.TB, tb *tab, name string) {
	t.Helper()
	png := run(t, tb, chromedp.FullScreenshot(100)) // 100: PNG
	file := filepath.Join(e.shots, name)
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
}

// viewShot is screenshot of what the window shows, where the page is
// scrolled to, not the whole page.
func (e *browserEnv) viewShot(t testing.TB, tb *tab, name string) {
	t.Helper()
	png := run(t, tb, chromedp.CaptureScreenshot())
	file := filepath.Join(e.shots, name)
	if err := os.WriteFile(file, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after %v", what, state, browserWait)
		}
		<-tick.C
	}
}

// openChat starts a new chat of app and returns its id.
func (e *browserEnv) openChat(t *testing.T, tb *tab, appID string) string {
	t.Helper()
	tb.do(t, chromedp.Navigate(e.url+"/apps/"+appID+"/chat/new"), chromedp.WaitVisible(chromedp.ID("chat-form")))
	return tb.chatID(t)
}

// send fills the composer with message and sends it, once the button
// takes it: it stays disabled until the previous answer's stream ended,
// which may be a moment after its text showed.
func (tb *tab) send(t *testing.T, message string) {
	t.Helper()
	tb.setValue(t, `#chat-form textarea`, message)
	tb.do(t, chromedp.WaitEnabled(chromedp.CSS(`#chat-form [data-role=send]`)), chromedp.Click(chromedp.CSS(`#chat-form [data-role=send]`)))
}

// ask sends a message and waits until the answer has finished streaming:
// the card of the command has its final status and the answer's text
// came.
func (tb *tab) ask(t *testing.T, message string) {
	t.Helper()
	before := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#messages .msg.assistant").length`))
	tb.send(t, message)
	run(t, tb, poll[bool](`(before) => {
		const answers = document.querySelectorAll("#messages .msg.assistant");
		if (answers.length <= before) return false;
		const last = answers[answers.length - 1];
		const cards = last.querySelectorAll(".tool-card");
		return cards.length > 0 && [...cards].every((c) => !c.querySelector(".badge.running")) &&
			last.querySelector(".text").textContent.trim() !== "";
	}`, chromedp.WithPollingArgs(before)))
}

func TestBrowser(t *testing.T) {
	t.Parallel()
	e := newBrowserEnv(t)

	t.Run("sign in", func(t *testing.T) {
		tests := []struct {
			name, user, password string
			wantList             bool
			want                 string // on the page after submitting
		}{
			{"wrong password", "alice", "not-her-password", false, "wrong user name or password"},
			{"right password", "alice", browserUsers["alice"], true, "alice"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				tb := e.newTab(t)
				if !tc.wantList {
					tb.expected = []string{"status of 401"}
				}
				tb.do(t,
					chromedp.Navigate(e.url+"/"), // anonymous: sent to the sign-in page
					chromedp.WaitVisible(chromedp.ID("login")),
					chromedp.SendKeys(chromedp.ID("name"), tc.user),
					chromedp.SendKeys(chromedp.ID("password"), tc.password),
					chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
				)
				if !tc.wantList {
					tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#login [data-role=status]`)))
					run(t, tb, poll[bool](`() => document.querySelector("#login [data-role=status]").textContent !== ""`))
					if got := strings.ToLower(tb.text(t, `#login [data-role=status]`)); !strings.Contains(got, tc.want) {
						t.Errorf("sign-in error shown: %q, want it to say %q", got, tc.want)
					}
					if loc := tb.location(); !strings.HasSuffix(loc, "/login") {
						t.Errorf("after a failed sign-in the page is %s, want the sign-in page", loc)
					}
					return
				}
				tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#app-list tr[data-app="demo"]`)))
				if got := tb.text(t, "header span"); got != tc.want {
					t.Errorf("signed in as %q, want %q", got, tc.want)
				}
			})
		}
	})

	t.Run("build an app with the sandbox switch", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		appID := e.newAppOnCanvas(t, tb, "Shell helper")
		tb.openNode(t, "agent")
		if got := tb.text(t, `.panel [data-field="useAgentSandbox"] label.switch`); got != "Enable sandbox (Computer Use)" {
			t.Errorf("switch label %q", got)
		}
		if got := tb.text(t, `.panel [data-field="useAgentSandbox"] .hint`); got != "When on, the agent gets its own Linux environment where it can run commands and work with files" {
			t.Errorf("switch description %q", got)
		}
		switchOn := func() bool {
			return run(t, tb, chromedp.Evaluate[bool](`document.getElementById("field-useAgentSandbox").checked`))
		}
		if switchOn() {
			t.Fatal("a new app has the sandbox switch on")
		}
		// The startup commands, one per line.
		tb.do(t, chromedp.Click(chromedp.ID("field-useAgentSandbox")))
		tb.typeInto(t, "#field-startupCommands", "echo one > one.txt\n\necho two")
		tb.do(t, chromedp.Click(chromedp.ID("node-name")))
		save(t, tb, "All changes saved")
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.react-flow__node[data-id="agent"]`)))
		tb.openNode(t, "agent")
		if !switchOn() {
			t.Fatal("after saving and reloading, the sandbox switch is off")
		}
		if got := run(t, tb, chromedp.Value(chromedp.ID("field-startupCommands"))); got != "echo one > one.txt\necho two" {
			t.Errorf("the startup commands read %q after a reload, want one per line", got)
		}
		e.screenshot(t, tb, "builder.png")
		app, err := e.apps.Get(context.Background(), appID)
		if err != nil {
			t.Fatal(err)
		}
		if in := app.Graph.Nodes[1].Inputs["useAgentSandbox"]; string(in) != "true" {
			t.Errorf("saved useAgentSandbox = %s, want true", in)
		}
		if in := app.Graph.Nodes[1].Inputs["startupCommands"]; string(in) != `["echo one \u003e one.txt","echo two"]` && string(in) != `["echo one > one.txt","echo two"]` {
			t.Errorf("saved startupCommands = %s", in)
		}

		// The switch does what it says: the app's agent runs commands.
		e.openChat(t, tb, appID)
		tb.ask(t, "$ echo built by the builder")
		tb.do(t, chromedp.Click(chromedp.CSS(".tool-card summary")), chromedp.WaitVisible(chromedp.CSS(`.tool-card [data-role=stdout]`)))
		if got := tb.text(t, `.tool-card [data-role=stdout]`); got != "built by the builder" {
			t.Errorf("stdout %q", got)
		}
	})

	t.Run("command card and files panel", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		chatID := e.openChat(t, tb, "demo")
		const command = "echo hello > note.txt; cat note.txt"
		tb.ask(t, "$ "+command)

		// The card arrives collapsed: the command and its status are
		// shown, the output is not.
		if open := run(t, tb, chromedp.Evaluate[bool](`document.querySelector(".tool-card").open`)); open {
			t.Error("the command card arrived expanded")
		}
		if shown := run(t, tb, chromedp.Evaluate[bool](`document.querySelector(".tool-card [data-role=stdout]").checkVisibility()`)); shown {
			t.Error("stdout is visible on the collapsed card")
		}
		tb.do(t, chromedp.Click(chromedp.CSS(".tool-card summary")), chromedp.WaitVisible(chromedp.CSS(`.tool-card [data-role=stdout]`)))
		items := chatItems(t, e, chatID)
		calls := toolCallsOf(t, items)
		if len(calls) != 1 {
			t.Fatalf("history holds %d tool calls, want 1", len(calls))
		}
		checks := []struct{ name, css, want string }{
			{"command", `.tool-card [data-role=command]`, command},
			{"status", `.tool-card [data-role=status]`, "success"},
			{"stdout", `.tool-card [data-role=stdout]`, "hello"},
			{"duration", `.tool-card [data-role=duration]`, strconv.FormatInt(calls[0].DurationMs, 10) + " ms"},
		}
		for _, c := range checks {
			if got := tb.text(t, c.css); got != c.want {
				t.Errorf("card %s = %q, want %q", c.name, got, c.want)
			}
		}
		if !regexp.MustCompile(`^\d+ ms$`).MatchString(tb.text(t, `.tool-card [data-role=duration]`)) {
			t.Errorf("the card shows no duration")
		}

		// The files panel lists the new file and opens it.
		file := `#files li[data-path="/workspace/note.txt"]`
		tb.do(t, chromedp.WaitVisible(chromedp.CSS(file)), chromedp.Click(chromedp.CSS(file+" a")))
		content := run(t, tb, poll[string](`() => document.querySelector("#files textarea")?.value`))
		if content != "hello\n" {
			t.Errorf("the file viewer shows %q, want %q", content, "hello\n")
		}
		if got := tb.text(t, `#files [data-role=open-path]`); got != "/workspace/note.txt" {
			t.Errorf("the file viewer names %q", got)
		}
		e.screenshot(t, tb, "chat.png")

		// The folder downloads as a ZIP holding the file.
		zipFile := download(t, tb, `#files [data-role=download-zip]`)
		zr, err := zip.NewReader(bytes.NewReader(zipFile), int64(len(zipFile)))
		if err != nil {
			t.Fatalf("the download is not a ZIP: %v", err)
		}
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
			if path.Base(f.Name) != "note.txt" {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "hello\n" {
				t.Errorf("note.txt in the ZIP holds %q", b)
			}
		}
		if !slices.ContainsFunc(names, func(n string) bool { return path.Base(n) == "note.txt" }) {
			t.Errorf("the ZIP holds %q, no note.txt", names)
		}

		// A stderr block is drawn only for a command that wrote to
		// stderr, on the live cards and on the cards of the history.
		tb.ask(t, "$ echo oops >&2")
		for _, view := range []string{"streamed", "from history"} {
			if view == "from history" {
				tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(".tool-card .badge.success")))
			}
			got := tb.js(t, `JSON.stringify([...document.querySelectorAll("#messages .tool-card")].map((c) => {
				const e = c.querySelector("[data-role=stderr]");
				return e ? e.textContent : null;
			}))`)
			if want := `[null,"oops\n"]`; got != want {
				t.Errorf("%s: the cards' stderr blocks are %s, want %s (none on the first card)", view, got, want)
			}
		}
	})

	t.Run("command output is text, not markup", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		e.openChat(t, tb, "demo")
		const payload = `<script>window.flowboxInjected=1</script><img src=x onerror="window.flowboxInjected=2">`
		tb.ask(t, "$ echo '"+payload+"'")
		views := []struct {
			name   string
			reload bool
		}{
			{"streamed", false},
			{"from history", true},
		}
		for _, v := range views {
			t.Run(v.name, func(t *testing.T) {
				if v.reload {
					tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(".tool-card .badge.success")))
				}
				tb.do(t, chromedp.Click(chromedp.CSS(".tool-card summary")), chromedp.WaitVisible(chromedp.CSS(`.tool-card [data-role=stdout]`)))
				if got := tb.text(t, `.tool-card [data-role=stdout]`); got != payload {
					t.Errorf("stdout shown as %q, want the markup as text %q", got, payload)
				}
				if got := tb.js(t, `typeof window.flowboxInjected`); got != "undefined" {
					t.Errorf("the command's output ran as a script: window.flowboxInjected is %s", got)
				}
				if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#messages script, #messages img").length`)); n != 0 {
					t.Errorf("the chat holds %d elements made from the output", n)
				}
				if answer := tb.text(t, "#messages .msg.assistant .text"); !strings.Contains(answer, "<script>") {
					t.Errorf("the answer does not show the output as text: %q", answer)
				}
			})
		}
	})

	t.Run("stop a running command", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		e.openChat(t, tb, "demo")
		tb.setValue(t, `#chat-form textarea`, "$ for i in 1 2 3; do echo tick $i; done; sleep 120; echo late")
		tb.do(t, chromedp.Click(chromedp.CSS(`#chat-form [data-role=send]`)))
		// While it runs, its card is open and shows the output so far.
		run(t, tb, poll[bool](`() => {
			const c = document.querySelector(".tool-card[data-status=running]");
			return c !== null && c.open && (c.querySelector("[data-role=stdout]")?.textContent ?? "").includes("tick 3");
		}`))
		if !run(t, tb, chromedp.Evaluate[bool](`document.querySelector("#chat-form [data-role=send]").disabled`)) {
			t.Error("Send is enabled while the run goes on")
		}
		tb.do(t, chromedp.Click(chromedp.CSS(`#chat-form [data-role=stop]`)))
		run(t, tb, poll[bool](`() => document.querySelector(".tool-card")?.dataset.status === "cancelled" &&
			document.querySelector("#chat-form [data-role=stop]") === null`))
		if got := tb.text(t, ".tool-card [data-role=status]"); got != "cancelled" {
			t.Errorf("the stopped command's card says %q, want cancelled", got)
		}
		run(t, tb, poll[bool](`() => document.querySelector("#messages .msg.assistant .text")?.textContent.includes("Stopped by the user.")`))
		if answer := tb.text(t, "#messages .msg.assistant .text"); !strings.Contains(answer, "Stopped by the user.") || strings.Contains(answer, "late") {
			t.Errorf("the stopped run's answer is %q, want it to say it was stopped by the user", answer)
		}
		tb.setValue(t, `#chat-form textarea`, "$ echo again")
		if run(t, tb, chromedp.Evaluate[bool](`document.querySelector("#chat-form [data-role=send]").disabled`)) {
			t.Error("Send stays disabled after Stop")
		}
	})

	t.Run("answers render as Markdown, not raw HTML", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		chatID := e.openChat(t, tb, "demo")
		tb.ask(t, "$ echo first")
		chatItems(t, e, chatID) // the turn is stored
		// The new chat takes its first question as its title, in the
		// heading and in the chat list, without a reload (E2).
		run(t, tb, poll[bool](`() => document.querySelector(".chat-title")?.textContent === "$ echo first" &&
			[...document.querySelectorAll("#chat-list a")].some((a) => a.textContent.trim() === "$ echo first")`))
		ctx := context.Background()
		chat, err := e.chatNamed(ctx, chatID)
		if err != nil {
			t.Fatal(err)
		}
		// A stored answer as a model might write it: a heading, a table and
		// an image whose onerror would run were the HTML inserted.
		answer := "# Results\n\n| name | size |\n| --- | --- |\n| note.txt | 6 |\n\n<img src=x onerror=\"window.flowboxInjected=1\">\n\n" +
			"The mean is $\\bar{x} = \\frac{1}{n}\\sum_i x_i$.\n"
		if _, err := e.chats.AppendTurn(ctx, chat, history.Item{Role: "user", Text: "sum it up"}, history.Item{Role: "assistant", Text: answer}, time.Now()); err != nil {
			t.Fatal(err)
		}
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#messages .msg.assistant .text h1`)))
		last := `#messages .msg.assistant:last-of-type .text`
		if got := tb.text(t, "#messages .msg.assistant .text h1"); got != "Results" {
			t.Errorf("the heading reads %q", got)
		}
		if got := tb.js(t, `[...document.querySelectorAll("#messages .msg.assistant .text table td")].map((td) => td.textContent).join(",")`); got != "note.txt,6" {
			t.Errorf("the table's cells are %q, want note.txt,6", got)
		}
		// Math is typeset (MathML), its TeX not shown beside it.
		if got := tb.js(t, `document.querySelector("#messages .msg.assistant .text math mfrac")?.textContent ?? "no fraction"`); got != "1n" {
			t.Errorf("the answer's math: the fraction reads %q, want 1n", got)
		}
		if got := tb.text(t, "#messages .msg.assistant .text"); strings.Contains(got, `\frac`) {
			t.Errorf("the answer shows its TeX: %q", got)
		}
		if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#messages img, #messages [onerror]").length`)); n != 0 {
			t.Errorf("the answer's HTML made %d elements (%s)", n, last)
		}
		if got := tb.js(t, `typeof window.flowboxInjected`); got != "undefined" {
			t.Errorf("the answer's HTML ran: window.flowboxInjected is %s", got)
		}
		// The chat on a desktop and a phone, in both languages; none of
		// them scrolls sideways.
		for _, lang := range []string{"en", "zh"} {
			for _, width := range []int64{1280, 390} {
				tb.do(t, chromedp.EmulateViewport(width, 844), chromedp.Navigate(e.url+"/apps/demo/chat/"+chatID+"?lang="+lang),
					chromedp.WaitVisible(chromedp.CSS(`#messages .msg.assistant .text h1`)))
				if w := tb.js(t, `String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
					t.Errorf("at %d px in %s the chat scrolls sideways by %s px", width, lang, w)
				}
				e.screenshot(t, tb, fmt.Sprintf("chat-%s-%d.png", lang, width))
			}
		}
	})

	t.Run("delete a chat", func(t *testing.T) {
		tb := e.signIn(t, "alice")
		chatID := e.openChat(t, tb, "demo")
		tb.ask(t, "$ echo bye > bye.txt")
		// The files panel has caught up with the command, as the user sees.
		tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/bye.txt"]`)))
		id := sandbox.IDFor("demo", "u:alice", chatID)
		if st, err := e.provider.Status(context.Background(), id); err != nil || st != sandbox.StatusRunning {
			t.Fatalf("before deleting, the chat's sandbox is %q (%v), want running", st, err)
		}
		// The workers are not running yet: the page must come back all
		// the same, with the sandbox still there.
		tb.do(t,
			chromedp.Click(chromedp.ID("delete-chat")),
			chromedp.WaitVisible(chromedp.CSS(`h2`)),
		)
		run(t, tb, poll[bool](`() => location.pathname === "/apps/demo/chats"`))
		tb.do(t, chromedp.WaitVisible(chromedp.CSS("main table")))
		if n := run(t, tb, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('a[href$="/chat/%s"]').length`, chatID))); n != 0 {
			t.Errorf("the chat list still links the deleted chat")
		}
		tb.mu.Lock()
		asked := slices.Clone(tb.dialogs)
		tb.mu.Unlock()
		if len(asked) != 1 || !strings.Contains(asked[0], "Delete this chat?") {
			t.Errorf("dialogs %q, want one confirmation", asked)
		}
		if st, err := e.provider.Status(context.Background(), id); err != nil || st != sandbox.StatusRunning {
			t.Fatalf("the sandbox is %q (%v) before any worker ran, want running", st, err)
		}
		if err := e.engine.StartWorkers(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the deleted chat's sandbox", func() (bool, string) {
			st, err := e.provider.Status(context.Background(), id)
			_, lerr := e.manager.Lookup(context.Background(), sandbox.Scope{AppID: "demo", UserID: "u:alice", ChatID: chatID})
			return err == nil && st == sandbox.StatusMissing && errors.Is(lerr, sandbox.ErrNotFound),
				fmt.Sprintf("status %q (%v), record %v", st, err, lerr)
		})
	})

	t.Run("admin page", func(t *testing.T) {
		ctx := context.Background()
		scope := sandbox.Scope{AppID: "demo", UserID: "u:alice", ChatID: "admin-view"}
		if res, err := e.manager.Exec(ctx, scope, sandbox.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("make a sandbox: %+v %v", res, err)
		}
		id := scope.SandboxID()
		inst, err := e.manager.Lookup(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		tb := e.signIn(t, "admin")
		row := fmt.Sprintf(`#sandboxes tr[data-sandbox=%q]`, id)
		tb.do(t, chromedp.Click(chromedp.CSS(`header nav a[href="/admin"]`)), chromedp.WaitVisible(chromedp.CSS(row)))
		cells := []struct{ role, want string }{
			{"provider", "bwrap"},
			{"status", "running"},
			{"app", "demo"},
			{"chat", "admin-view"},
			{"owner", "u:alice"},
			{"last-active", inst.LastActiveAt.Format("2006-01-02 15:04:05")},
		}
		for _, c := range cells {
			if got := tb.text(t, row+` [data-role=`+c.role+`]`); got != c.want {
				t.Errorf("admin row %s = %q, want %q", c.role, got, c.want)
			}
		}
		// What it uses, sampled while the page is open (L4).
		if got := run(t, tb, poll[string](`(row) => document.querySelector(row + " [data-role=memory]")?.textContent ?? ""`, chromedp.WithPollingArgs(row))); !strings.Contains(got, "iB") {
			t.Errorf("the sandbox's memory is shown as %q", got)
		}
		e.screenshot(t, tb, "admin.png")
		tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/admin?lang=zh"), chromedp.WaitVisible(chromedp.CSS(row)))
		e.phoneFits(t, tb, "admin-phone-zh.png")
		// On the phone the admin's places are a menu named after this one;
		// it opens to every place, one under the other.
		if got := tb.text(t, `.menu-toggle`); got != "管理 ▾" {
			t.Errorf("the phone's menu button says %q, want the current place, 管理", got)
		}
		if tb.js(t, `String(document.querySelector("#places").getBoundingClientRect().height)`) != "0" {
			t.Error("the admin's places show on a phone before the menu is opened")
		}
		tb.do(t, chromedp.Click(chromedp.CSS(`.menu-toggle`)), chromedp.WaitVisible(chromedp.CSS(`#places a[href="/admin/queues/"]`)))
		e.phoneFits(t, tb, "admin-menu-phone-zh.png")
		tb.do(t, chromedp.Click(chromedp.CSS(`#places a[href="/admin/users"]`)), chromedp.WaitVisible(chromedp.ID("users")))
		tb.do(t, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(e.url+"/admin?lang=en"), chromedp.WaitVisible(chromedp.CSS(row)))

		tb.do(t,
			chromedp.Click(chromedp.CSS(row+` [data-admin-action=stop]`)),
			chromedp.WaitVisible(chromedp.CSS(row+`[data-status=stoped]`)),
		)
		if got := tb.text(t, row+` [data-role=status]`); got != "stopped" {
			t.Errorf("status after stop shown as %q, want stopped", got)
		}
		if st, err := e.provider.Status(ctx, id); err != nil || st != sandbox.StatusStopped {
			t.Errorf("after stop the provider says %q (%v)", st, err)
		}

		// The deletion is recorded at once and shown; the workers (running
		// since the chat scenario) remove the sandbox, then its record.
		tb.do(t,
			chromedp.Click(chromedp.CSS(row+` [data-admin-action=delete]`)),
			chromedp.WaitVisible(chromedp.CSS(row+`[data-status=deleting]`)),
		)
		if got := tb.text(t, row+` [data-role=status]`); got != "deleting" {
			t.Errorf("status after delete shown as %q, want deleting", got)
		}
		waitFor(t, "the workers to delete the sandbox", func() (bool, string) {
			st, err := e.provider.Status(ctx, id)
			_, lerr := e.manager.Lookup(ctx, scope)
			return err == nil && st == sandbox.StatusMissing && errors.Is(lerr, sandbox.ErrNotFound), fmt.Sprintf("provider %q (%v), record %v", st, err, lerr)
		})
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("sandboxes")))
		if n := run(t, tb, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('%s').length`, row))); n != 0 {
			t.Error("the deleted sandbox is still listed after a reload")
		}
		tb.mu.Lock()
		if len(tb.dialogs) != 0 {
			t.Errorf("the admin page showed dialogs: %q", tb.dialogs)
		}
		tb.mu.Unlock()

		// The audit page lists alice's command; its filters narrow the list
		// and the export alike.
		alice := (&enginetest.Env{URL: e.url, Engine: e.engine}).Login(t, "alice", browserUsers["alice"])
		audited, _ := say(t, alice, "demo", "", "$ echo audited")
		tb.do(t,
			chromedp.Click(chromedp.CSS(`header nav a[href="/admin/audit"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#audit tbody tr[data-kind=command]`)),
			chromedp.SendKeys(chromedp.ID("audit-user"), "u:nobody"),
			chromedp.Click(chromedp.CSS(`#audit-filters button[type=submit]`)),
		)
		run(t, tb, poll[bool](`() => document.getElementById("audit-export").href.includes("user=u%3Anobody")`))
		run(t, tb, poll[bool](`() => document.querySelectorAll("#audit tbody tr").length === 0 && document.getElementById("audit-status-line").textContent !== ""`))
		if got := tb.text(t, "#audit-status-line"); got != "No records match." {
			t.Errorf("a user without commands shows %q", got)
		}
		tb.do(t,
			chromedp.SetValue(chromedp.ID("audit-user"), "u:alice"),
			chromedp.SendKeys(chromedp.ID("audit-chat"), audited),
			chromedp.Click(chromedp.CSS(`#audit-filters button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#audit tbody tr[data-kind=command]`)),
		)
		rows := tb.js(t, `[...document.querySelectorAll("#audit tbody tr")].map((tr) => tr.querySelector("[data-role=who]").textContent.split(" · ")[0] + " " + tr.querySelector("[data-role=what]").textContent).join("|")`)
		if rows != "u:alice echo audited" {
			t.Errorf("the records of alice's chat %s: %q, want her one command", audited, rows)
		}
		if href := tb.js(t, `document.getElementById("audit-export").getAttribute("href")`); href != "/admin/api/audit/export?user=u%3Aalice&chat="+audited {
			t.Errorf("the export link is %s, want the filters' query", href)
		}
		e.screenshot(t, tb, "audit.png")
		tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/admin/audit?lang=zh"), chromedp.WaitVisible(chromedp.CSS(`#audit tbody tr`)))
		e.phoneFits(t, tb, "audit-phone-zh.png")
	})

	t.Run("accounts", func(t *testing.T) {
		ctx := context.Background()
		admin := e.signIn(t, "admin")
		admin.expected = []string{"status of 409"} // the taken name, on purpose
		admin.do(t,
			chromedp.Click(chromedp.CSS(`header nav a[href="/admin"]`)),
			chromedp.WaitVisible(chromedp.ID("sandboxes")),
			chromedp.Click(chromedp.CSS(`header nav a[href="/admin/users"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#users tr[data-user="admin"]`)),
		)
		self := `#users tr[data-user="admin"]`
		if got := admin.text(t, self+` [data-role=role]`); got != "Admin" {
			t.Errorf("the admin's role is shown as %q", got)
		}
		if n := run(t, admin, chromedp.Evaluate[int](`document.querySelectorAll('#users tr[data-user="admin"] [data-user-action=disable]').length`)); n != 0 {
			t.Error("the admin is offered to disable their own account")
		}

		// The admin creates bea; the list shows her as the store has her.
		row := `#users tr[data-user="bea"]`
		admin.do(t,
			chromedp.SendKeys(chromedp.ID("new-user-name"), "bea"),
			chromedp.SendKeys(chromedp.ID("new-user-password"), browserUsers["bea"]),
			chromedp.Click(chromedp.CSS(`#new-user button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(row)),
		)
		if got := admin.text(t, `#new-user [data-role=status]`); got != "bea was created." {
			t.Errorf("after creating bea the form says %q", got)
		}
		var bea auth.User
		users, err := e.engine.Accounts.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if u.Name == "bea" {
				bea = u
			}
		}
		if bea.ID == "" || bea.Role != auth.RoleUser || bea.Disabled {
			t.Fatalf("bea in the store: %+v, want an enabled user", bea)
		}
		cells := []struct{ role, want string }{{"name", "bea"}, {"role", "User"}, {"state", "active"}}
		for _, c := range cells {
			if got := admin.text(t, row+` [data-role=`+c.role+`]`); got != c.want {
				t.Errorf("bea's row: %s = %q, want %q", c.role, got, c.want)
			}
		}
		created := run(t, admin, chromedp.AttributeValue(chromedp.CSS(row+` [data-role=created] time`), "datetime")).Value
		if at, err := time.Parse(time.RFC3339Nano, created); err != nil || !at.Equal(bea.CreatedAt) {
			t.Errorf("bea's row says she was created at %q, the store %v", created, bea.CreatedAt)
		}

		// Bea makes a key on her account page; its secret is shown once.
		tb := e.signIn(t, "bea")
		tb.expected = []string{"status of 401", "status of 403"} // the wrong old password, the ended session
		tb.do(t,
			chromedp.Click(chromedp.CSS(`header nav a[href="/account"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#keys [data-role=empty]`)),
		)
		if got := tb.text(t, "main h2"); got != "Account · bea" {
			t.Errorf("the account page is titled %q", got)
		}
		key := `#key-list tr[data-name="cli"]`
		tb.do(t,
			chromedp.SendKeys(chromedp.ID("new-key-name"), "cli"),
			chromedp.Click(chromedp.CSS(`#new-key button[type=submit]`)),
			chromedp.WaitVisible(chromedp.ID("key-secret")),
			chromedp.WaitVisible(chromedp.CSS(key)),
		)
		secret := run(t, tb, chromedp.Value(chromedp.CSS(`#key-secret input`)))
		if !strings.HasPrefix(secret, "fbk_") {
			t.Fatalf("the page shows %q as the new key", secret)
		}
		if got := tb.text(t, `#key-secret p`); !strings.Contains(got, "cli") || !strings.Contains(got, "only time the key is shown") {
			t.Errorf("the new key's note says %q", got)
		}
		shownPrefix := func() string {
			prefix, ok := strings.CutSuffix(tb.text(t, key+` [data-role=prefix]`), "…")
			if !ok || prefix == "" || len(prefix) >= len(secret) || !strings.HasPrefix(secret, prefix) {
				t.Errorf("the list shows the key as %q, want the start of %q and an ellipsis", prefix, secret)
			}
			return prefix
		}
		shownPrefix()
		if got := tb.text(t, key+` [data-role=last-used]`); got != "never" {
			t.Errorf("a new key's last use is shown as %q", got)
		}
		e.screenshot(t, tb, "account.png")
		if code, name := whoAmI(t, e.url, secret); code != 200 || name != "bea" {
			t.Fatalf("GET /api/me with the new key: %d %q, want bea", code, name)
		}
		accountShots(t, e, tb, "/account", key, "account")

		// After a reload the key is listed by its prefix, with its use;
		// the secret is nowhere on the page.
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(key)))
		shownPrefix()
		quoted, _ := json.Marshal(secret)
		if run(t, tb, chromedp.Evaluate[bool](`document.documentElement.outerHTML.includes(`+string(quoted)+`)`)) {
			t.Error("after a reload the page still holds the key's secret")
		}
		if run(t, tb, chromedp.Evaluate[bool](`!document.getElementById("key-secret").hidden`)) {
			t.Error("after a reload the secret's box is shown")
		}
		if got := tb.text(t, key+` [data-role=last-used]`); got == "never" {
			t.Error("the key was used, yet the list says never")
		}
		if got := tb.text(t, key+` [data-role=expires]`) + " · " + tb.text(t, key+` [data-role=rate]`); got != "never · no limit" {
			t.Errorf("a key made without expiry or rate is listed with %q", got)
		}

		// A key with an expiry and a rate of its own is listed with both.
		ci := `#key-list tr[data-name="ci"]`
		tb.do(t,
			chromedp.SendKeys(chromedp.ID("new-key-name"), "ci"),
			chromedp.SetValue(chromedp.ID("new-key-expires"), "2099-12-31"),
			chromedp.SendKeys(chromedp.ID("new-key-rate"), "30"),
			chromedp.Click(chromedp.CSS(`#new-key button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(ci)),
		)
		if got := tb.text(t, ci+` [data-role=expires]`) + " · " + tb.text(t, ci+` [data-role=rate]`); got != "2099-12-31 23:59 · 30/min" {
			t.Errorf("the ci key is listed with %q, want its expiry at the end of the chosen day and its rate", got)
		}
		tb.do(t,
			chromedp.Click(chromedp.CSS(ci+` [data-key-action=revoke]`)),
			chromedp.WaitNotPresent(chromedp.CSS(ci)),
		)
		tb.mu.Lock()
		tb.dialogs = nil // the confirmation of ci's revocation
		tb.mu.Unlock()

		// Bea revokes it; it no longer lets anyone in.
		tb.do(t,
			chromedp.Click(chromedp.CSS(key+` [data-key-action=revoke]`)),
			chromedp.WaitVisible(chromedp.CSS(`#keys [data-role=empty]`)),
		)
		if got := tb.text(t, `#keys [data-role=status]`); got != `The key "cli" was revoked.` {
			t.Errorf("after revoking the page says %q", got)
		}
		tb.mu.Lock()
		asked := slices.Clone(tb.dialogs)
		tb.mu.Unlock()
		if len(asked) != 1 || !strings.Contains(asked[0], `Revoke the key "cli"?`) {
			t.Errorf("dialogs %q, want one confirmation of the revocation", asked)
		}
		if code, _ := whoAmI(t, e.url, secret); code != 401 {
			t.Errorf("GET /api/me with the revoked key: %d, want 401", code)
		}

		// Bea changes her password: a wrong old one is refused on the
		// page, the right one works, and this session stays signed in.
		const newPassword = "bea-password-2"
		status := `#change-password [data-role=status]`
		tb.do(t,
			chromedp.SendKeys(chromedp.ID("old-password"), "not-her-password"),
			chromedp.SendKeys(chromedp.ID("new-password"), newPassword),
			chromedp.SendKeys(chromedp.ID("repeat-password"), newPassword),
			chromedp.Click(chromedp.CSS(`#change-password button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(status+`.error`)),
		)
		if got := tb.text(t, status); got != "the old password is wrong" {
			t.Errorf("a wrong old password shows %q", got)
		}
		tb.do(t,
			chromedp.SetValue(chromedp.ID("old-password"), browserUsers["bea"]),
			chromedp.Click(chromedp.CSS(`#change-password button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(status+`.ok`)),
		)
		if got := tb.text(t, status); got != "Password changed; your other sessions have ended." {
			t.Errorf("after the change the page says %q", got)
		}
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#keys [data-role=empty]`)))
		e.signInWith(t, "bea", newPassword)

		// The admin disables bea: her open tab's next action is refused
		// and says why.
		admin.do(t,
			chromedp.Click(chromedp.CSS(row+` [data-user-action=disable]`)),
			chromedp.WaitVisible(chromedp.CSS(row+`[data-state=disabled]`)),
		)
		if got := admin.text(t, row+` [data-role=state]`); got != "disabled" {
			t.Errorf("bea's state after disabling: %q", got)
		}
		if got := admin.text(t, `#users-status`); !strings.HasPrefix(got, "bea is disabled") {
			t.Errorf("after disabling the page says %q", got)
		}
		e.screenshot(t, admin, "users.png")
		accountShots(t, e, admin, "/admin/users", row+`[data-state=disabled]`, "users")
		tb.do(t,
			chromedp.SendKeys(chromedp.ID("new-key-name"), "after"),
			chromedp.Click(chromedp.CSS(`#new-key button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#keys [data-role=status].error`)),
		)
		if got := tb.text(t, `#keys [data-role=status]`); !strings.Contains(got, "your session has ended") {
			t.Errorf("bea's action after she was disabled shows %q, want the ended session", got)
		}
		tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#keys [data-role=status] a[href="/login"]`)))
		if keys, err := e.engine.Accounts.Keys(ctx, bea.ID); err != nil || len(keys) != 0 {
			t.Errorf("bea's keys after she was disabled: %+v %v, want none", keys, err)
		}

		// Enabled again with a password the admin sets, bea signs in.
		const resetPassword = "set-by-the-admin"
		admin.mu.Lock()
		admin.promptText = resetPassword
		admin.mu.Unlock()
		admin.do(t,
			chromedp.Click(chromedp.CSS(row+` [data-user-action=enable]`)),
			chromedp.WaitVisible(chromedp.CSS(row+`[data-state=active]`)),
			chromedp.Click(chromedp.CSS(row+` [data-user-action=password]`)),
		)
		run(t, admin, poll[bool](`() => document.getElementById("users-status").textContent !== "bea is enabled again."`))
		if got := admin.text(t, `#users-status`); !strings.HasPrefix(got, "The password of bea was reset") {
			t.Errorf("after the reset the page says %q", got)
		}
		admin.mu.Lock()
		prompts := slices.Clone(admin.dialogs)
		admin.mu.Unlock()
		if len(prompts) != 1 || !strings.Contains(prompts[0], "New password for bea") {
			t.Errorf("dialogs %q, want one prompt for bea's password", prompts)
		}
		e.signInWith(t, "bea", resetPassword)

		// A taken name: the API's refusal is shown on the form.
		admin.do(t,
			chromedp.SendKeys(chromedp.ID("new-user-name"), "bea"),
			chromedp.SendKeys(chromedp.ID("new-user-password"), "another-password"),
			chromedp.Click(chromedp.CSS(`#new-user button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#new-user [data-role=status].error`)),
		)
		if got := admin.text(t, `#new-user [data-role=status]`); !strings.Contains(got, "that user name is taken") {
			t.Errorf("creating bea twice shows %q, want the API's refusal", got)
		}
		if n := run(t, admin, chromedp.Evaluate[int](`document.querySelectorAll('#users tr[data-user="bea"]').length`)); n != 1 {
			t.Errorf("%d rows for bea, want 1", n)
		}

		accountLinks(t, e, admin)
	})
}

// accountLinks: the admin invites cleo with a set-password link, shown
// once; cleo opens it in her own browser, sets her password and signs in;
// the link then no longer works. The admin resets bea by a link, and
// deletes cleo, giving her app to the admin; a deletion the API refuses
// shows its reason.
func accountLinks(t *testing.T, e *browserEnv, admin *tab) {
	ctx := context.Background()
	admin.expected = append(admin.expected, "status of 404") // the user deleted behind the page's back
	admin.do(t,
		chromedp.SetValue(chromedp.ID("new-user-name"), "cleo"),
		chromedp.Click(chromedp.ID("new-user-invite")),
	)
	if !run(t, admin, chromedp.Evaluate[bool](`document.getElementById("new-user-password").disabled`)) {
		t.Error("with an invite link chosen, the password field is still on")
	}
	admin.do(t,
		chromedp.Click(chromedp.CSS(`#new-user button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("user-link")),
		chromedp.WaitVisible(chromedp.CSS(`#users tr[data-user="cleo"]`)),
	)
	link := run(t, admin, chromedp.Value(chromedp.CSS(`#user-link input`)))
	if !strings.HasPrefix(link, e.url+"/set-password/fbp_") {
		t.Fatalf("the page shows %q as cleo's link, want an absolute /set-password/ address", link)
	}
	if got := admin.text(t, `#user-link [data-role=note]`); !strings.Contains(got, "Send cleo this link") || !strings.Contains(got, "shown only now") {
		t.Errorf("the link's note says %q", got)
	}

	// Cleo, in a browser of her own: a short password is refused with the
	// rule; hers is set, and she signs in with it.
	const cleoPassword = "cleo-password-1"
	cleo := e.newTab(t)
	cleo.expected = []string{"status of 400", "status of 404", "status of 401"}
	cleo.do(t, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("set-password")))
	if got := cleo.text(t, `#set-password [data-role=name]`); got != "cleo" {
		t.Errorf("the set-password page names %q, want cleo", got)
	}
	accountShots(t, e, cleo, link, "#set-password", "set-password")
	status := `#set-password [data-role=status]`
	cleo.do(t,
		chromedp.SendKeys(chromedp.ID("set-password-new"), "short"),
		chromedp.SendKeys(chromedp.ID("set-password-repeat"), "short"),
		chromedp.Click(chromedp.CSS(`#set-password button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(status+`.error`)),
	)
	if got := cleo.text(t, status); !strings.Contains(got, "8 to 72 bytes") {
		t.Errorf("a short password shows %q, want the rule", got)
	}
	cleo.do(t,
		chromedp.SetValue(chromedp.ID("set-password-new"), cleoPassword),
		chromedp.SetValue(chromedp.ID("set-password-repeat"), cleoPassword),
		chromedp.Click(chromedp.CSS(`#set-password button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(status+`.ok`)),
	)
	e.screenshot(t, cleo, "set-password.png")
	cleo.do(t,
		chromedp.Click(chromedp.CSS(status+` a[data-role=sign-in]`)),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("name"), "cleo"),
		chromedp.SendKeys(chromedp.ID("password"), cleoPassword),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("app-list")),
	)
	// Used once, the link says so and what to do.
	cleo.do(t, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("set-password-problem")))
	if got := cleo.text(t, `#set-password-problem [data-role=problem]`); !strings.Contains(got, "Ask an admin for a new link") {
		t.Errorf("the used link's page says %q", got)
	}
	accountShots(t, e, cleo, link, "#set-password-problem", "set-password-problem")

	// Cleo makes an app, which the admin later gives to themself.
	appID := e.newAppOnCanvas(t, cleo, "cleo's app")

	// A reset by link shows a new link for bea, once.
	admin.do(t,
		chromedp.Click(chromedp.CSS(`#user-link [data-role=hide]`)),
		chromedp.WaitNotVisible(chromedp.ID("user-link")),
		chromedp.Click(chromedp.CSS(`#users tr[data-user="bea"] [data-user-action=link]`)),
		chromedp.WaitVisible(chromedp.ID("user-link")),
	)
	if got := admin.text(t, `#user-link [data-role=note]`); !strings.Contains(got, "New link for bea") {
		t.Errorf("the reset link's note says %q", got)
	}
	if got := run(t, admin, chromedp.Value(chromedp.CSS(`#user-link input`))); got == link || !strings.HasPrefix(got, e.url+"/set-password/fbp_") {
		t.Errorf("bea's link is %q", got)
	}

	// Deleting cleo asks what becomes of her apps; the admin keeps them.
	row := `#users tr[data-user="cleo"]`
	admin.do(t,
		chromedp.Click(chromedp.CSS(row+` [data-user-action=delete]`)),
		chromedp.WaitVisible(chromedp.ID("delete-user")),
	)
	if got := admin.text(t, `#delete-user [data-role=title]`); got != "Delete cleo?" {
		t.Errorf("the deletion asks %q", got)
	}
	if got := run(t, admin, chromedp.Value(chromedp.CSS(`#delete-user select`))); got != "u:admin" {
		t.Errorf("the apps would go to %q, want the admin by default", got)
	}
	e.screenshot(t, admin, "users-delete.png")
	admin.do(t, chromedp.EmulateViewport(390, 800))
	e.screenshot(t, admin, "users-delete-390.png")
	admin.do(t, chromedp.EmulateViewport(1280, 800))
	admin.do(t,
		chromedp.Click(chromedp.CSS(`#delete-user button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.CSS(row)),
		chromedp.WaitNotVisible(chromedp.ID("delete-user")),
	)
	if got := admin.text(t, `#users-status`); got != "cleo was deleted; their apps (1) now belong to admin." {
		t.Errorf("after deleting cleo the page says %q", got)
	}
	if a, err := e.apps.Get(ctx, appID); err != nil || a.OwnerID != "u:admin" {
		t.Errorf("cleo's app %s after her deletion: owner %q (%v), want u:admin", appID, a.OwnerID, err)
	}
	cleo.do(t, chromedp.Navigate(e.url+"/api/me"), chromedp.WaitVisible(chromedp.CSS("body")))
	if got := cleo.text(t, "body"); !strings.Contains(got, `"code":401`) {
		t.Errorf("cleo's session after her deletion: %s, want 401", got)
	}

	// A user deleted by someone else meanwhile: the API's reason is shown
	// in the dialog, which stays open.
	dora, err := e.engine.Accounts.CreateUser(ctx, "dora", "dora-password-1", auth.RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	admin.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#users tr[data-user="dora"]`)))
	if err := e.engine.Accounts.DeleteUser(ctx, dora.ID); err != nil {
		t.Fatal(err)
	}
	admin.do(t,
		chromedp.Click(chromedp.CSS(`#users tr[data-user="dora"] [data-user-action=delete]`)),
		chromedp.WaitVisible(chromedp.ID("delete-user")),
		chromedp.Click(chromedp.CSS(`#delete-user input[value=delete]`)),
		chromedp.Click(chromedp.CSS(`#delete-user button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#delete-user [data-role=status].error`)),
	)
	if got := admin.text(t, `#delete-user [data-role=status]`); got != "no such user or key" {
		t.Errorf("deleting a user already gone shows %q, want the API's reason", got)
	}
}

// whoAmI asks GET /api/me with an API key and returns the status and the
// user's name.
func whoAmI(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/api/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/me: %v", err)
	}
	defer resp.Body.Close()
	var me struct{ Name string }
	_ = json.NewDecoder(resp.Body).Decode(&me)
	return resp.StatusCode, me.Name
}

// chatNamed finds the one stored chat whose chat id is chatID, whoever's
// it is: the pages name chats by id, and chat ids are scoped per app and
// user, so a test that made one chat under an id finds that one.
func (e *browserEnv) chatNamed(ctx context.Context, chatID string) (history.Chat, error) {
	var c history.Chat
	err := e.engine.Services.DB.Collection(history.ChatsCollection).FindOne(ctx, bson.D{{Key: "chatId", Value: chatID}}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return c, fmt.Errorf("chat %s: %w", chatID, history.ErrNotFound)
	}
	return c, err
}

// chatItems waits until the chat's last turn is stored (the answer may
// reach the page before the turn reaches the database) and returns it.
func chatItems(t *testing.T, e *browserEnv, chatID string) []history.Item {
	t.Helper()
	ctx := context.Background()
	var items []history.Item
	waitFor(t, "the chat's history", func() (bool, string) {
		chat, err := e.chatNamed(ctx, chatID)
		if err != nil {
			return false, err.Error()
		}
		if items, err = e.chats.Items(ctx, chat, 0, 100); err != nil {
			return false, err.Error()
		}
		n := len(items)
		return n >= 2 && items[n-1].Role == "assistant", fmt.Sprintf("%d items", n)
	})
	return items
}

func toolCallsOf(t *testing.T, items []history.Item) []toolcall.Call {
	t.Helper()
	var out []toolcall.Call
	for _, it := range items {
		if len(it.ToolCalls) == 0 {
			continue
		}
		var calls []toolcall.Call
		if err := json.Unmarshal(it.ToolCalls, &calls); err != nil {
			t.Fatal(err)
		}
		out = append(out, calls...)
	}
	return out
}

// download clicks a download button of a folder and returns the ZIP the
// browser saved.
func download(t *testing.T, tb *tab, css string) []byte {
	t.Helper()
	name, b := downloadFile(t, tb, css)
	if !strings.HasSuffix(name, ".zip") {
		t.Errorf("the download is named %q, want a .zip", name)
	}
	return b
}

// downloadFile clicks a download button and returns the name and the
// bytes of the file the browser saved.
func downloadFile(t *testing.T, tb *tab, css string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	begin := chromedp.Events(tb.ctx, browser.DownloadWillBegin)
	progress := chromedp.Events(tb.ctx, browser.DownloadProgress)
	if _, err := chromedp.Call(tb.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: new(true),
		BrowserContextID: chromedp.FromContext(tb.ctx).BrowserContextID,
	}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(css)))
	var name string
	for ev, err := range begin {
		if err != nil {
			t.Fatalf("no download began: %v", err)
		}
		name = ev.SuggestedFilename
		break
	}
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("the download did not complete: %v", err)
		}
		switch ev.State {
		case browser.DownloadProgressStateCompleted:
			b, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				t.Fatal(err)
			}
			return name, b
		case browser.DownloadProgressStateCanceled:
			t.Fatal("the download was canceled")
		}
	}
	t.Fatal("no download")
	return "", nil
}

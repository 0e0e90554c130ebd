package web_test

// The workspace in Chromium (K2–K4): an admin installs skills and sees the
// invalid ones on the skills page; a builder chooses a skill for an app;
// in a new chat a user attaches a CSV before the first message, the
// scripted model runs the skill's script on it, and the user finds the
// result in the files panel and downloads it. Uploads in the files
// panel, removing attachments, a refused upload and the read-only skills
// are shown as the user sees them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox/skills"
)

// The CSV the user attaches, and what csv-analyzer writes of it.
const (
	workspaceCSV     = "region,amount\nnorth,10\nsouth,20\neast,30\n"
	workspaceCSVPath = "/workspace/uploads/sales.csv"
	workspaceSummary = "/workspace/intermediate/sales-summary.json"
)

// csvSize is the CSV's size as the page and the server write it.
var csvSize = humanSize(int64(len(workspaceCSV)))

func TestWorkspaceBrowser(t *testing.T) {
	t.Parallel()
	model := llmtest.New(t,
		llmtest.Reply{Text: "Let me summarize the file.", ToolCalls: []llm.ToolCall{llmtest.Call("call_csv", "execute_skill_script",
			`{"name":"csv-analyzer","script":"scripts/analyze.py","args":["`+workspaceCSVPath+`","--output","`+workspaceSummary+`"]}`)}},
		llmtest.Reply{Text: "The file has 3 rows; the summary is in " + workspaceSummary + "."},
	)
	e := newBrowserEnvWith(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_LLM_BASE_URL":        model.BaseURL,
		"FLOWBOX_UPLOAD_MAX_FILE_MIB": "1", // a refused upload is one of the scenario's steps
	}})
	srv := &enginetest.Env{URL: e.url, Engine: e.engine}
	admin := srv.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	installed := installSkillDir(t, admin, "csv-analyzer")

	t.Run("skills page", func(t *testing.T) { skillsPage(t, e, installed) })

	// Alice's app runs on the scripted model with the sandbox on; she
	// chooses the skill in the builder.
	alice := srv.Login(t, "alice", browserUsers["alice"])
	graph := apps.DemoGraph()
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	resp := alice.Do(t, "POST", "/api/apps", map[string]any{"name": "CSV helper", "public": false, "graph": graph})
	var app struct {
		ID string `json:"appId"`
	}
	if resp.Status != http.StatusCreated {
		t.Fatalf("create the app: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &app)

	// Each part of the scenario has a tab of its own: a tab's waits are
	// bounded together.
	tb := e.signIn(t, "alice")
	choice := `.panel [data-field="skills"] li[data-choice="csv-analyzer"]`
	tb.do(t, chromedp.Navigate(e.url+"/apps/"+app.ID+"/flow"))
	openSkills := func() {
		t.Helper()
		tb.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.react-flow__node[data-id="agent"]`)))
		tb.openNode(t, "agent")
		tb.do(t, chromedp.WaitVisible(chromedp.CSS(choice)))
	}
	openSkills()
	if got := tb.text(t, choice+" .hint"); !strings.HasPrefix(got, "Summarize a CSV file") {
		t.Errorf("the builder describes csv-analyzer as %q, want its description", got)
	}
	checked := func() bool {
		return run(t, tb, chromedp.Evaluate[bool](`document.querySelector('`+choice+` input').checked`))
	}
	if checked() {
		t.Fatal("a new app has csv-analyzer chosen")
	}
	tb.do(t, chromedp.Click(chromedp.CSS(choice+" input")))
	save(t, tb, "All changes saved")
	stored, err := e.apps.Get(context.Background(), app.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(stored.Graph.Nodes[1].Inputs["skills"]); got != `["csv-analyzer"]` {
		t.Fatalf("the builder saved skills %s, want [\"csv-analyzer\"]", got)
	}
	openSkills()
	if !checked() {
		t.Fatal("after saving and reloading, csv-analyzer is not chosen")
	}
	e.screenshot(t, tb, "workspace-builder.png")

	// A new chat: the CSV is attached before the first message, which
	// creates the chat under the id the page has.
	tb = e.signIn(t, "alice")
	tb.expected = []string{"status of 413"} // the refused upload
	chatID := e.openChat(t, tb, app.ID)
	dir := t.TempDir()
	csvFile := writeFile(t, dir, "sales.csv", workspaceCSV)
	tb.do(t,
		chromedp.SetUploadFiles(chromedp.ID("attach-input"), []string{csvFile}),
		chromedp.WaitVisible(chromedp.CSS(`#attachments .attachment[data-state="done"][data-name="sales.csv"]`)),
	)
	chip := `#attachments .attachment[data-name="sales.csv"]`
	if got := tb.text(t, chip+` [data-role=name]`) + " · " + tb.text(t, chip+` [data-role=size]`); got != "sales.csv · "+csvSize {
		t.Errorf("the chip shows %q, want the file's name and size", got)
	}
	if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#attachments progress").length`)); n != 0 {
		t.Errorf("%d progress bars left after the upload finished", n)
	}
	chat, err := e.chatNamed(context.Background(), chatID)
	if err != nil || chat.AppID != app.ID || chat.Title != "sales.csv" {
		t.Fatalf("the chat after the first upload: %+v %v, want it made under the page's id and titled after the file", chat, err)
	}

	// An upload over the limit shows the server's reason; dismissed, it
	// is gone.
	big := writeFile(t, dir, "big.csv", strings.Repeat("x", 3<<19))
	bigChip := `#attachments .attachment[data-name="big.csv"]`
	tb.do(t,
		chromedp.SetUploadFiles(chromedp.ID("attach-input"), []string{big}),
		chromedp.WaitVisible(chromedp.CSS(bigChip+`[data-state="error"]`)),
	)
	if got := tb.text(t, bigChip+` [data-role=error]`); !strings.Contains(got, "big.csv was not uploaded") || !strings.Contains(got, "file too large") || !strings.Contains(got, "1 MiB") {
		t.Errorf("the refused upload shows %q, want the server's reason", got)
	}
	tb.do(t, chromedp.Click(chromedp.CSS(bigChip+` [data-role=remove]`)), chromedp.WaitNotPresent(chromedp.CSS(bigChip)))

	// A file dropped on the chat is attached too; removed again, it is
	// deleted from the chat.
	// The hint is drawn after the event, so its state is waited for.
	drag := func(event, want string) {
		tb.js(t, `(() => {
			window.dropped = window.dropped || new DataTransfer();
			if (!window.dropped.items.length) window.dropped.items.add(new File(["not needed"], "scratch.txt", { type: "text/plain" }));
			document.querySelector("#messages").dispatchEvent(new DragEvent("`+event+`", { dataTransfer: window.dropped, bubbles: true, cancelable: true }));
			return "";
		})()`)
		run(t, tb, poll[bool](`(want) => (document.querySelector("[data-role=drop-hint]").hidden ? "hidden" : "shown") === want`, chromedp.WithPollingArgs(want)))
	}
	drag("dragenter", "shown") // files dragged over the chat show the hint
	drag("drop", "hidden")     // dropped, it goes
	scratchChip := `#attachments .attachment[data-name="scratch.txt"]`
	tb.do(t,
		chromedp.WaitVisible(chromedp.CSS(scratchChip+`[data-state="done"]`)),
		chromedp.Click(chromedp.CSS(scratchChip+` [data-role=remove]`)),
		chromedp.WaitNotPresent(chromedp.CSS(scratchChip)),
	)
	if got := chatUploads(t, alice, app.ID, chatID, ""); got != "sales.csv" {
		t.Errorf("the chat's uploads after removing scratch.txt: %q, want only sales.csv", got)
	}
	e.screenshot(t, tb, "workspace-attached.png")

	// The message goes with the file; the model is told where it is, runs
	// the skill's script on it and answers.
	tb.ask(t, "What is in this file?")
	lastUser := `:is(#messages > .msg.user:nth-last-child(2), #messages > div:last-child > .msg.user)`
	if got := tb.js(t, `document.querySelector("`+lastUser+`").firstChild.textContent`); got != "What is in this file?" {
		t.Errorf("the message shows %q", got)
	}
	if got := textContent(t, tb, lastUser+` .attachment[data-path="`+workspaceCSVPath+`"]`); got != "sales.csv "+csvSize {
		t.Errorf("the message's attachment shows %q, want sales.csv and its size", got)
	}
	if n := run(t, tb, chromedp.Evaluate[int](`document.querySelectorAll("#attachments .attachment").length`)); n != 0 {
		t.Errorf("%d chips left above the input after sending", n)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the question, the script's result)", len(reqs))
	}
	msgs := reqs[0].Messages
	if q := msgs[len(msgs)-1].Content; !strings.Contains(q, "What is in this file?") || !strings.Contains(q, "Attached files: "+workspaceCSVPath+" ("+csvSize+")") {
		t.Errorf("the model was asked %q, want the question and where the file is", q)
	}
	card := lastAnswer + ` .tool-card`
	tb.do(t, chromedp.Click(chromedp.CSS(card+" summary")), chromedp.WaitVisible(chromedp.CSS(card+` [data-role=stdout]`)))
	checks := []struct{ name, css, want string }{
		{"tool", card + ` .label`, "execute_skill_script"},
		{"call", card + ` [data-role=command]`, "csv-analyzer scripts/analyze.py " + workspaceCSVPath + " --output " + workspaceSummary},
		{"status", card + ` [data-role=status]`, "success"},
		{"stdout", card + ` [data-role=stdout]`, "wrote json summary of 3 rows to " + workspaceSummary},
	}
	for _, c := range checks {
		if got := tb.text(t, c.css); got != c.want {
			stderr := tb.js(t, `(document.querySelector("`+card+` [data-role=stderr]") || {}).textContent || ""`)
			t.Errorf("the card's %s = %q, want %q (stderr %q)", c.name, got, c.want, stderr)
		}
	}

	// The result is in the files panel, under intermediate, and downloads.
	tb.do(t,
		browse(`#files li[data-path="/workspace/intermediate"] a`, `#files li[data-path="`+workspaceSummary+`"]`),
	)
	name, data := downloadFile(t, tb, `#files li[data-path="`+workspaceSummary+`"] button.download`)
	var sum struct {
		Source  string `json:"source"`
		Rows    int    `json:"rows"`
		Columns []struct {
			Name string   `json:"name"`
			Type string   `json:"type"`
			Mean *float64 `json:"mean"`
		} `json:"columns"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatalf("the downloaded %s is not the JSON summary: %v\n%s", name, err, data)
	}
	if name != "sales-summary.json" || sum.Source != workspaceCSVPath || sum.Rows != 3 || len(sum.Columns) != 2 ||
		sum.Columns[1].Name != "amount" || sum.Columns[1].Type != "numeric" || sum.Columns[1].Mean == nil || *sum.Columns[1].Mean != 20 {
		t.Errorf("downloaded %s: %s, want the summary of sales.csv (3 rows, amount's mean 20)", name, data)
	}
	e.screenshot(t, tb, "workspace-result.png")

	// Opened again, the message shows its attachment the same way, and
	// the card what the skill ran.
	tb = e.signIn(t, "alice")
	tb.do(t, chromedp.Navigate(e.url+"/apps/"+app.ID+"/chat/"+chatID), chromedp.WaitVisible(chromedp.CSS(`#messages .tool-card .badge.success`)))
	if got := textContent(t, tb, `#messages .msg.user .attachment[data-path="`+workspaceCSVPath+`"]`); got != "sales.csv "+csvSize {
		t.Errorf("the stored message's attachment shows %q", got)
	}
	if got := tb.js(t, `document.querySelector("#messages .msg.user").firstChild.textContent`); got != "What is in this file?" {
		t.Errorf("the stored message shows %q, want the question without the attachment line", got)
	}
	if got := tb.text(t, `#messages .tool-card [data-role=command]`); got != checks[1].want {
		t.Errorf("the stored card shows %q, want %q", got, checks[1].want)
	}

	// The panel lists the workspace's directories; "Upload here" uploads
	// into the uploads directory shown, or into the uploads from
	// elsewhere.
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/uploads"]`)))
	listed := tb.js(t, `[...document.querySelectorAll("#files li.directory")].map((li) => li.dataset.path).join(" ")`)
	for _, d := range []string{"uploads", "intermediate", "skills"} {
		if !strings.Contains(" "+listed+" ", " /workspace/"+d+" ") {
			t.Errorf("the panel lists the directories %q, without /workspace/%s", listed, d)
		}
	}
	if got := tb.text(t, `#files [data-role=upload-target]`); got != "Files go to /workspace/uploads" {
		t.Errorf("at /workspace the upload target reads %q", got)
	}
	uploadVia(t, alice, app.ID, chatID, "reports", "q1.csv", "quarter\n1\n")
	notes := writeFile(t, dir, "notes.txt", "remember the east")
	tb.do(t,
		browse(`#files li[data-path="/workspace/uploads"] a`, `#files li[data-path="/workspace/uploads/reports"]`),
		browse(`#files li[data-path="/workspace/uploads/reports"] a`, `#files li[data-path="/workspace/uploads/reports/q1.csv"]`),
	)
	if got := tb.text(t, `#files [data-role=upload-target]`); got != "Files go to /workspace/uploads/reports" {
		t.Errorf("in /workspace/uploads/reports the upload target reads %q", got)
	}
	tb.do(t,
		chromedp.SetUploadFiles(chromedp.ID("files-upload-input"), []string{notes}),
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/uploads/reports/notes.txt"]`)),
	)
	if got := chatUploads(t, alice, app.ID, chatID, "reports"); got != "notes.txt q1.csv" {
		t.Errorf("the chat's uploads in reports: %q, want notes.txt and q1.csv", got)
	}

	// The skills are read-only: saving one says so.
	skillFile := `#files li[data-path="/workspace/skills/csv-analyzer/SKILL.md"]`
	tb.do(t,
		chromedp.Click(chromedp.CSS(`#files li a`)), // ".." up to uploads
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/uploads/reports"]`)),
		chromedp.Click(chromedp.CSS(`#files li a`)), // ".." up to /workspace
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/skills"]`)),
		browse(`#files li[data-path="/workspace/skills"] a`, `#files li[data-path="/workspace/skills/csv-analyzer"]`),
		browse(`#files li[data-path="/workspace/skills/csv-analyzer"] a`, skillFile),
		chromedp.Click(chromedp.CSS(skillFile+" a")),
	)
	if got := run(t, tb, poll[string](`() => document.querySelector("#files textarea")?.value`)); !strings.Contains(got, "name: csv-analyzer") {
		t.Fatalf("the skill's SKILL.md opens as %q", got)
	}
	// The skills are read-only: the panel says so and offers no Save (the
	// server's refusal of a write there is uploads_test's).
	if got := tb.js(t, `JSON.stringify([document.querySelector("#files [data-role=open-read-only]") !== null, document.querySelector("#files textarea").readOnly, document.getElementById("save-file") === null])`); got != "[true,true,true]" {
		t.Errorf("the opened SKILL.md: [read-only badge, read-only text, no Save] = %s, want all true", got)
	}
	e.screenshot(t, tb, "workspace-files.png")

	t.Run("share links", func(t *testing.T) {
		// A link's files setting decides what its visitors may do with
		// files: attach and upload only with read-write.
		tests := []struct {
			files                string
			panel, attach, write bool
		}{
			{"hidden", false, false, false},
			{"read", true, false, false},
			{"write", true, true, true},
		}
		for _, tc := range tests {
			t.Run(tc.files, func(t *testing.T) {
				l := newLink(t, alice, app.ID, map[string]any{"name": "files " + tc.files, "files": tc.files, "showTools": true})
				v := e.newTab(t)
				v.do(t,
					chromedp.Navigate(e.url+l.URL),
					chromedp.WaitVisible(chromedp.ID("new-chat")),
					chromedp.Click(chromedp.ID("new-chat")),
					chromedp.WaitVisible(chromedp.ID("chat-form")),
				)
				present := func(css string) bool {
					return run(t, v, chromedp.Evaluate[bool](`document.querySelector('`+css+`') !== null`))
				}
				for _, c := range []struct {
					what, css string
					want      bool
				}{
					{"the files panel", "#files", tc.panel},
					{"the attach button", "#attach", tc.attach},
					{"the attach input", "#attach-input", tc.attach},
					{"the panel's upload", "#files-upload", tc.write},
				} {
					if got := present(c.css); got != c.want {
						t.Errorf("a %s link's chat page shows %s: %v, want %v", tc.files, c.what, got, c.want)
					}
				}
				if !tc.attach {
					return
				}
				// The visitor's upload goes through the link's API.
				v.do(t,
					chromedp.SetUploadFiles(chromedp.ID("attach-input"), []string{csvFile}),
					chromedp.WaitVisible(chromedp.CSS(`#attachments .attachment[data-state="done"][data-name="sales.csv"]`)),
					chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="/workspace/uploads"]`)),
					browse(`#files li[data-path="/workspace/uploads"] a`, `#files li[data-path="`+workspaceCSVPath+`"]`),
				)
			})
		}
	})
}

// skillsPage: the admins' skills page lists the installed skill; a ZIP
// installs through the form, a broken one shows why it is refused; a
// folder that is not a valid skill is listed with its reason; view and
// delete work.
func skillsPage(t *testing.T, e *browserEnv, installed skillJSONView) {
	tb := e.signIn(t, "admin")
	tb.expected = []string{"status of 400"} // the broken ZIP
	// Someone copied a folder into the skills by hand; it has no
	// description.
	broken := filepath.Join(e.engine.Services.Skills.Dir(), "half-done")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, broken, "SKILL.md", "---\nname: half-done\n---\nNot finished.\n")

	row := `#skills tr[data-skill="csv-analyzer"]`
	tb.do(t,
		chromedp.Navigate(e.url+"/admin"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/admin/skills"]`)),
		chromedp.Click(chromedp.CSS(`header nav a[href="/admin/skills"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	cells := tb.js(t, `[...document.querySelectorAll('`+row+` td[data-role]')].map((td) => td.dataset.role + "=" + td.textContent).join("|")`)
	wantCells := fmt.Sprintf("name=csv-analyzer|description=%s|version=1|files=%d|size=%s|installed-at=%s|installed-by=u:admin",
		installed.Description, len(installed.Files), humanSize(installed.Size), installed.InstalledAt.Local().Format("2006-01-02 15:04"))
	if cells != wantCells {
		t.Errorf("the skill's row:\n got %s\nwant %s", cells, wantCells)
	}
	reason := `#invalid-skills tr[data-dir="half-done"] [data-role=reason]`
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(reason)))
	if got := tb.text(t, reason); !strings.Contains(got, "description") {
		t.Errorf("the invalid folder's reason is %q, want it to name the missing description", got)
	}

	// View: the instructions and the versions.
	tb.do(t,
		chromedp.Click(chromedp.CSS(row+` [data-skill-action=view]`)),
		chromedp.WaitVisible(chromedp.ID("skill-detail")),
	)
	if got := tb.text(t, `#skill-detail [data-role=instructions]`); !strings.HasPrefix(got, "# CSV analyzer") {
		t.Errorf("the instructions shown start %q", got[:min(len(got), 40)])
	}
	if got := tb.text(t, `#skill-detail [data-role=versions] tbody tr`); !strings.HasPrefix(got, "1 · current") {
		t.Errorf("the versions shown: %q", got)
	}

	// A broken ZIP is refused with its reason.
	dir := t.TempDir()
	notZip := writeFile(t, dir, "notes.zip", "these are notes, not an archive")
	status := `#install-skill [data-role=status]`
	tb.do(t,
		chromedp.SetUploadFiles(chromedp.ID("skill-zip"), []string{notZip}),
		chromedp.Click(chromedp.CSS(`#install-skill button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(status+`.error`)),
	)
	if got := tb.text(t, status); !strings.Contains(strings.ToLower(got), "zip") {
		t.Errorf("the broken ZIP shows %q, want the server's reason", got)
	}

	// A good one installs; the list shows it; it can be deleted.
	zipped, err := skills.ZipDir(filepath.Join("..", "skills", "markdown-report"))
	if err != nil {
		t.Fatal(err)
	}
	good := writeFile(t, dir, "markdown-report.zip", string(zipped))
	tb.do(t,
		chromedp.SetUploadFiles(chromedp.ID("skill-zip"), []string{good}),
		chromedp.Click(chromedp.CSS(`#install-skill button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(status+`.ok`)),
		chromedp.WaitVisible(chromedp.CSS(`#skills tr[data-skill="markdown-report"]`)),
	)
	if got := tb.text(t, status); got != "markdown-report version 1 is installed." {
		t.Errorf("after installing the page says %q", got)
	}
	e.screenshot(t, tb, "skills.png")
	tb.do(t,
		chromedp.Click(chromedp.CSS(`#skills tr[data-skill="markdown-report"] [data-skill-action=delete]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#skills tr[data-skill="markdown-report"]`)),
	)
	if got := tb.text(t, `#skills-status`); got != `The skill "markdown-report" was deleted.` {
		t.Errorf("after deleting the page says %q", got)
	}
	tb.mu.Lock()
	asked := append([]string(nil), tb.dialogs...)
	tb.mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], `Delete the skill "markdown-report"?`) {
		t.Errorf("dialogs %q, want one confirmation of the deletion", asked)
	}

	// The examples the engine carries: csv-analyzer is installed, the
	// deleted markdown-report is offered and installs with one click, its
	// script executable as in the repository.
	example := func(name string) string { return `#example-skills li[data-example="` + name + `"]` }
	tb.do(t, chromedp.WaitVisible(chromedp.CSS(example("csv-analyzer")+` [data-role=installed]`)))
	if got := tb.text(t, example("markdown-report")+` [data-role=install]`); got != "Install" {
		t.Errorf("the deleted example's button says %q, want Install", got)
	}
	tb.do(t,
		chromedp.Click(chromedp.CSS(example("markdown-report")+` [data-role=install]`)),
		chromedp.WaitVisible(chromedp.CSS(`#skills tr[data-skill="markdown-report"]`)),
		chromedp.WaitVisible(chromedp.CSS(example("markdown-report")+` [data-role=installed]`)),
	)
	if got := tb.text(t, `#skills-status`); got != "markdown-report version 1 is installed." {
		t.Errorf("after installing the example the page says %q", got)
	}
	if fi, err := os.Stat(filepath.Join(e.engine.Services.Skills.Dir(), "markdown-report", "scripts", "render.py")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("the example's script: %v, %v; want it executable", fi, err)
	}
	e.screenshot(t, tb, "skills-examples.png")
	tb.do(t, chromedp.EmulateViewport(390, 844), chromedp.Navigate(e.url+"/admin/skills?lang=zh"), chromedp.WaitVisible(chromedp.CSS(row)))
	e.phoneFits(t, tb, "skills-phone-zh.png")
}

// skillJSONView is a skill as GET /admin/api/skills gives it.
type skillJSONView struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Version     int       `json:"version"`
	Files       []string  `json:"files"`
	Size        int64     `json:"size"`
	InstalledAt time.Time `json:"installedAt"`
}

// installSkillDir installs one of the example skills through the admin
// API, as an admin's program would, and returns it as installed.
func installSkillDir(t *testing.T, admin *enginetest.Client, name string) skillJSONView {
	t.Helper()
	zipped, err := skills.ZipDir(filepath.Join("..", "skills", name))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", admin.URL+"/admin/api/skills", bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/zip")
	req.Header.Set("X-CSRF-Token", admin.CSRF)
	resp, err := admin.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Skill skillJSONView }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Skill.Name != name {
		t.Fatalf("install %s: %d %+v %v", name, resp.StatusCode, out, err)
	}
	return out.Skill
}

// uploadVia uploads a file into dir of the chat's uploads through the
// API, with the caller's session.
func uploadVia(t *testing.T, c *enginetest.Client, appID, chatID, dir, name, content string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	w, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(content))
	mw.Close()
	q := url.Values{"appId": {appID}, "dir": {dir}}
	req, err := http.NewRequest("POST", c.URL+"/api/uploads/"+chatID+"?"+q.Encode(), &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", c.CSRF)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload %s into %s: %d", name, dir, resp.StatusCode)
	}
}

// chatUploads lists the files of dir in the chat's uploads through the
// API, space-separated.
func chatUploads(t *testing.T, c *enginetest.Client, appID, chatID, dir string) string {
	t.Helper()
	q := url.Values{"appId": {appID}, "area": {"uploads"}, "dir": {dir}}
	resp := c.Do(t, "GET", "/api/uploads/"+chatID+"/files?"+q.Encode(), nil)
	var list struct {
		Files []struct{ Name string }
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("list the chat's uploads: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &list)
	var names []string
	for _, f := range list.Files {
		names = append(names, f.Name)
	}
	return strings.Join(names, " ")
}

// textContent is an element's text as the DOM holds it (chromedp.Text
// gives the rendered text, which breaks lines between flex items).
func textContent(t *testing.T, tb *tab, css string) string {
	t.Helper()
	b, _ := json.Marshal(css)
	return tb.js(t, `(() => { const n = document.querySelector(`+string(b)+`); return n ? n.textContent : "(missing)"; })()`)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// humanSize is workspace.HumanSize for the sizes of these files.
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1024), ".0") + " KiB"
}

// browse opens a directory of the files panel by its link and waits for
// wantCSS: it clicks again until the listing shows it, because a refresh
// of the panel (after an answer, an upload) replaces its links under a
// click.
func browse(linkCSS, wantCSS string) chromedp.Action[chromedp.Void] {
	clickUntil := poll[bool](fmt.Sprintf(`() => {
		if (document.querySelector(%q)) return true;
		const a = document.querySelector(%q);
		if (a) a.click();
		return false;
	}`, wantCSS, linkCSS), chromedp.WithPollingInterval(250*time.Millisecond))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := clickUntil(ctx, tg)
		return chromedp.Void{}, err
	}
}

package web_test

// Skills through the product (K3, K4): an admin installs a skill, an app
// lets its agent use it, a user uploads a CSV, the agent loads the skill
// and runs its script on the file in the chat's sandbox, and the result
// is in /workspace/intermediate for the user to download.

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox/skills"
)

// installSkill installs one of the example skills of the repository.
func installSkill(t *testing.T, admin *enginetest.Client, name string) {
	t.Helper()
	zipped, err := skills.ZipDir(filepath.Join("..", "skills", name))
	if err != nil {
		t.Fatal(err)
	}
	cc := *admin
	cc.Header = admin.Header.Clone()
	if cc.Header == nil {
		cc.Header = http.Header{}
	}
	cc.Header.Set("Content-Type", "application/zip")
	expect(t, &cc, "POST", "/admin/api/skills", zipped, 201)
}

func TestSkillRunsOnAnUpload(t *testing.T) {
	t.Parallel()
	args := `{"name":"csv-analyzer","script":"scripts/analyze.py","args":["/workspace/uploads/sales.csv","--output","/workspace/intermediate/sales-summary.json"]}`
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_load", "load_skill", `{"name":"csv-analyzer"}`)}},
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("call_escape", "read_skill_resource", `{"name":"csv-analyzer","path":"../../../etc/passwd"}`),
			llmtest.Call("call_other", "load_skill", `{"name":"markdown-report"}`),
			llmtest.Call("call_run", "execute_skill_script", args)}},
		llmtest.Reply{Text: "The table has 3 rows."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	installSkill(t, admin, "csv-analyzer")
	installSkill(t, admin, "markdown-report")

	// The app allows one of the two skills.
	appID := scriptedApp(t, admin, "analyst", map[string]string{"useAgentSandbox": `true`, "skills": `["csv-analyzer"]`})

	csv := "region,amount\nnorth,10\nsouth,30.5\nnorth,20\n"
	if r := upload(t, admin, "/api/uploads/c-sales?appId="+appID, part{"sales.csv", []byte(csv)}); r.Status != 201 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	_, answer := sendTurn(t, admin, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "c-sales",
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "What is in my table?"}, {"type": "file_url", "name": "sales.csv", "url": "sales.csv"}}}}}, 200)
	if answer != "The table has 3 rows." {
		t.Errorf("answer %q", answer)
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	// K3: the prompt lists the upload and the allowed skill only, without
	// the skill's body (progressive disclosure).
	system := reqs[0].Messages[0].Content
	for _, want := range []string{"/workspace/uploads/sales.csv", "csv-analyzer: Summarize a CSV file", "/workspace/intermediate"} {
		if !strings.Contains(system, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, system)
		}
	}
	if strings.Contains(system, "markdown-report") || strings.Contains(system, "## How to run") {
		t.Errorf("the system prompt shows a skill the app did not allow, or a skill's body:\n%s", system)
	}
	var tools []string
	for _, tl := range reqs[0].Tools {
		tools = append(tools, tl.Function.Name)
	}
	if strings.Join(tools, ",") != "sandbox_shell,sandbox_process,list_skills,load_skill,read_skill_resource,execute_skill_script" {
		t.Errorf("tools offered: %v", tools)
	}
	if q := reqs[0].Messages[len(reqs[0].Messages)-1].Content; !strings.Contains(q, "Attached files: /workspace/uploads/sales.csv") {
		t.Errorf("the question does not say where the attachment is: %q", q)
	}

	results := map[string]string{}
	for _, m := range reqs[2].Messages {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	if r := results["call_load"]; !strings.Contains(r, "How to run") || !strings.Contains(r, "scripts/analyze.py") {
		t.Errorf("load_skill gave %.300s", r)
	}
	if r := results["call_escape"]; !strings.Contains(r, `"error"`) || strings.Contains(r, "root:") {
		t.Errorf("read_skill_resource outside the skill gave %.300s", r)
	}
	if r := results["call_other"]; !strings.Contains(r, `no skill \"markdown-report\" for you`) {
		t.Errorf("load_skill of a skill the app did not allow gave %.300s", r)
	}
	var run struct {
		ExitCode int
		Stdout   string
		Stderr   string
	}
	if err := json.Unmarshal([]byte(results["call_run"]), &run); err != nil || run.ExitCode != 0 {
		t.Fatalf("execute_skill_script gave %s (%v)", results["call_run"], err)
	}

	// The result is in the chat's intermediate files, for the user.
	dl := expect(t, admin, "POST", "/api/core/ai/sandbox/download", map[string]any{"appId": appID, "chatId": "c-sales",
		"path": "/workspace/intermediate/sales-summary.json"}, 200)
	var summary struct {
		Rows    int
		Columns []struct {
			Name, Type string
			Max        float64
		}
	}
	if err := json.Unmarshal(dl.Body, &summary); err != nil || summary.Rows != 3 || len(summary.Columns) != 2 || summary.Columns[1].Max != 30.5 {
		t.Errorf("the summary the script wrote: %s (%v)", dl.Body, err)
	}

	// The audit shows the script's run as a command of the agent.
	waitUntil(t, "the audit has the script's run", func() bool {
		return strings.Contains(string(admin.Do(t, "GET", "/admin/api/audit?app="+appID, nil).Body), "analyze.py")
	})
}

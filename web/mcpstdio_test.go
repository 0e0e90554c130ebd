package web_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// TestStdioMCPThroughChat: a stdio MCP server registered by the admin
// runs inside the chat's sandbox, started on the chat's first use and
// kept across turns: the scripted model calls its counting tool in two
// turns and gets 1, then 2 from the same process. The calls are audited
// under the server's tool, the server's start as a command.
func TestStdioMCPThroughChat(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "mcp-echo")
	build := exec.Command("go", "build", "-o", bin, "../registry/mcptool/testdata/mcp-echo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test MCP server: %v\n%s", err, out)
	}
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_1", "local__count", `{}`)}},
		llmtest.Reply{Text: "Counted once."},
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call_2", "local__count", `{}`)}},
		llmtest.Reply{Text: "Counted twice."})
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	// The server is a program the user uploads to the chat; the
	// registered command installs it in the workspace and runs it.
	expect(t, admin, "POST", "/admin/api/mcp-servers", map[string]any{"id": "local", "name": "Local counter", "transport": "stdio",
		"command": []string{"/bin/sh", "-c", "install -m 755 /workspace/uploads/mcp-echo /workspace/mcp-echo && exec /workspace/mcp-echo"}}, 201)
	appID := scriptedApp(t, admin, "stdio", map[string]string{"useAgentSandbox": `true`, "tools": `["mcp:local"]`})
	if r := upload(t, admin, "/api/uploads/c-stdio?appId="+appID, part{name: "mcp-echo", content: server}); r.Status != 200 && r.Status != 201 {
		t.Fatalf("upload the server: %d %s", r.Status, r.Body)
	}

	for i, want := range []string{"Counted once.", "Counted twice."} {
		_, answer := sendTurn(t, admin, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "c-stdio", "messages": message("count")}, 200)
		if answer != want {
			t.Fatalf("turn %d: answer %q, want %q", i+1, answer, want)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	var offered []string
	for _, tl := range reqs[0].Tools {
		offered = append(offered, tl.Function.Name)
	}
	if !strings.Contains(strings.Join(offered, ","), "local__count") {
		t.Fatalf("tools offered: %v, want local__count", offered)
	}
	result := func(req llm.Request, id string) string {
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool && m.ToolCallID == id {
				var r struct{ Result string }
				if err := json.Unmarshal([]byte(m.Content), &r); err != nil {
					t.Fatalf("the result of %s: %q: %v", id, m.Content, err)
				}
				return r.Result
			}
		}
		return ""
	}
	count := regexp.MustCompile(`^(\d+) \(pid (\d+)\)$`)
	first, second := count.FindStringSubmatch(result(reqs[1], "call_1")), count.FindStringSubmatch(result(reqs[3], "call_2"))
	if first == nil || second == nil {
		t.Fatalf("the tool's results: %q and %q, want counts", result(reqs[1], "call_1"), result(reqs[3], "call_2"))
	}
	if first[1] != "1" || second[1] != "2" || first[2] != second[2] {
		t.Errorf("counts %s then %s from processes %s and %s; want 1 then 2 from one process kept across turns", first[1], second[1], first[2], second[2])
	}

	// The audit: the server's start once, as a command of the sandbox;
	// each call under its tool.
	var records struct {
		Records []struct{ Op, Tool, Command, Status string }
	}
	waitUntil(t, "the audit has both calls", func() bool {
		admin.Do(t, "GET", "/admin/api/audit?app="+appID, nil).JSON(t, &records)
		calls := 0
		for _, r := range records.Records {
			if r.Op == "mcp:local/count" {
				calls++
			}
		}
		return calls == 2
	})
	starts := 0
	for _, r := range records.Records {
		if strings.HasPrefix(r.Command, "exec /bin/sh -c") {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the audit has %d start(s) of the server, want 1: %+v", starts, records.Records)
	}
}

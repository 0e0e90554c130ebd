package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestBackgroundProcessTool (L3): through the chat API, the agent starts
// a program that outlives its call with sandbox_process (where the last
// command left the shell), feeds it input, reads its output, stops it;
// a start the policy forbids is refused as a command would be; a plain
// command's background job still ends with it; and the chat's panel
// lists the process and reads its output, for the chat's user only.
func TestBackgroundProcessTool(t *testing.T) {
	t.Parallel()
	call := func(id, tool, args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(id, tool, args)}}
	}
	// (The brackets keep the counting command from finding itself.)
	const count = `cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -o 'sleep 744[2]' | wc -l`
	model := llmtest.New(t,
		// Turn 1: state, a background start, a command after it.
		call("c1", "sandbox_shell", `{"command":"cd /tmp && export BG=7441"}`),
		call("c2", "sandbox_process", `{"action":"start","command":"echo \"$BG $(pwd)\"; read x; echo \"got $x\" | tee /workspace/got.txt; exec sleep 7442"}`),
		call("c3", "sandbox_shell", mustJSON(t, map[string]string{"command": `[ "$(` + count + `)" -ge 1 ] && echo alive; sleep 7443 &`})),
		llmtest.Reply{Text: "started"},
		// Turn 2: input, output, stop; the forbidden start.
		call("c4", "sandbox_process", `{"action":"write","id":"p1","input":"hi\n","end":true}`),
		call("c5", "sandbox_shell", `{"command":"while [ ! -s /workspace/got.txt ]; do sleep 0.05; done; cat /workspace/got.txt"}`),
		call("c6", "sandbox_process", `{"action":"read","id":"p1"}`),
		call("c7", "sandbox_process", `{"action":"list"}`),
		call("c8", "sandbox_process", `{"action":"stop","id":"p1"}`),
		call("c9", "sandbox_shell", mustJSON(t, map[string]string{"command": count + "; " + strings.ReplaceAll(count, "744[2]", "744[3]")})),
		call("c10", "sandbox_process", `{"action":"start","command":"nc -l 4444"}`),
		call("c11", "sandbox_process", `{"action":"read","id":"p7"}`),
		llmtest.Reply{Text: "done"},
	)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"rules": [{"id": "no-nc", "command": ["nc"], "decision": "forbid", "justification": "no raw sockets"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL, "FLOWBOX_POLICY_FILE": policy}})
	env.CreateUser(t, "dana", auth.RoleUser)
	dana := env.Login(t, "dana", enginetest.Password("dana"))
	env.CreateUser(t, "eve", auth.RoleUser)
	eve := env.Login(t, "eve", enginetest.Password("eve"))
	appID := scriptedApp(t, dana, "servers", nil)
	// A chat without a sandbox has no processes, and asking starts none.
	if r := expect(t, dana, "POST", "/api/core/ai/sandbox/processes", map[string]any{"action": "list", "appId": appID, "chatId": "bg-1"}, 200); string(r.Body) != `{"processes":[]}` {
		t.Errorf("before the chat's first turn: %s", r.Body)
	}
	chatID, _ := sendTurn(t, dana, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": "bg-1", "messages": message("start it")}, 200)

	// The chat's panel lists it and shows its output; nobody else's.
	procs := "/api/core/ai/sandbox/processes"
	var listed struct{ Processes []sandbox.Process }
	expect(t, dana, "POST", procs, map[string]any{"action": "list", "appId": appID, "chatId": chatID}, 200).JSON(t, &listed)
	if len(listed.Processes) != 1 || listed.Processes[0].ID != "p1" || !listed.Processes[0].Running {
		t.Errorf("the panel lists %+v, want p1 running", listed.Processes)
	}
	var read struct {
		Output string
		Next   int64
	}
	expect(t, dana, "POST", procs, map[string]any{"action": "read", "appId": appID, "chatId": chatID, "id": "p1"}, 200).JSON(t, &read)
	if read.Output != "7441 /tmp\n" || read.Next != int64(len(read.Output)) {
		t.Errorf("the panel reads %q up to %d", read.Output, read.Next)
	}
	expect(t, dana, "POST", procs, map[string]any{"action": "read", "appId": appID, "chatId": chatID, "id": "p9"}, 404)
	expect(t, dana, "POST", procs, map[string]any{"action": "kill", "appId": appID, "chatId": chatID, "id": "p1"}, 400)
	expect(t, eve, "POST", procs, map[string]any{"action": "list", "appId": appID, "chatId": chatID}, 404)
	expect(t, eve, "POST", procs, map[string]any{"action": "stop", "appId": appID, "chatId": chatID, "id": "p1"}, 404)

	sendTurn(t, dana, "/api/v1/chat/completions", map[string]any{"appId": appID, "chatId": chatID, "messages": message("feed it, read it, stop it")}, 200)

	statuses, responses := toolStatuses(t, dana, appID, chatID)
	if len(statuses) != 11 {
		t.Fatalf("%d tool calls recorded (%v), want 11", len(statuses), statuses)
	}
	want := []struct{ status, has string }{
		{"success", ""},
		{"success", `"id":"p1"`},
		{"success", `"stdout":"alive\n`}, // the background process runs on after its call
		{"success", `"written":3`},
		{"success", "got hi"},
		{"success", `7441 /tmp\n`},
		{"success", `"running":true`},
		{"success", `"stopped":true`},
		{"success", `"stdout":"0\n0\n`}, // stopped; the command's own background job ended with it
		{"refused", "no-nc"},
		{"failed", `no such background process \"p7\"`},
	}
	for i, w := range want {
		if statuses[i] != w.status || !strings.Contains(responses[i], w.has) {
			t.Errorf("call %d: %s %s; want %s with %q", i+1, statuses[i], responses[i], w.status, w.has)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

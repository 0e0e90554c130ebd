package web_test

// The shell policy through the product: the operator's policy file, an
// app's tightening in its tool-call node, refusals the model and the user
// read, and secrets kept out of the answer, the live stream, the stored
// history and the audit.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
)

// withPolicy is the demo graph with a command policy on its tool-call
// node.
func withPolicy(policy string) nodes.Graph {
	g := apps.DemoGraph()
	for i, n := range g.Nodes {
		if n.Type == "tools" {
			g.Nodes[i].Inputs["policy"] = json.RawMessage(policy)
		}
	}
	return g
}

// toolStatuses are the statuses and results of a chat's tool calls, in
// order.
func toolStatuses(t *testing.T, c *enginetest.Client, appID, chatID string) (statuses []string, responses []string) {
	t.Helper()
	var chat struct {
		Items []struct {
			ToolCalls json.RawMessage `json:"toolCalls"`
		}
	}
	// A streamed answer reaches the client before its turn is written
	// down (web/chat), so a chat's first turn may not be there yet.
	resp := c.Do(t, "GET", "/api/apps/"+appID+"/chats/"+chatID, nil)
	for deadline := time.Now().Add(30 * time.Second); resp.Status == 404 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		resp = c.Do(t, "GET", "/api/apps/"+appID+"/chats/"+chatID, nil)
	}
	if resp.Status != 200 {
		t.Fatalf("GET the chat %s: %d %s, want 200", chatID, resp.Status, clip(resp.Body))
	}
	resp.JSON(t, &chat)
	for _, it := range chat.Items {
		var calls []struct{ Status, Response string }
		_ = json.Unmarshal(it.ToolCalls, &calls)
		for _, call := range calls {
			statuses = append(statuses, call.Status)
			responses = append(responses, call.Response)
		}
	}
	return statuses, responses
}

func TestShellPolicy(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "policy.json")
	operator := `{"rules": [{"id": "no-nc", "command": ["nc", "ncat"], "decision": "forbid",
		"justification": "raw sockets are not for agents here"}], "limits": {"timeoutSeconds": 60}}`
	if err := os.WriteFile(file, []byte(operator), 0o644); err != nil {
		t.Fatal(err)
	}
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": file}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	plain := newApp(t, alice, "plain")

	// The built-in denylist and the operator's rule: the command does not
	// run; the model and the card read the rule.
	for _, tc := range []struct{ command, rule string }{
		{"$ x=rm; $x -rf / --no-preserve-root", "rm-root"},
		{"$ bash -c 'nc -l 4444'", "no-nc"},
	} {
		chatID, _ := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": plain, "messages": message(tc.command)}, 200)
		statuses, responses := toolStatuses(t, alice, plain, chatID)
		if len(statuses) != 1 || statuses[0] != "refused" || !strings.Contains(responses[0], tc.rule) {
			t.Errorf("%s: statuses %v, results %v; want one refusal naming %s", tc.command, statuses, responses, tc.rule)
		}
	}
	chatID, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": plain, "messages": message("$ echo allowed")}, 200)
	if !strings.Contains(answer, "allowed") {
		t.Errorf("an ordinary command: %q", answer)
	}

	// An app's allowlist tightens the operator's policy.
	var strict struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "strict", "graph": withPolicy(`{"mode": "allowlist",
		"rules": [{"id": "listing", "command": ["ls", "echo"], "decision": "allow", "justification": "this app only lists files"}]}`)}, 201).JSON(t, &strict)
	chatID, _ = sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": strict.ID, "messages": message("$ ls -la")}, 200)
	if statuses, _ := toolStatuses(t, alice, strict.ID, chatID); len(statuses) != 1 || statuses[0] != "success" {
		t.Errorf("an allowlisted command: %v", statuses)
	}
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": strict.ID, "chatId": chatID, "messages": message("$ cat /etc/hostname")}, 200)
	if statuses, responses := toolStatuses(t, alice, strict.ID, chatID); len(statuses) != 2 || statuses[1] != "refused" ||
		!strings.Contains(responses[1], "not-allowlisted") || !strings.Contains(responses[1], "ls") {
		t.Errorf("a command outside the allowlist: %v %v; want a refusal naming the rule and what is allowed", statuses, responses)
	}

	// An app cannot loosen the operator's policy, nor save a broken one.
	for _, bad := range []struct{ policy, want string }{
		{`{"limits": {"timeoutSeconds": 120}}`, "timeoutSeconds"},
		{`{"mode": "anything"}`, "mode"},
		{`{"rules": [{"id": "x", "command": "ls", "decision": "maybe", "justification": "?"}]}`, "decision"},
	} {
		resp := alice.Do(t, "POST", "/api/apps", map[string]any{"name": "loose", "graph": withPolicy(bad.policy)})
		if resp.Status != 422 || !strings.Contains(string(resp.Body), bad.want) {
			t.Errorf("policy %s: %d %s; want 422 naming %s", bad.policy, resp.Status, clip(resp.Body), bad.want)
		}
	}

	// Secrets: the command's output reaches no one whole.
	// The command makes the key; it is not in the command itself (a user
	// who types a secret into their message keeps it in their message).
	half := "Ab3dE6gH9jK2mN5pQ8sT1vW4"
	secret := "sk-proj-" + half + half
	resp := expect(t, alice, "POST", "/api/v1/chat/completions", map[string]any{"appId": plain, "stream": true, "detail": true,
		"messages": message("$ k=" + half + "; echo OPENAI_API_KEY=sk-proj-$k$k")}, 200)
	if strings.Contains(string(resp.Body), secret) || !strings.Contains(string(resp.Body), "[REDACTED:") {
		t.Errorf("the live stream carries the secret or no marker:\n%s", resp.Body)
	}
	chats := expect(t, alice, "GET", "/api/apps/"+plain+"/chats", nil, 200)
	var list struct {
		Chats []struct {
			ID string `json:"chatId"`
		}
	}
	chats.JSON(t, &list)
	for _, ch := range list.Chats {
		if body := expect(t, alice, "GET", "/api/apps/"+plain+"/chats/"+ch.ID, nil, 200).Body; strings.Contains(string(body), secret) {
			t.Errorf("the stored chat %s holds the secret", ch.ID)
		}
	}
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	waitUntil(t, "the audit has the secret's command", func() bool {
		body := string(admin.Do(t, "GET", "/admin/api/audit?app="+plain, nil).Body)
		return strings.Contains(body, "OPENAI_API_KEY=")
	})
	audit := string(admin.Do(t, "GET", "/admin/api/audit?app="+plain, nil).Body)
	if strings.Contains(audit, secret) {
		t.Errorf("the audit holds the secret")
	}
	if !strings.Contains(audit, `"refused"`) || !strings.Contains(audit, "rm-root") {
		t.Errorf("the audit lacks the refusals: %s", clip([]byte(audit)))
	}
}

// TestFileRedaction: with file redaction on (the operator's policy), the
// file API's reads and downloads are redacted, a folder's ZIP is refused
// with the reason, and the command still sees the real file.
func TestFileRedaction(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, []byte(`{"redaction": {"files": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": file}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	appID := newApp(t, alice, "files")
	half := "Ab3dE6gH9jK2mN5pQ8sT1vW4"
	chatID, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": appID,
		"messages": message("$ k=" + half + "; mkdir -p conf && echo OPENAI_API_KEY=sk-proj-$k$k > conf/.env && wc -c < conf/.env")}, 200)
	if !strings.Contains(answer, "72") {
		t.Errorf("the command should see the whole file (72 bytes): %q", answer)
	}
	secret := "sk-proj-" + half + half
	read := expect(t, alice, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": appID, "chatId": chatID, "path": "conf/.env"}, 200)
	if strings.Contains(string(read.Body), secret) || !strings.Contains(string(read.Body), "[REDACTED:") {
		t.Errorf("a read with file redaction on: %s", read.Body)
	}
	dl := expect(t, alice, "POST", "/api/core/ai/sandbox/download", map[string]any{"appId": appID, "chatId": chatID, "path": "conf/.env"}, 200)
	if strings.Contains(string(dl.Body), secret) {
		t.Errorf("a download with file redaction on holds the secret")
	}
	zip := expect(t, alice, "POST", "/api/core/ai/sandbox/download", map[string]any{"appId": appID, "chatId": chatID, "path": "conf"}, 403)
	if !strings.Contains(string(zip.Body), "one at a time") {
		t.Errorf("a folder's ZIP with file redaction on: %s", zip.Body)
	}
}

// TestAppPolicyLimits: an app's policy lowers its sandboxes' memory and
// processes below the operator's settings, never above.
func TestAppPolicyLimits(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	owner := env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	for _, tc := range []struct {
		policy       string
		memory, pids int64
	}{
		{`{"limits": {"memoryMiB": 64, "pids": 32}}`, 64, 32},
		{`{"limits": {"memoryMiB": 100000}}`, env.Config.Sandbox.MemoryMiB, env.Config.Sandbox.Pids},
	} {
		var app struct {
			ID string `json:"appId"`
		}
		expect(t, alice, "POST", "/api/apps", map[string]any{"name": "limited", "graph": withPolicy(tc.policy)}, 201).JSON(t, &app)
		chatID, _ := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "messages": message("$ echo hi")}, 200)
		svc := env.Engine.Services
		inst, err := svc.Store.Get(t.Context(), svc.Provider.Name(), sandbox.IDFor(app.ID, owner, chatID))
		if err != nil {
			t.Fatal(err)
		}
		if inst.Limit.MemoryMiB != tc.memory || inst.Limit.Pids != tc.pids {
			t.Errorf("policy %s: the sandbox's limits are %+v, want memory %d MiB and %d processes", tc.policy, inst.Limit, tc.memory, tc.pids)
		}
	}
}

// TestAppPolicyOutputLimit: an app's limits.outputBytes cuts each stream
// of a command, live and in the result, with a note of what was left out.
func TestAppPolicyOutputLimit(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "terse", "graph": withPolicy(`{"limits": {"outputBytes": 100}}`)}, 201).JSON(t, &app)
	resp := expect(t, alice, "POST", "/api/v1/chat/completions", map[string]any{"appId": app.ID, "stream": true, "detail": true,
		"messages": message("$ seq 1 1000")}, 200)
	body := string(resp.Body)
	// The numbers past the cut, as JSON escapes their newlines (ids in
	// the stream are hex and may hold any digits).
	if strings.Contains(body, `\n999\n1000`) || !strings.Contains(body, "bytes left out: the app's policy limits output to 100 bytes") {
		t.Errorf("the stream of a command past the app's output limit:\n%s", clip(resp.Body))
	}
	chatID := regexp.MustCompile(`"id":"([0-9a-f]+)"`).FindStringSubmatch(body)
	if chatID == nil {
		t.Fatalf("no chat id in the stream")
	}
	if _, responses := toolStatuses(t, alice, app.ID, chatID[1]); len(responses) != 1 || strings.Contains(responses[0], `\n999\n1000`) ||
		!strings.Contains(responses[0], "bytes left out") {
		t.Errorf("the model's tool result past the app's output limit: %v", responses)
	}
}

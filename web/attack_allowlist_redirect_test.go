package web_test

import (
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// TestAttackAllowlistRedirectBashrc (issue 28, finding 3): under an app
// whose policy is an allowlist that allows echo, the model's
// `echo x > ~/.bashrc` (a command the next shell would run) is refused
// and audited as refused, naming the rule; writing into /workspace next
// to it still runs.
func TestAttackAllowlistRedirectBashrc(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "strict", "graph": withPolicy(`{"mode": "allowlist",
		"rules": [{"id": "writing", "command": ["echo", "cat"], "decision": "allow", "justification": "this app writes and reads notes"}]}`)}, 201).JSON(t, &app)

	chatID, _ := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "messages": message("$ echo x > ~/.bashrc")}, 200)
	statuses, responses := toolStatuses(t, alice, app.ID, chatID)
	if len(statuses) != 1 || statuses[0] != "refused" || !strings.Contains(responses[0], "write-outside-workspace") {
		t.Fatalf("echo x > ~/.bashrc: statuses %v, results %v; want one refusal naming write-outside-workspace", statuses, responses)
	}

	_, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "chatId": chatID,
		"messages": message("$ echo note-7f3 > /workspace/a && cat /workspace/a")}, 200)
	statuses, _ = toolStatuses(t, alice, app.ID, chatID)
	if len(statuses) != 2 || statuses[1] != "success" || !strings.Contains(answer, "note-7f3") {
		t.Errorf("echo into /workspace: statuses %v, answer %q; want it to run", statuses, answer)
	}

	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	waitUntil(t, "the audit has the refused write", func() bool {
		return strings.Contains(string(admin.Do(t, "GET", "/admin/api/audit?app="+app.ID, nil).Body), "write-outside-workspace")
	})
	audit := string(admin.Do(t, "GET", "/admin/api/audit?app="+app.ID, nil).Body)
	if !strings.Contains(audit, `"refused"`) || !strings.Contains(audit, ".bashrc") {
		t.Errorf("the audit lacks the refusal of the write to ~/.bashrc: %s", clip([]byte(audit)))
	}
}

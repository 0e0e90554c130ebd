package web_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/sandbox"
)

// TestAppLifecycleCommands: an app's startup commands run once in each
// new sandbox before its first command, a failed one is reported with that
// command's result, and the shutdown commands run before an admin's stop;
// an app with bad commands is refused with the schema's reason.
func TestAppLifecycleCommands(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	alice := env.CreateUser(t, "alice", auth.RoleUser)
	owner := env.Login(t, "alice", enginetest.Password("alice"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)

	graph := apps.DemoGraph()
	for i, n := range graph.Nodes {
		if n.Type == "tools" {
			graph.Nodes[i].Inputs["startupCommands"] = json.RawMessage(`["echo prepared > prep.txt", "false"]`)
			graph.Nodes[i].Inputs["shutdownCommands"] = json.RawMessage(`["echo bye > shutdown.txt"]`)
		}
	}
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, owner, "POST", "/api/apps", map[string]any{"name": "prepared", "graph": graph}, 201).JSON(t, &app)

	chatID, answer := sendTurn(t, owner, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "detail": true,
		"messages": message("$ cat prep.txt")}, 200)
	if !strings.Contains(answer, "prepared") {
		t.Errorf("the first command's answer %q lacks the startup command's file", answer)
	}
	items := expect(t, owner, "GET", "/api/apps/"+app.ID+"/chats/"+chatID, nil, 200)
	if !strings.Contains(string(items.Body), `startup command \"false\" failed with exit code 1`) {
		t.Errorf("the failed startup command is not in the tool call's result: %s", clip(items.Body))
	}
	_, answer = sendTurn(t, owner, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "chatId": chatID,
		"messages": message("$ wc -l < prep.txt")}, 200)
	if !strings.Contains(answer, "1") {
		t.Errorf("the startup commands ran again: %q", answer)
	}

	id := sandbox.IDFor(app.ID, alice, chatID)
	expect(t, admin, "POST", "/admin/api/sandboxes/"+id+"/stop", nil, 200)
	read := map[string]any{"action": "read", "appId": app.ID, "chatId": chatID, "path": "shutdown.txt"}
	if resp := expect(t, owner, "POST", "/api/core/ai/sandbox/file", read, 200); !strings.Contains(string(resp.Body), "bye") {
		t.Errorf("the shutdown command did not run before the stop: %s", resp.Body)
	}

	bad := apps.DemoGraph()
	bad.Nodes[1].Inputs["startupCommands"] = json.RawMessage(`"not a list"`)
	if resp := owner.Do(t, "POST", "/api/apps", map[string]any{"name": "bad", "graph": bad}); resp.Status != 400 && resp.Status != 422 || !strings.Contains(string(resp.Body), "startupCommands") {
		t.Errorf("an app whose startup commands are not a list: %d %s", resp.Status, resp.Body)
	}
}

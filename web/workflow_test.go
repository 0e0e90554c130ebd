package web_test

import (
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// An app's workflow through the real router: saving refuses a graph the
// engine could not run, naming node and field; the chat API checks the
// app's variables, and a run uses them; branches of several answer nodes
// answer separately.
func TestWorkflowThroughTheAPI(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))

	graph := map[string]any{
		"variables": []map[string]any{{"key": "lang", "label": "Language", "type": "select", "options": []string{"en", "zh"}, "required": true}},
		"nodes": []map[string]any{
			{"nodeId": "start", "type": "workflowStart"},
			{"nodeId": "a", "type": "answerNode", "inputs": map[string]any{"text": "lang={{$VARIABLE_NODE_ID.lang$}}"}},
			{"nodeId": "b", "type": "answerNode", "inputs": map[string]any{"text": "q={{$start.userChatInput$}}"}},
		},
		"edges": []map[string]any{{"source": "start", "target": "a"}, {"source": "a", "target": "b"}},
	}
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "Variables", "graph": graph}, 201).JSON(t, &app)

	// A node nothing leads to is refused at save, with where it is.
	bad := map[string]any{"nodes": append(graph["nodes"].([]map[string]any), map[string]any{"nodeId": "lost", "type": "answerNode", "inputs": map[string]any{"text": "x"}}),
		"edges": graph["edges"], "variables": graph["variables"]}
	var refused struct {
		Problems []struct{ NodeID, Field, Message string }
	}
	expect(t, alice, "PUT", "/api/apps/"+app.ID, map[string]any{"name": "Variables", "graph": bad}, 422).JSON(t, &refused)
	if len(refused.Problems) != 1 || refused.Problems[0].NodeID != "lost" || !strings.Contains(refused.Problems[0].Message, "nothing leads to this node") {
		t.Errorf("problems %+v, want the lost node named", refused.Problems)
	}

	// The chat must give the required variable, of its type.
	_, body := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "messages": message("hi")}, 400)
	if !strings.Contains(body, `\"Language\" (select) is required`) && !strings.Contains(body, `"Language" (select) is required`) {
		t.Errorf("without the variable: %s", body)
	}
	_, body = sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "messages": message("hi"), "variables": map[string]any{"lang": "fr"}}, 400)
	if !strings.Contains(body, "variables.lang must be one of en, zh") {
		t.Errorf("with a wrong value: %s", body)
	}
	_, answer := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app.ID, "messages": message("hi"), "variables": map[string]any{"lang": "zh"}}, 200)
	if answer != "lang=zh\n\nq=hi" {
		t.Errorf("answer %q, want both answer nodes' texts, separated", answer)
	}
}

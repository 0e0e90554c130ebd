package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// TestWorkflowNodesAsInstalled runs the code, readFiles and
// httpRequest468 nodes as the engine installs them, through the chat API:
// the code runs in the chat's sandbox when the app's sandbox is on and
// else in a throwaway sandbox that the workers delete; readFiles reads
// the chat's upload; the HTTP node, with no outbound exception
// configured, is refused the engine's own loopback address.
func TestWorkflowNodesAsInstalled(t *testing.T) {
	ctx := context.Background()
	env := enginetest.Start(t, enginetest.Options{Workers: true})
	aliceID := env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	svc := env.Engine.Services

	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "sandbox off", true: "sandbox on"}[on]
		t.Run(name, func(t *testing.T) {
			resp := alice.Do(t, "POST", "/api/apps", map[string]any{"name": name, "graph": nodesGraph(t, env.URL, on)})
			var app struct {
				ID string `json:"appId"`
			}
			resp.JSON(t, &app)
			if resp.Status != http.StatusCreated {
				t.Fatalf("create the app: %d %s", resp.Status, resp.Body)
			}
			scope := sandbox.Scope{AppID: app.ID, UserID: aliceID, ChatID: "c-nodes"}
			if _, err := svc.Workspace.Save(ctx, scope, "", "notes.txt", strings.NewReader("uploaded words")); err != nil {
				t.Fatal(err)
			}
			resp = alice.Do(t, "POST", "/api/v1/chat/completions", map[string]any{"appId": app.ID, "chatId": scope.ChatID,
				"messages": []map[string]string{{"role": "user", "content": "hello"}}})
			var got struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			resp.JSON(t, &got)
			if resp.Status != http.StatusOK || len(got.Choices) != 1 {
				t.Fatalf("chat: %d %s", resp.Status, resp.Body)
			}
			answer := got.Choices[0].Message.Content
			host := strings.TrimPrefix(env.URL, "http://")
			for _, want := range []string{"HELLO | File: notes.txt\n<Content>\nuploaded words\n</Content> | ", "the request to " + host + " was refused"} {
				if !strings.Contains(answer, want) {
					t.Fatalf("answer %q lacks %q", answer, want)
				}
			}
			// What the code wrote is in the chat's workspace only when it
			// ran in the chat's sandbox.
			entries, err := svc.Workspace.List(ctx, scope, workspace.Intermediate, "")
			if err != nil {
				t.Fatal(err)
			}
			wrote := slices.ContainsFunc(entries, func(e workspace.Entry) bool { return e.Name == "by-code.txt" })
			if wrote != on {
				t.Errorf("the chat's intermediate files %v: by-code.txt there is %v, want %v", entries, wrote, on)
			}
			if on {
				return
			}
			// The throwaway sandbox and its files are deleted.
			deadline := time.Now().Add(30 * time.Second)
			for {
				left, err := throwaways(svc.Provider, svc.Workspace)
				if err == nil && len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the code's throwaway sandbox is still there: %v (%v)", left, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// nodesGraph is start → code → readFiles → HTTP (to the engine itself),
// whose error branch answers with all three; with on, a tool-call node
// with the sandbox on is in the app, on the HTTP node's ordinary way out.
func nodesGraph(t *testing.T, engineURL string, on bool) nodes.Graph {
	t.Helper()
	src := "def main(q):\n    with open('/workspace/intermediate/by-code.txt', 'w') as f:\n        f.write(q)\n    return {'result': q.upper()}\n"
	g := map[string]any{
		"nodes": []map[string]any{
			{"nodeId": "start", "type": "workflowStart"},
			{"nodeId": "code", "type": "code", "inputs": map[string]any{"codeType": "py", "code": src, "q": "{{$start.userChatInput$}}"},
				"outputs": []map[string]any{{"key": "result", "type": "string"}}},
			{"nodeId": "read", "type": "readFiles", "inputs": map[string]any{}},
			{"nodeId": "http", "type": "httpRequest468", "inputs": map[string]any{"system_httpMethod": "GET", "system_httpReqUrl": engineURL + "/healthz"}},
			{"nodeId": "caught", "type": "answerNode", "inputs": map[string]any{"text": "{{$code.result$}} | {{$read.system_text$}} | {{$http.error$}}"}},
			{"nodeId": "agent", "type": "tools", "inputs": map[string]any{"useAgentSandbox": on}},
		},
		"edges": []map[string]any{
			{"source": "start", "target": "code"}, {"source": "code", "target": "read"}, {"source": "read", "target": "http"},
			{"source": "http", "target": "caught", "sourceHandle": nodes.CatchBranch}, {"source": "http", "target": "agent"},
		},
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var out nodes.Graph
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// throwaways are the code node's sandboxes and workspace directories
// still there. Reading a chat's directory while the workers delete it
// may fail: the caller asks again.
func throwaways(p sandbox.Provider, ws *workspace.Store) ([]string, error) {
	var out []string
	list, err := p.List(context.Background())
	if err != nil {
		return nil, err
	}
	for _, r := range list {
		if strings.HasPrefix(r.Labels["chatId"], "flowbox-code-") {
			out = append(out, "sandbox "+r.ID)
		}
	}
	dirs, err := ws.Dirs(context.Background())
	if err != nil {
		return out, err
	}
	for _, d := range dirs {
		if strings.HasPrefix(d.ChatID, "flowbox-code-") {
			out = append(out, "workspace of "+d.ChatID)
		}
	}
	return out, nil
}

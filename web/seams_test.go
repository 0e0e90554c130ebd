package web_test

// The seams the shell policy builds on, checked through the product as
// engine serve builds it: middleware on the sandbox chain sees and
// rewrites live output, the stored history and the model's tool result
// alike, and file operations with the caller's identity; and the admin's
// actions go through the same coordination as the workers'.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// sseEvent is one server-sent event of a chat turn.
type sseEvent struct{ name, data string }

// turn sends one streamed, detailed chat turn and reads its events.
func turn(t *testing.T, c *enginetest.Client, body map[string]any) []sseEvent {
	t.Helper()
	body["stream"], body["detail"] = true, true
	resp, err := c.Send("POST", "/api/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat turn: status %d", resp.StatusCode)
	}
	return chatAPIReadSSE(t, resp.Body, nil)
}

// fileCalls records the file operations the chain saw.
type fileCalls struct {
	mu    sync.Mutex
	calls []sandbox.FileCall
}

func (f *fileCalls) middleware() sandbox.Middleware {
	return sandbox.Middleware{File: func(next sandbox.FileFunc) sandbox.FileFunc {
		return func(ctx context.Context, call *sandbox.FileCall) (sandbox.FileResult, error) {
			f.mu.Lock()
			f.calls = append(f.calls, *call)
			f.mu.Unlock()
			return next(ctx, call)
		}
	}}
}

// TestMiddlewareRewritesEveryWayOutputGoes: a middleware that upper-cases
// command output changes what the chat streams live, what the chat's
// history keeps, what the model reads back, and what the files API reads;
// and the file hook sees who asked.
func TestMiddlewareRewritesEveryWayOutputGoes(t *testing.T) {
	t.Parallel()
	model := llmtest.New(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("call-1", "sandbox_shell",
			`{"command":"echo quiet words; echo small trouble >&2; echo lower > note.txt"}`)}},
		llmtest.Reply{Text: "done"},
	)
	upper := sandbox.TransformOutput(func(sandbox.Stream) sandbox.StreamTransformer {
		return sandbox.TransformFunc(bytes.ToUpper)
	})
	seen := &fileCalls{}
	env := enginetest.Start(t, enginetest.Options{
		Env:        map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL},
		Middleware: []sandbox.Middleware{upper, seen.middleware()},
	})
	carolID := env.CreateUser(t, "carol", auth.RoleUser)
	carol := env.Login(t, "carol", enginetest.Password("carol"))
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	graph := apps.DemoGraph()
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	var app struct {
		ID string `json:"appId"`
	}
	resp := admin.Do(t, "POST", "/api/apps", map[string]any{"name": "scripted", "public": true, "graph": graph})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create app: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &app)

	events := turn(t, carol, map[string]any{"appId": app.ID, "chatId": "seams-1",
		"messages": []map[string]string{{"role": "user", "content": "run it"}}})
	var live, response string
	for _, ev := range events {
		switch ev.name {
		case "toolOutput":
			live += ev.data
		case "toolResponse":
			response = ev.data
		}
	}
	for what, got := range map[string]string{"live output": live, "tool response event": response} {
		if !strings.Contains(got, "QUIET WORDS") || !strings.Contains(got, "SMALL TROUBLE") || strings.Contains(got, "quiet words") || strings.Contains(got, "small trouble") {
			t.Errorf("%s = %s; want the upper-cased output only", what, got)
		}
	}

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(reqs))
	}
	var toolMsg string
	for _, m := range reqs[1].Messages {
		if m.ToolCallID == "call-1" {
			toolMsg = m.Content
		}
	}
	if !strings.Contains(toolMsg, "QUIET WORDS") || strings.Contains(toolMsg, "quiet words") {
		t.Errorf("the model read %q; want the upper-cased output", toolMsg)
	}

	hist := carol.Do(t, "GET", "/api/apps/"+app.ID+"/chats/seams-1", nil)
	// The command itself, in the call's params, stays as the model wrote it.
	if hist.Status != http.StatusOK || !strings.Contains(string(hist.Body), `\"stdout\":\"QUIET WORDS`) || strings.Contains(string(hist.Body), `\"stdout\":\"quiet`) {
		t.Errorf("history: %d %s; want the upper-cased output only", hist.Status, hist.Body)
	}

	read := carol.Do(t, "POST", "/api/core/ai/sandbox/file", map[string]any{"action": "read", "appId": app.ID, "chatId": "seams-1", "path": "note.txt"})
	if read.Status != http.StatusOK || !strings.Contains(string(read.Body), "lower") {
		t.Fatalf("read note.txt: %d %s", read.Status, read.Body)
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	var found bool
	for _, c := range seen.calls {
		if c.Op == sandbox.FileRead && c.Actor.UserID == carolID && c.Actor.Kind == sandbox.ActorFiles &&
			c.Scope == (sandbox.Scope{AppID: app.ID, UserID: carolID, ChatID: "seams-1"}) {
			found = true
		}
	}
	if !found {
		t.Errorf("the file hook saw %+v; want carol's read of note.txt through the files API", seen.calls)
	}
}

// TestAdminDeleteRacingACommand: a command of the chat that was on its way
// when the admin deleted the sandbox never brings it back: the admin's
// delete records the chat's deletion before anything else, so the command
// is refused and the workers leave nothing behind.
func TestAdminDeleteRacingACommand(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	gate := sandbox.Middleware{Exec: func(next sandbox.ExecFunc) sandbox.ExecFunc {
		return func(ctx context.Context, call *sandbox.Call) (sandbox.ExecResult, error) {
			if strings.Contains(call.Request.Command, "# racing") {
				close(entered)
				<-release
			}
			return next(ctx, call)
		}
	}}
	env := enginetest.Start(t, enginetest.Options{Middleware: []sandbox.Middleware{gate}})
	carolID := env.CreateUser(t, "carol", auth.RoleUser)
	carol := env.Login(t, "carol", enginetest.Password("carol"))
	admin := env.Bearer(enginetest.AdminToken)
	say := func(text string) string {
		resp := carol.Do(t, "POST", "/api/v1/chat/completions", map[string]any{"chatId": "race-1",
			"messages": []map[string]string{{"role": "user", "content": text}}})
		if resp.Status != http.StatusOK {
			t.Fatalf("chat turn %q: %d %s", text, resp.Status, resp.Body)
		}
		return string(resp.Body)
	}
	say("$ echo first > first.txt")
	id := sandbox.IDFor(apps.DemoAppID, carolID, "race-1")
	svc := env.Engine.Services
	ctx := context.Background()
	if st, err := svc.Provider.Status(ctx, id); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("after the first command: status %q, %v; want running", st, err)
	}

	answer := make(chan string, 1)
	go func() { answer <- say("$ echo second # racing") }()
	<-entered
	if resp := admin.Do(t, "POST", "/admin/api/sandboxes/"+id+"/delete", nil); resp.Status != http.StatusOK {
		close(release)
		t.Fatalf("admin delete: %d %s", resp.Status, resp.Body)
	}
	if err := env.Engine.StartWorkers(); err != nil {
		close(release)
		t.Fatal(err)
	}
	gone := func() bool {
		st, err := svc.Provider.Status(ctx, id)
		_, rerr := svc.Store.Get(ctx, svc.Provider.Name(), id)
		return err == nil && st == sandbox.StatusMissing && errors.Is(rerr, sandbox.ErrNotFound)
	}
	for deadline := time.Now().Add(time.Minute); !gone(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the workers did not delete the sandbox and its record within a minute")
		}
	}
	close(release)
	if got := <-answer; !strings.Contains(got, sandbox.ErrDeleted.Error()) {
		t.Errorf("the racing command's answer: %s; want it refused because the chat's sandbox was deleted", got)
	}
	if got := say("$ echo third"); !strings.Contains(got, sandbox.ErrDeleted.Error()) {
		t.Errorf("a later command's answer: %s; want it refused", got)
	}
	if !gone() {
		st, _ := svc.Provider.Status(ctx, id)
		t.Fatalf("after the racing and the later command the sandbox is %q; want it and its record gone for good", st)
	}
	list, err := svc.Provider.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID == id {
			t.Fatalf("the provider still holds sandbox %s (%s)", id, r.Status)
		}
	}
	// The chat's files go last in the deletion; a refused command must
	// not have made its directory again.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		dirs, err := svc.Workspace.Dirs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(dirs, func(o workspace.Owner) bool { return o.SandboxID == id }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted chat's workspace directory is still there a minute later")
		}
	}
}

package web_test

// The chat API (POST /api/v1/chat/completions) through the product as
// engine serve builds it: the events and wire JSON FastGPT clients read,
// the refusals, a client leaving mid-command, and who a caller chats as.
// Programs use the service key and name their user in customUid;
// signed-in callers use a real session or their own API key.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
)

// chatAPIEnv is the served product with a scripted model.
type chatAPIEnv struct {
	env     *enginetest.Env
	model   *llmtest.Server
	service *enginetest.Client // a program with the service key
	// scripted is a private app of the admin's, the demo graph with its
	// tool-call node on the scripted model.
	scripted string
}

func chatAPIStart(t *testing.T, replies ...llmtest.Reply) *chatAPIEnv {
	t.Helper()
	model := llmtest.New(t, replies...)
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_LLM_BASE_URL": model.BaseURL}})
	graph := apps.DemoGraph()
	graph.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	resp := admin.Do(t, "POST", "/api/apps", map[string]any{"name": "scripted", "public": false, "graph": graph})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create the scripted app: %d %s", resp.Status, resp.Body)
	}
	var app struct {
		ID string `json:"appId"`
	}
	resp.JSON(t, &app)
	if app.ID == "" {
		t.Fatalf("create the scripted app: no id in %s", resp.Body)
	}
	return &chatAPIEnv{env: env, model: model, service: env.Bearer(enginetest.ServiceKey), scripted: app.ID}
}

// provider is the bwrap provider the product runs sandboxes on.
func (e *chatAPIEnv) provider(t *testing.T) *bwrap.Provider {
	t.Helper()
	p, ok := e.env.Engine.Services.Provider.(*bwrap.Provider)
	if !ok {
		t.Fatalf("the product runs %T, want bwrap", e.env.Engine.Services.Provider)
	}
	return p
}

// chatAPIPost sends body as it is to the chat API with c's credentials;
// ctx ending is the client going away.
func chatAPIPost(t *testing.T, ctx context.Context, c *enginetest.Client, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", c.URL+"/api/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range c.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	if c.CSRF != "" {
		req.Header.Set("X-CSRF-Token", c.CSRF)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// chatAPIReadSSE reads events until the stream ends or each returns
// false.
func chatAPIReadSSE(t *testing.T, r io.Reader, each func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			out = append(out, ev)
			if each != nil && !each(ev) {
				return out
			}
			ev = sseEvent{}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the event stream: %v", err)
	}
	return out
}

// chatAPIAnswer is the text of the answer chunks.
func chatAPIAnswer(t *testing.T, events []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		if ev.name != "answer" || ev.data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.data), &chunk); err != nil || len(chunk.Choices) != 1 {
			t.Fatalf("answer chunk %s: %v", ev.data, err)
		}
		b.WriteString(chunk.Choices[0].Delta.Content)
	}
	return b.String()
}

func TestDemoModelRunsACommandEndToEnd(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t)
	resp := chatAPIPost(t, context.Background(), e.service, `{"chatId":"demo-chat","customUid":"alice","stream":true,"detail":true,
		"messages":[{"role":"user","content":"please run\n$ echo hello-$((40+2))"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := chatAPIReadSSE(t, resp.Body, nil)
	answer := chatAPIAnswer(t, events)
	if !strings.Contains(answer, "`echo hello-$((40+2))` succeeded.") || !strings.Contains(answer, "hello-42") {
		t.Fatalf("answer = %q, want the demo model's summary of the command and its output", answer)
	}
	var response string
	for _, ev := range events {
		if ev.name == "toolResponse" {
			response = ev.data
		}
	}
	if !strings.Contains(response, `\"stdout\":\"hello-42\\n\"`) || !strings.Contains(response, `"status":"success"`) {
		t.Fatalf("toolResponse = %s", response)
	}
	ctx := context.Background()
	chats := e.env.Engine.Chats
	chat, err := chats.Get(ctx, sandbox.Scope{AppID: apps.DemoAppID, UserID: "alice", ChatID: "demo-chat"})
	if err != nil {
		t.Fatal(err)
	}
	items, err := chats.Items(ctx, chat, 0, 10)
	if err != nil || len(items) != 2 || items[1].Text != answer || items[1].ToolCalls == nil {
		t.Fatalf("history = %+v, %v; want the question and the answer with its tool calls", items, err)
	}
	sandboxID := sandbox.IDFor(apps.DemoAppID, "alice", "demo-chat")
	if st, err := e.env.Engine.Services.Provider.Status(ctx, sandboxID); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("the chat's sandbox is %q (%v), want running", st, err)
	}
}

// The events of one tool round, event by event, as a FastGPT client reads
// them.
func TestSSESequenceOfOneToolRound(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t,
		llmtest.Reply{Text: "Checking.", ToolCalls: []llm.ToolCall{llmtest.Call("call_1", "sandbox_shell", `{"command":"echo out; echo err >&2"}`)}},
		llmtest.Reply{Text: "Done."},
	)
	resp := chatAPIPost(t, context.Background(), e.service,
		fmt.Sprintf(`{"appId":%q,"chatId":"seq","stream":true,"detail":true,"messages":[{"role":"user","content":"go"}]}`, e.scripted))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := chatAPIReadSSE(t, resp.Body, nil)
	var got []string
	for _, ev := range events {
		name := ev.name
		if name == "answer" && ev.data == "[DONE]" {
			name = "answer:[DONE]"
		}
		if len(got) == 0 || got[len(got)-1] != name {
			got = append(got, name)
		}
	}
	want := []string{"flowNodeStatus", "flowNodeResponse", "flowNodeStatus", "answer", "toolCall", "toolParams", "toolOutput", "toolResponse",
		"answer", "flowNodeResponse", "answer", "appVersion", "flowResponses", "answer:[DONE]"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
	check := map[string]string{
		"toolCall":       `{"tool":{"functionName":"sandbox_shell","id":"call_1","params":"{\"command\":\"echo out; echo err \u003e\u00262\"}","response":"","toolName":"sandbox_shell"}}`,
		"toolParams":     `{"tool":{"id":"call_1","params":"{\"command\":\"echo out; echo err \u003e\u00262\"}"}}`,
		"flowNodeStatus": `{"name":"Start","nodeId":"start","status":"running"}`,
		"appVersion":     `{"versionId":""}`, // the app has no published version: its draft runs
	}
	for _, ev := range events {
		if want, ok := check[ev.name]; ok {
			if ev.data != want {
				t.Errorf("%s data = %s, want %s", ev.name, ev.data, want)
			}
			delete(check, ev.name)
		}
	}
	for _, ev := range events {
		if ev.name == "flowNodeResponse" && !strings.Contains(ev.data, `"moduleType":"workflowStart","nodeId":"start"`) {
			t.Errorf("the first node's end: %s, want the start's", ev.data)
		}
		if ev.name == "flowNodeResponse" {
			break
		}
	}
	if a := chatAPIAnswer(t, events); a != "Checking.Done." {
		t.Errorf("answer = %q", a)
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t, llmtest.Reply{Text: "plain answer"})
	resp := chatAPIPost(t, context.Background(), e.service,
		fmt.Sprintf(`{"appId":%q,"chatId":"ns","detail":true,"messages":[{"role":"user","content":"hi"}]}`, e.scripted))
	var body struct {
		ID      string `json:"id"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		ResponseData []map[string]any `json:"responseData"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != 200 || body.ID != "ns" || len(body.Choices) != 1 || body.Choices[0].Message.Content != "plain answer" ||
		body.Choices[0].Message.Role != "assistant" || body.Choices[0].FinishReason != "stop" || len(body.ResponseData) != 2 {
		t.Fatalf("status %d body %+v", resp.StatusCode, body)
	}
}

func TestChatAPIRefusesBadRequests(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t, llmtest.Reply{Text: "first"})
	service, wrong := e.service, e.env.Bearer("nope")
	tests := []struct {
		name   string
		caller *enginetest.Client
		body   string
		status int
		msg    string
	}{
		{"no key", e.env.Anonymous(), `{"messages":[{"role":"user","content":"x"}]}`, 401, "API key"},
		{"wrong key", wrong, `{"messages":[{"role":"user","content":"x"}]}`, 401, "API key"},
		{"malformed JSON", service, `{"messages": [`, 400, "not valid JSON"},
		{"no user message", service, `{"messages":[{"role":"system","content":"x"}]}`, 400, "must end with"},
		{"unknown app", service, `{"appId":"ghost","messages":[{"role":"user","content":"x"}]}`, 404, `no app "ghost"`},
		{"a chat id with a slash", service, fmt.Sprintf(`{"appId":%q,"chatId":"a/b","messages":[{"role":"user","content":"x"}]}`, e.scripted), 400, "chatId: the chat id must be 1 to 128 characters"},
		{"a chat id too long", service, fmt.Sprintf(`{"appId":%q,"chatId":%q,"messages":[{"role":"user","content":"x"}]}`, e.scripted, strings.Repeat("c", 129)), 400, "without slashes or control characters"},
		{"oversize body", service, `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`, 413, "over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := chatAPIPost(t, context.Background(), tc.caller, tc.body)
			var body struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status || body.Code != tc.status || !strings.Contains(body.Message, tc.msg) {
				t.Fatalf("got %d %+v, want %d with a message containing %q", resp.StatusCode, body, tc.status, tc.msg)
			}
		})
	}
}

// A client that goes away in the middle of a command: the command is
// killed with everything it started; nothing keeps running for it.
func TestClientDisconnectStopsTheCommand(t *testing.T) {
	t.Parallel()
	// A body with a length, and a chunked one: either way the server
	// learns that the client went away.
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			t.Parallel()
			clientDisconnect(t, chunked)
		})
	}
}

func clientDisconnect(t *testing.T, chunked bool) {
	e := chatAPIStart(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", `{"command":"echo started; sleep 977","timeout":120}`)}},
		llmtest.Reply{Text: "never"},
	)
	provider := e.provider(t)
	sandboxID := sandbox.IDFor(e.scripted, "api", "gone")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := fmt.Sprintf(`{"appId":%q,"chatId":"gone","stream":true,"detail":true,"messages":[{"role":"user","content":"go"}]}`, e.scripted)
	var resp *http.Response
	if chunked {
		req, err := http.NewRequestWithContext(ctx, "POST", e.service.URL+"/api/v1/chat/completions", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range e.service.Header {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err = e.service.HTTP.Do(req); err != nil {
			t.Fatal(err)
		}
		if len(resp.Request.TransferEncoding) == 0 && resp.Request.ContentLength > 0 {
			t.Fatal("the request was not sent chunked")
		}
	} else {
		resp = chatAPIPost(t, ctx, e.service, body)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	chatAPIReadSSE(t, resp.Body, func(ev sseEvent) bool { return ev.name != "toolOutput" })
	if pids, _ := provider.CommandProcesses(sandboxID); len(pids) == 0 {
		t.Fatal("the command is not running when the client leaves")
	}
	cancel()
	// A bound for a loaded machine, far below the command's own timeout
	// (120 s), which would also end it: ending within it is the client's
	// doing.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pids, _ := provider.CommandProcesses(sandboxID); len(pids) == 0 {
			if n := len(e.model.Requests()); n != 1 {
				t.Fatalf("%d model requests; the run must stop with the client", n)
			}
			return
		}
	}
	pids, _ := provider.CommandProcesses(sandboxID)
	t.Fatalf("processes %v still run 60s after the client left", pids)
}

// A signed-in caller, with a session or with their own API key, chats as
// themselves, whatever customUid says, and only with apps they may use.
func TestSignedInCallersChatAsThemselves(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t, llmtest.Reply{Text: "hi alice"})
	aliceID := e.env.CreateUser(t, "alice", auth.RoleUser)
	e.env.CreateUser(t, "bob", auth.RoleUser)
	tests := []struct {
		name   string
		caller *enginetest.Client
	}{
		{"session", e.env.Login(t, "alice", enginetest.Password("alice"))},
		{"API key", e.env.Bearer(e.env.APIKey(t, aliceID))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			post := func(body string) (int, string) {
				resp := tc.caller.Do(t, "POST", "/api/v1/chat/completions", []byte(body))
				return resp.Status, string(resp.Body)
			}
			code, body := post(fmt.Sprintf(`{"appId":%q,"chatId":"x","messages":[{"role":"user","content":"hi"}]}`, e.scripted))
			if code != 404 || !strings.Contains(body, fmt.Sprintf(`no app \"%s\"`, e.scripted)) {
				t.Fatalf("a private app of someone else: %d %s, want 404", code, body)
			}
			chatID := "mine-" + strings.ReplaceAll(tc.name, " ", "-")
			code, body = post(fmt.Sprintf(`{"appId":"demo","chatId":%q,"customUid":"bob","messages":[{"role":"user","content":"hello"}]}`, chatID))
			if code != 200 || !strings.Contains(body, "offline demo model") {
				t.Fatalf("the public demo app: %d %s", code, body)
			}
			chat, err := e.env.Engine.Chats.Get(context.Background(), sandbox.Scope{AppID: apps.DemoAppID, UserID: aliceID, ChatID: chatID})
			if err != nil || chat.UserID != aliceID {
				t.Fatalf("chat = %+v, %v; want it owned by alice (%s), not the customUid she sent", chat, err, aliceID)
			}
		})
	}
	if n := len(e.model.Requests()); n != 0 {
		t.Errorf("%d model requests; the refused app must not run", n)
	}
}

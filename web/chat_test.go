package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

type chatEnv struct {
	srv      *httptest.Server
	handler  *ChatHandler
	provider *bwrap.Provider
	history  *history.Store
	model    *llmtest.Server
}

// sandboxes is what the web tests run sandboxes on: bwrap, with its
// records in a database of the test's own. logger nil means
// slog.Default().
type sandboxes struct {
	db       *mongo.Database
	store    *mongostore.Store
	manager  *sandbox.Manager
	provider *bwrap.Provider
}

func newSandboxes(t testing.TB, logger *slog.Logger) sandboxes {
	t.Helper()
	ctx := context.Background()
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(ctx))
	db := mongotest.DB(t)
	store, err := mongostore.New(ctx, db, logger)
	if err != nil {
		t.Fatal(err)
	}
	manager, err := sandbox.New(sandbox.Config{Provider: p, Store: store, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return sandboxes{db, store, manager, p}
}

// newChatEnv serves the chat API with the demo app and a "scripted" app
// whose tool-call node talks to a scripted endpoint.
func newChatEnv(t testing.TB, replies ...llmtest.Reply) *chatEnv {
	t.Helper()
	ctx := context.Background()
	sb := newSandboxes(t, nil)
	db, manager := sb.db, sb.manager
	model := llmtest.New(t, replies...)
	resolver := &llm.Resolver{Endpoint: llm.Config{BaseURL: model.BaseURL, RetryBase: time.Millisecond}}
	ts, err := nodes.LoadTemplates()
	if err != nil {
		t.Fatal(err)
	}
	types := nodes.Builtins(resolver)
	types["tools"] = toolcall.New(toolcall.Config{Models: resolver, Sandbox: manager})
	appStore := apps.New(db, ts)
	if err := appStore.EnsureDemo(ctx, "admin", time.Now()); err != nil {
		t.Fatal(err)
	}
	scripted := apps.DemoGraph()
	scripted.Nodes[1].Inputs["model"] = json.RawMessage(`"scripted-model"`)
	if err := appStore.Put(ctx, apps.App{ID: "scripted", Name: "scripted", Graph: scripted}, time.Now()); err != nil {
		t.Fatal(err)
	}
	hist := history.New(db)
	h := &ChatHandler{Engine: &nodes.Engine{Templates: ts, Types: types}, Apps: appStore, History: hist,
		APIKey: "test-key", DefaultApp: apps.DemoAppID, Now: time.Now, Log: slog.Default(),
		Access: &Access{Apps: appStore, Chats: hist}}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) { // stands for Authenticate: X-As names a signed-in caller
		if p, ok := people[c.GetHeader("X-As")]; ok {
			c.Set(principalKey, p)
		}
	})
	r.POST("/api/v1/chat/completions", h.Completions)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &chatEnv{srv: srv, handler: h, provider: sb.provider, history: hist, model: model}
}

func (e *chatEnv) post(t testing.TB, ctx context.Context, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/api/v1/chat/completions", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type sseEvent struct {
	Event string
	Data  string
}

func readSSE(t testing.TB, r io.Reader, each func(sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		case line == "":
			out = append(out, ev)
			if each != nil && !each(ev) {
				return out
			}
			ev = sseEvent{}
		}
	}
	return out
}

func answerText(events []sseEvent) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Event != "answer" || ev.Data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(ev.Data), &chunk)
		b.WriteString(chunk.Choices[0].Delta.Content)
	}
	return b.String()
}

func TestDemoModelRunsACommandEndToEnd(t *testing.T) {
	e := newChatEnv(t)
	resp := e.post(t, context.Background(), "test-key", `{"chatId":"demo-chat","customUid":"alice","stream":true,"detail":true,
		"messages":[{"role":"user","content":"please run\n$ echo hello-$((40+2))"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readSSE(t, resp.Body, nil)
	answer := answerText(events)
	if !strings.Contains(answer, "`echo hello-$((40+2))` succeeded.") || !strings.Contains(answer, "hello-42") {
		t.Fatalf("answer = %q, want the demo model's summary of the command and its output", answer)
	}
	var response string
	for _, ev := range events {
		if ev.Event == "toolResponse" {
			response = ev.Data
		}
	}
	if !strings.Contains(response, `\"stdout\":\"hello-42\\n\"`) || !strings.Contains(response, `"status":"success"`) {
		t.Fatalf("toolResponse = %s", response)
	}
	chat, err := e.history.Owned(context.Background(), "demo-chat", apps.DemoAppID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	items, _ := e.history.Items(context.Background(), chat, 0, 10)
	if len(items) != 2 || items[1].Text != answer || items[1].ToolCalls == nil {
		t.Fatalf("history = %+v, want the question and the answer with its tool calls", items)
	}
	sandboxID := sandbox.IDFor(apps.DemoAppID, "alice", "demo-chat")
	t.Cleanup(func() { e.provider.Delete(context.Background(), sandboxID) })
	if st, _ := e.provider.Status(context.Background(), sandboxID); st != sandbox.StatusRunning {
		t.Fatalf("the chat's sandbox is %q, want running", st)
	}
}

// The events of one tool round, event by event, as a FastGPT client reads
// them.
func TestSSESequenceOfOneToolRound(t *testing.T) {
	e := newChatEnv(t,
		llmtest.Reply{Text: "Checking.", ToolCalls: []llm.ToolCall{llmtest.Call("call_1", "sandbox_shell", `{"command":"echo out; echo err >&2"}`)}},
		llmtest.Reply{Text: "Done."},
	)
	resp := e.post(t, context.Background(), "test-key", `{"appId":"scripted","chatId":"seq","stream":true,"detail":true,"messages":[{"role":"user","content":"go"}]}`)
	events := readSSE(t, resp.Body, nil)
	t.Cleanup(func() { e.provider.Delete(context.Background(), sandbox.IDFor("scripted", "api", "seq")) })
	var got []string
	for _, ev := range events {
		name := ev.Event
		if name == "answer" && ev.Data == "[DONE]" {
			name = "answer:[DONE]"
		}
		if len(got) == 0 || got[len(got)-1] != name {
			got = append(got, name)
		}
	}
	want := []string{"flowNodeStatus", "answer", "toolCall", "toolParams", "toolOutput", "toolResponse", "answer", "flowResponses", "answer:[DONE]"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n got  %v\n want %v", got, want)
	}
	check := map[string]string{
		"toolCall":       `{"tool":{"functionName":"sandbox_shell","id":"call_1","params":"{\"command\":\"echo out; echo err \u003e\u00262\"}","response":"","toolName":"sandbox_shell"}}`,
		"toolParams":     `{"tool":{"id":"call_1","params":"{\"command\":\"echo out; echo err \u003e\u00262\"}"}}`,
		"flowNodeStatus": `{"name":"Start","status":"running"}`,
	}
	for _, ev := range events {
		if want, ok := check[ev.Event]; ok {
			if ev.Data != want {
				t.Errorf("%s data = %s, want %s", ev.Event, ev.Data, want)
			}
			delete(check, ev.Event)
		}
	}
	if a := answerText(events); a != "Checking.Done." {
		t.Errorf("answer = %q", a)
	}
}

func TestNonStreamingAnswer(t *testing.T) {
	e := newChatEnv(t, llmtest.Reply{Text: "plain answer"})
	resp := e.post(t, context.Background(), "test-key", `{"appId":"scripted","chatId":"ns","detail":true,"messages":[{"role":"user","content":"hi"}]}`)
	var body struct {
		ID      string `json:"id"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		ResponseData []map[string]any `json:"responseData"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || body.ID != "ns" || body.Choices[0].Message.Content != "plain answer" ||
		body.Choices[0].Message.Role != "assistant" || body.Choices[0].FinishReason != "stop" || len(body.ResponseData) != 2 {
		t.Fatalf("status %d body %+v", resp.StatusCode, body)
	}
}

func TestChatAPIRefusesBadRequests(t *testing.T) {
	e := newChatEnv(t, llmtest.Reply{Text: "first"})
	e.post(t, context.Background(), "test-key", `{"appId":"scripted","chatId":"owned","customUid":"alice","messages":[{"role":"user","content":"hi"}]}`)
	tests := []struct {
		name, key, body string
		status          int
		msg             string
	}{
		{"no key", "", `{"messages":[{"role":"user","content":"x"}]}`, 401, "API key"},
		{"wrong key", "nope", `{"messages":[{"role":"user","content":"x"}]}`, 401, "API key"},
		{"malformed JSON", "test-key", `{"messages": [`, 400, "not valid JSON"},
		{"no user message", "test-key", `{"messages":[{"role":"system","content":"x"}]}`, 400, "must end with"},
		{"unknown app", "test-key", `{"appId":"ghost","messages":[{"role":"user","content":"x"}]}`, 404, `no app "ghost"`},
		{"another user's chat", "test-key", `{"appId":"scripted","chatId":"owned","customUid":"mallory","messages":[{"role":"user","content":"x"}]}`, 404, `no chat "owned"`},
		{"oversize body", "test-key", `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`, 413, "over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.post(t, context.Background(), tc.key, tc.body)
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
	e := newChatEnv(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("c1", "sandbox_shell", `{"command":"echo started; sleep 977","timeout":120}`)}},
		llmtest.Reply{Text: "never"},
	)
	sandboxID := sandbox.IDFor("scripted", "api", "gone")
	t.Cleanup(func() { e.provider.Delete(context.Background(), sandboxID) })
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.post(t, ctx, "test-key", `{"appId":"scripted","chatId":"gone","stream":true,"detail":true,"messages":[{"role":"user","content":"go"}]}`)
	readSSE(t, resp.Body, func(ev sseEvent) bool { return ev.Event != "toolOutput" })
	if pids, _ := e.provider.Processes(sandboxID); len(pids) == 0 {
		t.Fatal("the command is not running when the client leaves")
	}
	cancel()
	for i := 0; i < 100; i++ {
		if pids, _ := e.provider.Processes(sandboxID); len(pids) == 0 {
			if n := len(e.model.Requests()); n != 1 {
				t.Fatalf("%d model requests; the run must stop with the client", n)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	pids, _ := e.provider.Processes(sandboxID)
	t.Fatalf("processes %v still run 5s after the client left", pids)
}

// A signed-in caller chats as themselves, whatever customUid says, and
// only with apps they may use.
func TestSignedInCallersChatAsThemselves(t *testing.T) {
	e := newChatEnv(t, llmtest.Reply{Text: "hi alice"})
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-As", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"appId":"scripted","chatId":"x","messages":[{"role":"user","content":"hi"}]}`); code != 404 || !strings.Contains(body, `no app \"scripted\"`) {
		t.Fatalf("a private app of someone else: %d %s, want 404", code, body)
	}
	code, body := post(`{"appId":"demo","chatId":"mine","customUid":"bob","messages":[{"role":"user","content":"hello"}]}`)
	if code != 200 || !strings.Contains(body, "offline demo model") {
		t.Fatalf("the public demo app: %d %s", code, body)
	}
	chat, err := e.history.Get(context.Background(), "mine")
	if err != nil || chat.UserID != "u:alice" {
		t.Fatalf("chat = %+v, %v; want it owned by alice, not the customUid she sent", chat, err)
	}
}

// Every engine event's FastGPT form, byte for byte: FastGPT clients and
// the chat page (web/ui/static/app.js) parse these.
func TestSSEEventMapping(t *testing.T) {
	tests := []struct {
		name        string
		data        nodes.EventData
		event, json string // "" for nothing sent
	}{
		{"answer", nodes.AnswerDelta{Text: "hi"}, "answer",
			`{"choices":[{"delta":{"content":"hi","role":"assistant"},"finish_reason":null,"index":0}],"created":7,"id":"chat-1","object":"chat.completion.chunk"}`},
		{"empty answer", nodes.AnswerDelta{}, "", ""},
		{"node status", nodes.NodeStatus{Status: nodes.StatusRunning}, "flowNodeStatus", `{"name":"Agent","status":"running"}`},
		{"tool call", nodes.ToolCallStarted{ID: "c1", Tool: "sandbox_shell", Params: `{"command":"ls"}`}, "toolCall",
			`{"tool":{"functionName":"sandbox_shell","id":"c1","params":"{\"command\":\"ls\"}","response":"","toolName":"sandbox_shell"}}`},
		{"tool params", nodes.ToolParams{ID: "c1", Params: `{"command":"ls"}`}, "toolParams", `{"tool":{"id":"c1","params":"{\"command\":\"ls\"}"}}`},
		{"tool output", nodes.ToolOutput{ID: "c1", Stream: "stderr", Text: "err\n"}, "toolOutput", `{"tool":{"id":"c1","stream":"stderr","text":"err\n"}}`},
		{"tool result", nodes.ToolResult{ID: "c1", Tool: "sandbox_shell", Response: `{"stdout":""}`, DurationMs: 12, Status: "success"}, "toolResponse",
			`{"tool":{"durationMs":12,"id":"c1","response":"{\"stdout\":\"\"}","status":"success"}}`},
		{"error", nodes.NodeError{Message: "sandbox service temporarily unavailable, retry later"}, "error",
			`{"message":"sandbox service temporarily unavailable, retry later"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			s := newChatStream(c, true, true, "chat-1")
			s.created = 7
			s.event(nodes.Event{NodeID: "agent", NodeName: "Agent", Data: tc.data})
			want := ""
			if tc.event != "" {
				want = "event: " + tc.event + "\ndata: " + tc.json + "\n\n"
			}
			if got := w.Body.String(); got != want {
				t.Errorf("sent %q\nwant %q", got, want)
			}
		})
	}
}

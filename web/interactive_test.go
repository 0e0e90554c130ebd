package web_test

// The interactive nodes through the product: a userSelect or formInput
// pauses the run; the chat's owner answers through the chat API, with
// the interactive answer or, as FastGPT takes it, the next message; bad
// answers are refused and the run stays paused; any engine process
// resumes it.

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

// planGraph asks for a plan: "basic" answers at once, "pro" asks for a
// form first.
const planGraph = `{"nodes":[
	{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"ask","type":"userSelect","inputs":{"description":"Which plan?","userSelectOptions":[
		{"value":"Basic plan","key":"basic"},{"value":"Pro plan","key":"pro"}]}},
	{"nodeId":"basic","type":"answerNode","inputs":{"text":"You chose {{$ask.selectResult$}}."}},
	{"nodeId":"form","type":"formInput","inputs":{"description":"Who are you?","userInputForms":[
		{"type":"input","key":"name","label":"Name","required":true},
		{"type":"numberInput","key":"seats","label":"Seats","min":1,"max":100,"defaultValue":1}]},
	 "outputs":[{"key":"name","type":"string"},{"key":"seats","type":"number"}]},
	{"nodeId":"welcome","type":"answerNode","inputs":{"text":"Welcome {{$form.name$}}: {{$form.seats$}} seats of {{$ask.selectResult$}}."}}],
	"edges":[{"source":"start","target":"ask"},{"source":"ask","target":"basic","sourceHandle":"basic"},
		{"source":"ask","target":"form","sourceHandle":"pro"},{"source":"form","target":"welcome"}]}`

// planApp makes an app of the client's caller with planGraph.
func planApp(t *testing.T, c *enginetest.Client) string {
	t.Helper()
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, c, "POST", "/api/apps", map[string]any{"name": "plans", "public": true, "graph": json.RawMessage(planGraph)}, 201).JSON(t, &app)
	return app.ID
}

// nodeQuestion is an interactive node's question in FastGPT's shape.
type nodeQuestion struct {
	Type   string
	Params struct {
		InteractiveID     string `json:"interactiveId"`
		Description       string
		ExpiresAt         string
		UserSelectOptions []struct{ Value, Key string }
		InputForm         []struct {
			Type, Key, Label string
			Required         bool
		}
	}
}

type questionReply struct {
	ChatID, Answer string
	Question       *nodeQuestion
}

// post sends a chat request that must succeed and reads the answer and
// the question it asks, if any.
func post(t *testing.T, c *enginetest.Client, body map[string]any) questionReply {
	t.Helper()
	return postTo(t, c, completions, body)
}

// postTo is post to the chat API at path.
func postTo(t *testing.T, c *enginetest.Client, path string, body map[string]any) questionReply {
	t.Helper()
	var out struct {
		ID          string
		Choices     []struct{ Message struct{ Content string } }
		Interactive *nodeQuestion
	}
	expect(t, c, "POST", path, body, 200).JSON(t, &out)
	r := questionReply{ChatID: out.ID, Question: out.Interactive}
	if len(out.Choices) > 0 {
		r.Answer = out.Choices[0].Message.Content
	}
	return r
}

// asked checks that the reply asks a question of type typ.
func asked(t *testing.T, r questionReply, typ string) *nodeQuestion {
	t.Helper()
	if r.Question == nil || r.Question.Type != typ || !strings.HasPrefix(r.Question.Params.InteractiveID, "itr_") {
		t.Fatalf("reply %+v, want a %s question", r, typ)
	}
	return r.Question
}

// refused sends a chat request that must be refused with status and
// returns the refusal's message.
func refused(t *testing.T, c *enginetest.Client, body map[string]any, status int) string {
	t.Helper()
	var e struct{ Message string }
	expect(t, c, "POST", completions, body, status).JSON(t, &e)
	return e.Message
}

func answering(appID, chatID, id string, value any) map[string]any {
	return map[string]any{"appId": appID, "chatId": chatID, "interactive": map[string]any{"interactiveId": id, "value": value}}
}

func TestInteractiveNodes(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	app := planApp(t, alice)

	t.Run("select, then a form", func(t *testing.T) {
		r := post(t, alice, map[string]any{"appId": app, "messages": message("I want to sign up")})
		q := asked(t, r, "userSelect")
		if q.Params.Description != "Which plan?" || len(q.Params.UserSelectOptions) != 2 || q.Params.UserSelectOptions[1].Key != "pro" ||
			q.Params.UserSelectOptions[1].Value != "Pro plan" || q.Params.ExpiresAt == "" || r.Answer != "" {
			t.Errorf("question %+v, answer %q", q, r.Answer)
		}
		id := q.Params.InteractiveID
		// Refused, and the run stays paused: an unknown option, a decision
		// instead of a value, someone else, a question that is not there.
		for _, tc := range []struct {
			c      *enginetest.Client
			body   map[string]any
			status int
			want   string
		}{
			{alice, answering(app, r.ChatID, id, "Gold plan"), 400, `"Gold plan" is not one of the options`},
			{alice, answering(app, r.ChatID, id, 2), 400, "not a number"},
			{alice, answerBody(app, r.ChatID, id, "approve", nil), 400, "answer with interactive.value"},
			{alice, map[string]any{"appId": app, "chatId": r.ChatID, "interactive": map[string]any{"interactiveId": id}}, 400, "needs a value"},
			{bob, answering(app, r.ChatID, id, "pro"), 404, "no question"},
			{alice, answering(app, r.ChatID, "itr_made_up", "pro"), 404, "no question"},
		} {
			if got := refused(t, tc.c, tc.body, tc.status); !strings.Contains(got, tc.want) {
				t.Errorf("%v: %q, want it to say %q", tc.body["interactive"], got, tc.want)
			}
		}
		r = post(t, alice, answering(app, r.ChatID, id, "pro"))
		f := asked(t, r, "userInput")
		if f.Params.Description != "Who are you?" || len(f.Params.InputForm) != 2 || f.Params.InputForm[0].Key != "name" ||
			!f.Params.InputForm[0].Required || f.Params.InputForm[1].Type != "numberInput" {
			t.Errorf("form %+v", f)
		}
		expect(t, alice, "POST", completions, answering(app, r.ChatID, id, "basic"), 409)
		for _, tc := range []struct {
			value any
			want  string
		}{
			{map[string]any{"seats": 3}, `field "name" (Name) is required`},
			{map[string]any{"name": "Ada", "seats": "many"}, `field "seats" (Seats) must be a number, not text`},
			{map[string]any{"name": "Ada", "seats": 500}, "must be at most 100"},
			{map[string]any{"name": "Ada", "colour": "red"}, `the form has no field "colour"`},
			{"Ada", "as a JSON object"},
		} {
			if got := refused(t, alice, answering(app, r.ChatID, f.Params.InteractiveID, tc.value), 400); !strings.Contains(got, tc.want) {
				t.Errorf("%v: %q, want it to say %q", tc.value, got, tc.want)
			}
		}
		done := post(t, alice, answering(app, r.ChatID, f.Params.InteractiveID, map[string]any{"name": "Ada", "seats": 3}))
		if done.Answer != "Welcome Ada: 3 seats of Pro plan." || done.Question != nil {
			t.Errorf("answered: %+v", done)
		}
		// The answers are the person's messages in the chat's history.
		var chat struct{ Items []struct{ Role, Text string } }
		expect(t, alice, "GET", "/api/apps/"+app+"/chats/"+r.ChatID, nil, 200).JSON(t, &chat)
		var said []string
		for _, it := range chat.Items {
			if it.Role == "user" {
				said = append(said, it.Text)
			}
		}
		if strings.Join(said, "|") != "I want to sign up|Pro plan|Name: Ada\nSeats: 3" {
			t.Errorf("the person's messages %q", said)
		}
	})

	t.Run("the next message answers", func(t *testing.T) {
		// FastGPT's way: the message's text is the option, then the form
		// as JSON.
		r := post(t, alice, map[string]any{"appId": app, "messages": message("hello")})
		asked(t, r, "userSelect")
		if got := refused(t, alice, map[string]any{"appId": app, "chatId": r.ChatID, "messages": message("something else")}, 400); !strings.Contains(got, `"something else" is not one of the options`) {
			t.Errorf("a message that is no option: %q", got)
		}
		r = post(t, alice, map[string]any{"appId": app, "chatId": r.ChatID, "messages": message("Pro plan")})
		asked(t, r, "userInput")
		expect(t, alice, "POST", completions, map[string]any{"appId": app, "chatId": r.ChatID, "messages": message(`{"seats": 2}`)}, 400)
		done := post(t, alice, map[string]any{"appId": app, "chatId": r.ChatID, "messages": message(`{"name": "Grace"}`)})
		if done.Answer != "Welcome Grace: 1 seats of Pro plan." {
			t.Errorf("answered by messages: %q", done.Answer)
		}
		// Nothing waits now: a message starts a new run.
		again := post(t, alice, map[string]any{"appId": app, "chatId": r.ChatID, "messages": message("once more")})
		asked(t, again, "userSelect")
	})

	t.Run("a share link that hides the tool cards", func(t *testing.T) {
		// Its visitors still get the workflow's questions, in the stream
		// and on the page, and answer them.
		hidden := newLink(t, alice, app, map[string]any{"name": "questions", "showTools": false, "files": "hidden"})
		v := visit(t, env, hidden.URL)
		resp := expect(t, v, "POST", hidden.URL+completions, map[string]any{"stream": true, "detail": true, "messages": message("hi")}, 200)
		body := string(resp.Body)
		if !strings.Contains(body, "event: interactive\ndata: ") || !strings.Contains(body, `"type":"userSelect"`) ||
			strings.Contains(body, "event: flowNodeStatus") || strings.Contains(body, "event: flowResponses") {
			t.Errorf("the visitor's stream:\n%s", body)
		}
		chatID := regexp.MustCompile(`"id":"([0-9a-f]+)"`).FindStringSubmatch(body)
		if chatID == nil {
			t.Fatalf("no chat id in the stream %s", body)
		}
		data := readPageData(t, string(expect(t, v, "GET", hidden.URL+"/chat/"+chatID[1], nil, 200).Body))
		if n := len(data.Items); n == 0 || len(data.Items[n-1].Questions) != 1 || !strings.Contains(string(data.Items[n-1].Questions[0]), "userSelect") {
			t.Errorf("the visitor's page does not keep the question: %+v", data.Items)
		}
		done := postTo(t, v, hidden.URL+completions, map[string]any{"chatId": chatID[1], "messages": message("Basic plan")})
		if done.Answer != "You chose Basic plan." {
			t.Errorf("the visitor's answer: %+v", done)
		}
	})

	t.Run("stream", func(t *testing.T) {
		resp := expect(t, alice, "POST", completions, map[string]any{"appId": app, "stream": true, "detail": true, "messages": message("hi")}, 200)
		body := string(resp.Body)
		i, j := strings.Index(body, "event: interactive\ndata: "), strings.Index(body, `"finish_reason":"stop"`)
		if i < 0 || j < i || !strings.Contains(body, `"type":"userSelect"`) || !strings.Contains(body, `"userSelectOptions":[{"value":"Basic plan","key":"basic"}`) ||
			!strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
			t.Errorf("stream:\n%s", body)
		}
	})
}

// TestInteractiveResumedElsewhere: a program with an app key is asked in
// one engine process and answers in another on the same database.
func TestInteractiveResumedElsewhere(t *testing.T) {
	t.Parallel()
	first := enginetest.Start(t, enginetest.Options{})
	first.CreateUser(t, "alice", auth.RoleUser)
	alice := first.Login(t, "alice", enginetest.Password("alice"))
	app := planApp(t, alice)
	var made struct{ Key string }
	expect(t, alice, "POST", "/api/apps/"+app+"/keys", map[string]any{"name": "program"}, 201).JSON(t, &made)

	r := post(t, first.Bearer(made.Key), map[string]any{"customUid": "cust-1", "messages": message("sign me up")})
	q := asked(t, r, "userSelect")

	second := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_MONGODB_URI": first.Config.MongoURI, "FLOWBOX_MONGODB_DB": first.Config.MongoDB}})
	program := second.Bearer(made.Key)
	// Another end user of the key does not reach this chat's question.
	expect(t, program, "POST", completions, map[string]any{"customUid": "cust-2", "chatId": r.ChatID,
		"interactive": map[string]any{"interactiveId": q.Params.InteractiveID, "value": "basic"}}, 404)
	expect(t, program, "POST", completions, map[string]any{"customUid": "cust-1", "chatId": r.ChatID,
		"interactive": map[string]any{"interactiveId": q.Params.InteractiveID, "value": "Enterprise"}}, 400)
	done := post(t, program, map[string]any{"customUid": "cust-1", "chatId": r.ChatID,
		"interactive": map[string]any{"interactiveId": q.Params.InteractiveID, "value": "basic"}})
	if done.Answer != "You chose Basic plan." || done.Question != nil {
		t.Errorf("resumed in the second engine: %+v", done)
	}
}

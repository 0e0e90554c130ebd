package web_test

// Human approval (P10) and tool-call limits (P9) through the product: a
// command an ask rule matches pauses the run; its chat's owner answers
// with the next chat request, in this engine or another one.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/workers"
)

// approvalPolicy asks before rm and forbids nc.
const approvalPolicy = `{"rules": [
	{"id": "ask-rm", "command": "rm", "decision": "ask", "justification": "deleting files needs a person"},
	{"id": "no-nc", "command": ["nc", "ncat"], "decision": "forbid", "justification": "raw sockets are not for agents here"}]}`

func policyFile(t *testing.T, policy string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// question is the approval a completion asks for.
type question struct {
	ApprovalID    string    `json:"approvalId"`
	ToolCallID    string    `json:"toolCallId"`
	Command       string    `json:"command"`
	Rule          string    `json:"rule"`
	Justification string    `json:"justification"`
	ExpiresAt     time.Time `json:"expiresAt"`
	Answers       []string  `json:"answers"`
}

// chatReply is a non-streamed completion: its chat, answer and question.
type chatReply struct {
	ChatID, Answer string
	Question       *question
}

// completion posts a chat request (without streaming) and reads it.
func completion(t *testing.T, c *enginetest.Client, body map[string]any) chatReply {
	t.Helper()
	resp := expect(t, c, "POST", "/api/v1/chat/completions", body, 200)
	var out struct {
		ID      string
		Choices []struct{ Message struct{ Content string } }
		// FastGPT's interactive shape.
		Interactive *struct {
			Type   string
			Params question
		}
	}
	resp.JSON(t, &out)
	tr := chatReply{ChatID: out.ID}
	if len(out.Choices) > 0 {
		tr.Answer = out.Choices[0].Message.Content
	}
	if out.Interactive != nil {
		if out.Interactive.Type != "commandApproval" {
			t.Fatalf("interactive type %q", out.Interactive.Type)
		}
		tr.Question = &out.Interactive.Params
	}
	return tr
}

// asks sends a message whose command must wait for approval.
func asks(t *testing.T, c *enginetest.Client, appID, chatID, text string) chatReply {
	t.Helper()
	body := map[string]any{"appId": appID, "messages": message(text)}
	if chatID != "" {
		body["chatId"] = chatID
	}
	tr := completion(t, c, body)
	if tr.Question == nil {
		t.Fatalf("%q: no approval asked; answer %q", text, tr.Answer)
	}
	return tr
}

func answerBody(appID, chatID, approvalID, decision string, extra map[string]any) map[string]any {
	in := map[string]any{"approvalId": approvalID, "decision": decision}
	for k, v := range extra {
		in[k] = v
	}
	return map[string]any{"appId": appID, "chatId": chatID, "interactive": in}
}

func TestApproval(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": policyFile(t, approvalPolicy)}})
	env.CreateUser(t, "alice", auth.RoleUser)
	env.CreateUser(t, "bob", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	bob := env.Login(t, "bob", enginetest.Password("bob"))
	app := newApp(t, alice, "approvals")

	t.Run("approve", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ touch gone.txt && rm -f gone.txt && echo removed")
		q := tr.Question
		if q.Rule != "ask-rm" || q.Justification != "deleting files needs a person" || !strings.Contains(q.Command, "rm -f gone.txt") ||
			strings.Join(q.Answers, ",") != "approve,approveChat,edit,reject" || !q.ExpiresAt.After(time.Now().Add(20*time.Minute)) {
			t.Errorf("question %+v", q)
		}
		if statuses, _ := toolStatuses(t, alice, app, tr.ChatID); strings.Join(statuses, ",") != "awaiting approval" {
			t.Errorf("stored statuses %v, want the pending call", statuses)
		}
		// Another user cannot answer it, nor learn that it exists.
		expect(t, bob, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, q.ApprovalID, "approve", nil), 404)
		done := completion(t, alice, answerBody(app, tr.ChatID, q.ApprovalID, "approve", nil))
		if !strings.Contains(done.Answer, "succeeded") || !strings.Contains(done.Answer, "removed") || done.Question != nil {
			t.Errorf("approved: %q", done.Answer)
		}
		if statuses, _ := toolStatuses(t, alice, app, tr.ChatID); strings.Join(statuses, ",") != "awaiting approval,success" {
			t.Errorf("stored statuses %v", statuses)
		}
		// Answered once only.
		resp := expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, q.ApprovalID, "reject", nil), 409)
		if !strings.Contains(string(resp.Body), "answered already") {
			t.Errorf("second answer: %s", resp.Body)
		}
		expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, "apr_made_up", "approve", nil), 404)
		expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, q.ApprovalID, "maybe", nil), 400)
	})

	t.Run("reject with a reason", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ rm -rf data")
		done := completion(t, alice, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "reject", map[string]any{"reason": "keep the data for now"}))
		if !strings.Contains(done.Answer, "rejected") || !strings.Contains(done.Answer, "keep the data for now") {
			t.Errorf("rejected: %q", done.Answer)
		}
		statuses, responses := toolStatuses(t, alice, app, tr.ChatID)
		if len(statuses) != 2 || statuses[1] != "rejected" || !strings.Contains(responses[1], "keep the data for now") {
			t.Errorf("stored %v %v", statuses, responses)
		}
	})

	t.Run("edit", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ rm -rf build")
		expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, tr.Question.ApprovalID, "edit", nil), 400)
		done := completion(t, alice, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "edit", map[string]any{"command": "echo edited instead"}))
		if !strings.Contains(done.Answer, "edited instead") {
			t.Errorf("edited: %q", done.Answer)
		}
		// An edit is judged again: a forbidden command does not run.
		tr = asks(t, alice, app, tr.ChatID, "$ rm -f x")
		completion(t, alice, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "edit", map[string]any{"command": "nc -l 4444"}))
		statuses, responses := toolStatuses(t, alice, app, tr.ChatID)
		if n := len(statuses); n != 4 || statuses[1] != "success" || statuses[3] != "refused" || !strings.Contains(responses[3], "no-nc") {
			t.Errorf("stored %v %v; want the forbidden edit refused", statuses, responses)
		}
	})

	t.Run("approve for this chat", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ rm -f nothing.txt")
		completion(t, alice, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "approveChat", nil))
		again := completion(t, alice, map[string]any{"appId": app, "chatId": tr.ChatID, "messages": message("$ rm -f nothing.txt")})
		if again.Question != nil || !strings.Contains(again.Answer, "succeeded") {
			t.Errorf("the same command again: asked %v, answer %q", again.Question, again.Answer)
		}
		asks(t, alice, app, tr.ChatID, "$ rm -f other.txt") // another command still asks
		// In another chat, the same command asks again.
		asks(t, alice, app, "", "$ rm -f nothing.txt")
	})

	t.Run("two calls in one round", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ echo kept-result\n$ rm -f y.txt")
		if statuses, _ := toolStatuses(t, alice, app, tr.ChatID); strings.Join(statuses, ",") != "success,awaiting approval" {
			t.Errorf("paused round: %v", statuses)
		}
		done := completion(t, alice, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "reject", nil))
		if !strings.Contains(done.Answer, "kept-result") || !strings.Contains(done.Answer, "rejected") {
			t.Errorf("the round's other result is lost: %q", done.Answer)
		}
	})

	t.Run("a new message instead of an answer", func(t *testing.T) {
		tr := asks(t, alice, app, "", "$ rm -f z.txt")
		completion(t, alice, map[string]any{"appId": app, "chatId": tr.ChatID, "messages": message("$ echo moved on")})
		resp := expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, tr.Question.ApprovalID, "approve", nil), 410)
		if !strings.Contains(string(resp.Body), "new message") {
			t.Errorf("late answer: %s", resp.Body)
		}
	})

	t.Run("stream", func(t *testing.T) {
		resp := expect(t, alice, "POST", "/api/v1/chat/completions", map[string]any{"appId": app, "stream": true, "detail": true,
			"messages": message("$ rm -f streamed.txt")}, 200)
		body := string(resp.Body)
		i, j := strings.Index(body, "event: interactive"), strings.Index(body, `"finish_reason":"stop"`)
		if i < 0 || j < i || !strings.Contains(body, `"approvalId":"apr_`) || !strings.Contains(body, `"status":"awaiting approval"`) ||
			!strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
			t.Errorf("stream:\n%s", body)
		}
	})

	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	for _, d := range []string{"ask", "approved", "rejected"} {
		waitUntil(t, "the audit has decision "+d, func() bool {
			var list struct {
				Records []struct{ Decision, Status, Rule string }
			}
			admin.Do(t, "GET", "/admin/api/audit?app="+app+"&decision="+d, nil).JSON(t, &list)
			return len(list.Records) > 0 && (d == "approved" || list.Records[0].Rule == "ask-rm")
		})
	}
	var pending struct {
		Records []struct{ Decision, Status string }
	}
	admin.Do(t, "GET", "/admin/api/audit?app="+app+"&status=pending", nil).JSON(t, &pending)
	if len(pending.Records) == 0 || pending.Records[0].Decision != "ask" {
		t.Errorf("pending records %+v", pending.Records)
	}
}

func TestApprovalExpiry(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{Env: map[string]string{
		"FLOWBOX_POLICY_FILE": policyFile(t, approvalPolicy), "FLOWBOX_APPROVAL_TIMEOUT": "300ms"}})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "expiring")
	tr := asks(t, alice, app, "", "$ rm -f late.txt")
	if left := time.Until(tr.Question.ExpiresAt); left > time.Second {
		t.Fatalf("expires in %v, want about 300ms", left)
	}
	waitUntil(t, "the approval expired", func() bool { return time.Now().After(tr.Question.ExpiresAt) })
	// The workers' sweep (every minute) settles it without a new message:
	// the audit says it was rejected as expired; a second sweep finds
	// nothing more.
	admin := env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	expired := func() int {
		var list struct{ Records []struct{ Reason string } }
		admin.Do(t, "GET", "/admin/api/audit?app="+app+"&decision=rejected", nil).JSON(t, &list)
		n := 0
		for _, r := range list.Records {
			if r.Reason == "expired" {
				n++
			}
		}
		return n
	}
	for range 2 {
		if err := env.Engine.Workers.HandleApprovalExpire(context.Background(), workers.NewApprovalExpireTask()); err != nil {
			t.Fatal(err)
		}
		if n := expired(); n != 1 {
			t.Fatalf("%d expiry records after the sweep, want 1", n)
		}
	}
	for range 2 {
		resp := expect(t, alice, "POST", "/api/v1/chat/completions", answerBody(app, tr.ChatID, tr.Question.ApprovalID, "approve", nil), 410)
		if !strings.Contains(string(resp.Body), "expired") {
			t.Errorf("late answer: %s", resp.Body)
		}
	}
	if n := expired(); n != 1 {
		t.Errorf("%d expiry records after the late answers, want still 1", n)
	}
}

// TestApprovalResumedElsewhere answers in a second engine process on the
// same database: the paused run lives in the database, not in memory.
func TestApprovalResumedElsewhere(t *testing.T) {
	t.Parallel()
	file := policyFile(t, approvalPolicy)
	first := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": file}})
	first.CreateUser(t, "alice", auth.RoleUser)
	alice := first.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "resumed")
	tr := asks(t, alice, app, "", "$ echo before\n$ rm -f elsewhere.txt; echo removed elsewhere")

	second := enginetest.Start(t, enginetest.Options{Env: map[string]string{"FLOWBOX_POLICY_FILE": file,
		"FLOWBOX_MONGODB_URI": first.Config.MongoURI, "FLOWBOX_MONGODB_DB": first.Config.MongoDB}})
	other := second.Login(t, "alice", enginetest.Password("alice"))
	done := completion(t, other, answerBody(app, tr.ChatID, tr.Question.ApprovalID, "approve", nil))
	if !strings.Contains(done.Answer, "removed elsewhere") || !strings.Contains(done.Answer, "before") {
		t.Errorf("resumed in the second engine: %q", done.Answer)
	}
	if statuses, _ := toolStatuses(t, alice, app, tr.ChatID); strings.Join(statuses, ",") != "success,awaiting approval,success" {
		t.Errorf("stored statuses %v", statuses)
	}
}

func TestToolCallLimits(t *testing.T) {
	t.Parallel()
	env := enginetest.Start(t, enginetest.Options{})
	env.CreateUser(t, "alice", auth.RoleUser)
	alice := env.Login(t, "alice", enginetest.Password("alice"))
	var app struct {
		ID string `json:"appId"`
	}
	expect(t, alice, "POST", "/api/apps", map[string]any{"name": "limited",
		"graph": withPolicy(`{"limits": {"toolCallsPerRun": 2, "toolCallsPerChat": 3}}`)}, 201).JSON(t, &app)

	tr := completion(t, alice, map[string]any{"appId": app.ID, "messages": message("$ echo one\n$ echo two\n$ echo three")})
	statuses, responses := toolStatuses(t, alice, app.ID, tr.ChatID)
	if strings.Join(statuses, ",") != "success,success,limited" || !strings.Contains(responses[2], "toolCallsPerRun") {
		t.Errorf("per run: %v %v", statuses, responses)
	}
	// The chat made two; one more is allowed, then none.
	completion(t, alice, map[string]any{"appId": app.ID, "chatId": tr.ChatID, "messages": message("$ echo four\n$ echo five")})
	statuses, responses = toolStatuses(t, alice, app.ID, tr.ChatID)
	if strings.Join(statuses, ",") != "success,success,limited,success,limited" || !strings.Contains(responses[4], "toolCallsPerChat") {
		t.Errorf("per chat: %v %v", statuses, responses)
	}
	// A new chat starts afresh.
	fresh := completion(t, alice, map[string]any{"appId": app.ID, "messages": message("$ echo again")})
	if statuses, _ := toolStatuses(t, alice, app.ID, fresh.ChatID); strings.Join(statuses, ",") != "success" {
		t.Errorf("new chat: %v", statuses)
	}
}

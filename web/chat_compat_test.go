package web_test

// Chat API compatibility with what OpenAI and FastGPT clients send:
// content as an array of parts (text only; other parts refused by name),
// and FastGPT's responseChatItemId naming the reply in the chat's history.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/engine/enginetest"
	"github.com/flowbox/flowbox/internal/llm/llmtest"
)

// compatLastUser is the content of the last user message the model was
// sent in request i.
func compatLastUser(t *testing.T, e *chatAPIEnv, i int) string {
	t.Helper()
	reqs := e.model.Requests()
	if len(reqs) <= i {
		t.Fatalf("the model got %d requests, want at least %d", len(reqs), i+1)
	}
	msgs := reqs[i].Messages
	for j := len(msgs) - 1; j >= 0; j-- {
		if msgs[j].Role == "user" {
			return msgs[j].Content
		}
	}
	t.Fatalf("request %d has no user message: %+v", i, msgs)
	return ""
}

// compatError decodes the one error shape.
func compatError(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("status %d, body %s: %v", resp.StatusCode, b, err)
	}
	if body.Code != resp.StatusCode {
		t.Fatalf("status %d but code %d in %s", resp.StatusCode, body.Code, b)
	}
	return resp.StatusCode, body.Message
}

func TestCompatContentParts(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t, llmtest.Reply{Text: "one"}, llmtest.Reply{Text: "two"})
	accepted := []struct {
		name, messages, want string
	}{
		// Earlier messages may be parts or null too (an assistant's tool
		// call); only the last user message is the question.
		{"text parts are joined with newlines",
			`[{"role":"user","content":[{"type":"text","text":"earlier"}]},{"role":"assistant","content":null},
			  {"role":"user","content":[{"type":"text","text":"first line"},{"type":"text","text":""},{"type":"text","text":"  third\tpart "}]}]`,
			"first line\n\n  third\tpart "},
		{"a string is kept as it is",
			`[{"role":"user","content":"  as \"sent\"\n\u00e9\t "}]`,
			"  as \"sent\"\n\u00e9\t "},
	}
	for i, tc := range accepted {
		resp := chatAPIPost(t, context.Background(), e.service,
			fmt.Sprintf(`{"appId":%q,"chatId":"parts-%d","messages":%s}`, e.scripted, i, tc.messages))
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, b)
		}
		if got := compatLastUser(t, e, i); got != tc.want {
			t.Errorf("%s: the model got %q, want %q", tc.name, got, tc.want)
		}
	}

	refused := []struct {
		name, messages, want string
	}{
		{"an image part", `[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]`,
			`messages[0].content[1]: parts of type "image_url" are not supported; send text parts, and files uploaded to the chat as {"type":"file_url","name":"data.csv"}`},
		{"an audio part", `[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]`,
			`messages[0].content[0]: parts of type "input_audio" are not supported; send text parts, and files uploaded to the chat as {"type":"file_url","name":"data.csv"}`},
		{"a file part in an earlier message", `[{"role":"user","content":"hi"},{"role":"assistant","content":"yes"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"},{"type":"file","file":{"file_id":"f1"}}]},{"role":"user","content":"last"}]`,
			`messages[2].content[2]: a part of type "file" needs the "name" of a file uploaded to the chat (POST /api/uploads/{chatId})`},
		{"FastGPT's file_url part naming a file not uploaded", `[{"role":"user","content":[{"type":"file_url","name":"a.pdf","url":"https://example.com/a.pdf"}]}]`,
			`file "a.pdf" is not uploaded to chat "refused": upload it first (POST /api/uploads/refused), then name it here`},
		{"a number", `[{"role":"user","content":42}]`,
			`messages[0].content: must be a string or an array of text parts like [{"type":"text","text":"..."}], not a number`},
		{"an object", `[{"role":"user","content":{"type":"text","text":"hi"}}]`,
			`messages[0].content: must be a string or an array of text parts like [{"type":"text","text":"..."}], not an object`},
		{"a boolean", `[{"role":"user","content":true}]`,
			`messages[0].content: must be a string or an array of text parts like [{"type":"text","text":"..."}], not a boolean`},
		{"a part that is a string", `[{"role":"user","content":["hi"]}]`,
			`messages[0].content[0]: a content part must be an object like {"type":"text","text":"..."}, not a string`},
		{"a part without a type", `[{"role":"user","content":[{"text":"hi"}]}]`,
			`messages[0].content[0]: the part has no string "type"; send {"type":"text","text":"..."}`},
		{"a part whose type is not a string", `[{"role":"user","content":[{"type":1,"text":"hi"}]}]`,
			`messages[0].content[0]: the part has no string "type"; send {"type":"text","text":"..."}`},
		{"a text part without text", `[{"role":"user","content":[{"type":"text"}]}]`,
			`messages[0].content[0]: a part of type "text" needs a string "text"`},
		{"a text part with a number for text", `[{"role":"user","content":[{"type":"text","text":7}]}]`,
			`messages[0].content[0]: a part of type "text" needs a string "text"`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			resp := chatAPIPost(t, context.Background(), e.service,
				fmt.Sprintf(`{"appId":%q,"chatId":"refused","messages":%s}`, e.scripted, tc.messages))
			if code, msg := compatError(t, resp); code != http.StatusBadRequest || msg != tc.want {
				t.Fatalf("got %d %q\nwant 400 %q", code, msg, tc.want)
			}
		})
	}
	if n := len(e.model.Requests()); n != len(accepted) {
		t.Errorf("the model got %d requests, want %d: a refused request must not run", n, len(accepted))
	}
}

func TestCompatResponseChatItemID(t *testing.T) {
	t.Parallel()
	e := chatAPIStart(t, llmtest.Reply{Text: "chosen"}, llmtest.Reply{Text: "made"}, llmtest.Reply{Text: "streamed"})
	admin := e.env.Login(t, enginetest.AdminName, enginetest.AdminPassword)
	type completion struct {
		ID                 string `json:"id"`
		ResponseChatItemID string `json:"responseChatItemId"`
		Choices            []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	ask := func(body string) completion {
		t.Helper()
		resp := chatAPIPost(t, context.Background(), e.service, body)
		b, _ := io.ReadAll(resp.Body)
		var c completion
		if err := json.Unmarshal(b, &c); resp.StatusCode != 200 || err != nil || len(c.Choices) != 1 {
			t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
		}
		return c
	}

	// Chosen by the client: stored on the reply and echoed.
	got := ask(fmt.Sprintf(`{"appId":%q,"chatId":"ids","responseChatItemId":"reply_42-A","messages":[{"role":"user","content":"hi"}]}`, e.scripted))
	if got.ID != "ids" || got.ResponseChatItemID != "reply_42-A" || got.Choices[0].Message.Content != "chosen" {
		t.Fatalf("answer %+v, want id ids, responseChatItemId reply_42-A", got)
	}
	// Not sent: one is made, echoed and stored.
	made := ask(fmt.Sprintf(`{"appId":%q,"chatId":"ids","messages":[{"role":"user","content":"again"}]}`, e.scripted))
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`).MatchString(made.ResponseChatItemID) || made.ResponseChatItemID == "reply_42-A" {
		t.Fatalf("made responseChatItemId %q, want a new valid id", made.ResponseChatItemID)
	}
	// A stream stores it too (FastGPT sends it in no event).
	resp := chatAPIPost(t, context.Background(), e.service,
		fmt.Sprintf(`{"appId":%q,"chatId":"ids","stream":true,"detail":true,"responseChatItemId":"from-a-stream","messages":[{"role":"user","content":"once more"}]}`, e.scripted))
	if a := chatAPIAnswer(t, chatAPIReadSSE(t, resp.Body, nil)); resp.StatusCode != 200 || a != "streamed" {
		t.Fatalf("stream: %d, answer %q", resp.StatusCode, a)
	}

	history := admin.Do(t, "GET", "/api/apps/"+e.scripted+"/chats/ids?userId=api", nil) // the service key's default user
	var chat struct {
		Items []struct {
			DataID             string `json:"dataId"`
			Role               string `json:"role"`
			Text               string `json:"text"`
			ResponseChatItemID string `json:"responseChatItemId"`
		} `json:"items"`
	}
	history.JSON(t, &chat)
	var items []string
	for _, it := range chat.Items {
		items = append(items, it.Role+":"+it.Text+":"+it.ResponseChatItemID)
	}
	want := []string{"user:hi:", "assistant:chosen:reply_42-A", "user:again:", "assistant:made:" + made.ResponseChatItemID,
		"user:once more:", "assistant:streamed:from-a-stream"}
	if history.Status != 200 || strings.Join(items, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history: %d\n got  %q\n want %q", history.Status, items, want)
	}
	if chat.Items[1].DataID != "ids/00000001" {
		t.Errorf("dataId = %q: the stored key stays ids/<seq>", chat.Items[1].DataID)
	}

	for _, tc := range []struct{ name, field, want string }{
		{"empty", `""`, `responseChatItemId "" is not valid: use 1 to 64 letters, digits, '_' or '-'`},
		{"a space", `"my reply"`, `responseChatItemId "my reply" is not valid: use 1 to 64 letters, digits, '_' or '-'`},
		{"a slash", `"a/b"`, `responseChatItemId "a/b" is not valid`},
		{"not ASCII", `"réponse"`, `responseChatItemId "réponse" is not valid`},
		{"65 characters", `"` + strings.Repeat("x", 65) + `"`, `is not valid: use 1 to 64 letters`},
		{"a number", `42`, `responseChatItemId must be a string of 1 to 64 letters, digits, '_' or '-', not a number`},
		{"an object", `{"id":"x"}`, `responseChatItemId must be a string of 1 to 64 letters, digits, '_' or '-', not an object`},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			resp := chatAPIPost(t, context.Background(), e.service,
				fmt.Sprintf(`{"appId":%q,"chatId":"bad-ids","responseChatItemId":%s,"messages":[{"role":"user","content":"hi"}]}`, e.scripted, tc.field))
			if code, msg := compatError(t, resp); code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Fatalf("got %d %q, want 400 with %q", code, msg, tc.want)
			}
		})
	}
	if n := len(e.model.Requests()); n != 3 {
		t.Errorf("the model got %d requests, want 3: a refused request must not run", n)
	}
}

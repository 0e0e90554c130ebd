package web_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/flowbox/flowbox/engine/enginetest"
)

// say sends one turn of the chat API as c, not streamed, and returns the
// chat's id (a new chat when chatID is empty) and the answer. The demo
// app's offline model runs the lines of message that start with "$ " in
// the chat's sandbox, and answers anything else without running a thing.
func say(t *testing.T, c *enginetest.Client, appID, chatID, message string) (id, answer string) {
	t.Helper()
	body := map[string]any{"appId": appID, "messages": []map[string]string{{"role": "user", "content": message}}}
	if chatID != "" {
		body["chatId"] = chatID
	}
	resp := c.Do(t, "POST", "/api/v1/chat/completions", body)
	if resp.Status != http.StatusOK {
		t.Fatalf("turn %q: %d %s", message, resp.Status, resp.Body)
	}
	var got struct {
		ID      string `json:"id"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	resp.JSON(t, &got)
	if got.ID == "" || len(got.Choices) != 1 {
		t.Fatalf("turn %q: no chat id or answer in %s", message, resp.Body)
	}
	return got.ID, got.Choices[0].Message.Content
}

// quoted is s as the API's messages quote it (strconv.Quote), inside a
// JSON string.
func quoted(s string) string {
	q := strconv.Quote(s)
	return `\"` + q[1:len(q)-1] + `\"`
}

func itoa(n int) string { return strconv.Itoa(n) }

// clipped is the start of a body, for failure messages.
func clipped(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

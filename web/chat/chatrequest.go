package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/workspace"
	"github.com/flowbox/flowbox/web/api"
)

type chatRequest struct {
	ChatID string `json:"chatId"`
	AppID  string `json:"appId"`
	// Model names the app as OpenAI's clients name a model (GET
	// /api/v1/models lists them); appId, when set, wins.
	Model string `json:"model"`
	// StreamOptions asks, with includeUsage, for a last chunk with the
	// run's usage, as OpenAI's API sends it.
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	CustomUID string         `json:"customUid"`
	Stream    bool           `json:"stream"`
	Detail    bool           `json:"detail"`
	Variables map[string]any `json:"variables"`
	// Draft runs the app's draft instead of its published version: for
	// the builder's test runs, by those who may edit the app only.
	Draft bool `json:"draft"`
	// ResponseChatItemID names the reply in the chat's history, as in
	// FastGPT; absent or null: one is made. Raw, to refuse a value that is
	// not a string in words of its own.
	ResponseChatItemID json.RawMessage `json:"responseChatItemId"`
	// Interactive answers what a paused run waits for (a command's
	// approval, or an interactive node's question); messages are not
	// needed with it.
	Interactive *interactiveAnswer `json:"interactive"`
	Messages    []struct {
		Role    string         `json:"role"`
		Content messageContent `json:"content"`
	} `json:"messages"`
}

// messageContent is a message's content as OpenAI clients send it: a
// string, or an array of content parts of which only text parts are
// accepted, joined with newlines. A content of another shape decodes
// without error and keeps what is wrong in problem, so that the refusal
// can name the message (the decoder does not know its index).
type messageContent struct {
	Text string
	// Files are the names of files already uploaded to the chat that
	// the message attaches (K2): parts {"type":"file_url","name":...}
	// as FastGPT sends them, or {"type":"file","name":...}.
	Files   []string
	problem string // "content...: what is wrong"; empty when the content is usable
}

func (m *messageContent) UnmarshalJSON(b []byte) error {
	*m = messageContent{}
	b = bytes.TrimSpace(b)
	switch kind := jsonKind(b); kind {
	case "null":
		return nil
	case "string":
		return json.Unmarshal(b, &m.Text)
	case "array":
		var parts []json.RawMessage
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		texts := make([]string, 0, len(parts))
		for i, raw := range parts {
			text, file, problem := textPart(raw)
			if problem != "" {
				m.problem = fmt.Sprintf("content[%d]: %s", i, problem)
				return nil
			}
			if file != "" {
				m.Files = append(m.Files, file)
				continue
			}
			texts = append(texts, text)
		}
		m.Text = strings.Join(texts, "\n")
		return nil
	default:
		m.problem = "content: must be a string or an array of text parts like [{\"type\":\"text\",\"text\":\"...\"}], not " + an(kind)
		return nil
	}
}

// attachments checks that the files a message attaches are uploaded to
// the chat and says where the agent finds them; it answers the client
// itself when one is missing.
func (h *Handler) attachments(c *gin.Context, chat history.Chat, names []string) (string, bool) {
	if h.Uploads == nil {
		api.Error(c, http.StatusBadRequest, "this engine keeps no uploaded files; send text only")
		return "", false
	}
	scope := sandbox.Scope{AppID: chat.AppID, UserID: chat.UserID, ChatID: chat.ID}
	entries, err := h.Uploads.List(c.Request.Context(), scope, workspace.Uploads, "")
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.Log.Error("list uploads", "chatId", chat.ID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the chat's uploaded files; retry later")
		return "", false
	}
	lines := make([]string, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(entries, func(e workspace.Entry) bool {
			return !e.IsDir && (e.Name == name || e.Path == name || e.SandboxPath == name)
		})
		if i < 0 {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("file %q is not uploaded to chat %q: upload it first (POST /api/uploads/%s), then name it here", name, chat.ID, chat.ID))
			return "", false
		}
		lines = append(lines, fmt.Sprintf("%s (%s)", entries[i].SandboxPath, workspace.HumanSize(entries[i].Size)))
	}
	return "Attached files: " + strings.Join(lines, ", "), true
}

// textPart returns the text of a content part, or the name of the file
// it attaches, or what is wrong with it.
func textPart(raw json.RawMessage) (text, file, problem string) {
	var part map[string]json.RawMessage
	if kind := jsonKind(bytes.TrimSpace(raw)); kind != "object" || json.Unmarshal(raw, &part) != nil {
		return "", "", "a content part must be an object like {\"type\":\"text\",\"text\":\"...\"}, not " + an(kind)
	}
	var typ string
	if t, ok := part["type"]; !ok || jsonKind(bytes.TrimSpace(t)) != "string" || json.Unmarshal(t, &typ) != nil {
		return "", "", `the part has no string "type"; send {"type":"text","text":"..."}`
	}
	switch typ {
	case "text":
	case "file_url", "file":
		n, ok := part["name"]
		if !ok || jsonKind(bytes.TrimSpace(n)) != "string" || json.Unmarshal(n, &file) != nil || file == "" {
			return "", "", fmt.Sprintf(`a part of type %q needs the "name" of a file uploaded to the chat (POST /api/uploads/{chatId})`, typ)
		}
		return "", file, ""
	default:
		return "", "", fmt.Sprintf("parts of type %q are not supported; send text parts, and files uploaded to the chat as {\"type\":\"file_url\",\"name\":\"data.csv\"}", typ)
	}
	t, ok := part["text"]
	if !ok || jsonKind(bytes.TrimSpace(t)) != "string" || json.Unmarshal(t, &text) != nil {
		return "", "", `a part of type "text" needs a string "text"`
	}
	return text, "", ""
}

// jsonKind names the kind of JSON value b starts with.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// an puts the article before a kind of value.
func an(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "null", "nothing":
		return kind
	}
	return "a " + kind
}

// responseChatItemID returns the reply's id: the client's, checked, or a
// new one when it sent none.
func responseChatItemID(raw json.RawMessage) (id, problem string) {
	raw = bytes.TrimSpace(raw)
	if kind := jsonKind(raw); kind == "nothing" || kind == "null" {
		return api.NewID(), ""
	} else if kind != "string" || json.Unmarshal(raw, &id) != nil {
		return "", "responseChatItemId must be a string of 1 to 64 letters, digits, '_' or '-', not " + an(kind)
	}
	if !validItemID.MatchString(id) {
		if r := []rune(id); len(r) > 80 {
			id = string(r[:80]) + "…"
		}
		return "", fmt.Sprintf("responseChatItemId %q is not valid: use 1 to 64 letters, digits, '_' or '-'", id)
	}
	return id, ""
}

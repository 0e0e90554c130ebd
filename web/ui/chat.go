package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// pageData is what the chat page's script reads from its
// <script type="application/json" id="page-data"> block: PageData in
// app/src/chat/ChatPage.tsx, its items as cards/history.ts reads them.
type pageData struct {
	AppID     string `json:"appId"`
	AppName   string `json:"appName"`
	ChatID    string `json:"chatId"`
	Title     string `json:"title"`
	APIBase   string `json:"apiBase"`
	Visitor   bool   `json:"visitor"`
	ShowTools bool   `json:"showTools"`
	// Files is the files panel, "read" or "write"; empty when the page
	// has none.
	Files string `json:"files,omitempty"`
	Own   bool   `json:"own"`
	// UserID is the chat's owner when the caller reads another user's.
	UserID     string          `json:"userId,omitempty"`
	CanDelete  bool            `json:"canDelete"`
	RunDetails bool            `json:"runDetails"`
	Variables  json.RawMessage `json:"variables,omitempty"`
	Items      []pageItem      `json:"items"`
}

// pageItem is a message of the chat's history. Tool calls are left out
// when the view hides tools, and the nodes' responses unless the caller
// may see run details: they are the app's inner workings.
type pageItem struct {
	ID         string          `json:"dataId"`
	Role       string          `json:"role"`
	Text       string          `json:"text"`
	DurationMs int64           `json:"durationMs,omitempty"`
	Calls      []pageCall      `json:"calls,omitempty"`
	Questions  []*pageQuestion `json:"questions,omitempty"`
	Responses  json.RawMessage `json:"responses,omitempty"`
}

// pageCall is a tool call with what its card shows of it.
type pageCall struct {
	toolcall.Call
	Command string `json:"command"`
}

// pageQuestion is an interactive node's question in a chat's history,
// with the answer a later turn gave it and that answer as the person's
// message said it.
type pageQuestion struct {
	nodes.InteractiveDetail
	Said string `json:"said,omitempty"`
}

// questions finds the interactive nodes' questions of a chat's turns,
// per turn, each with its answer when a later turn resumed it. Every
// viewer sees them: they are the workflow's, not the tools'.
func questions(items []history.Item) [][]*pageQuestion {
	var asked [][]*pageQuestion
	answers := map[string]*nodes.Answer{}
	for _, it := range items {
		var turn []*pageQuestion
		var responses []struct {
			Type   string          `json:"moduleType"`
			Detail json.RawMessage `json:"detail"`
		}
		_ = json.Unmarshal(it.Responses, &responses)
		for _, r := range responses {
			if r.Type != "userSelect" && r.Type != "formInput" {
				continue
			}
			var d nodes.InteractiveDetail
			if json.Unmarshal(r.Detail, &d) != nil || d.Request.ID == "" {
				continue
			}
			if d.Answer != nil {
				answers[d.Request.ID] = d.Answer
			} else {
				turn = append(turn, &pageQuestion{InteractiveDetail: d})
			}
		}
		asked = append(asked, turn)
	}
	for _, turn := range asked {
		for _, q := range turn {
			if a := answers[q.Request.ID]; a != nil {
				q.Answer, q.Said = a, q.Request.Said(*a)
			}
		}
	}
	return asked
}

// ChatView is how a chat page is shown: to signed-in users (Base empty:
// the API at /api, pages under /apps), or to a share link's visitors
// (Base the link's path, with the link's choices).
type ChatView struct {
	Base      string // prefix of the chat and file API the page calls
	Visitor   bool
	ShowTools bool
	Files     string // hidden | read | write
}

// Chat is a chat page: its history, the input, the files panel. "new"
// starts a chat.
func (u *UI) Chat(c *gin.Context) {
	a, ok := u.app(c)
	if !ok {
		return
	}
	if c.Param("chatId") == "new" {
		c.Redirect(http.StatusSeeOther, "/apps/"+a.ID+"/chat/"+api.NewID())
		return
	}
	u.ChatPage(c, a, ChatView{ShowTools: true, Files: "write"})
}

// ChatPage serves the browser app's chat page for the chat at :chatId of
// app a, if the caller may read it, with the chat in the page's data.
func (u *UI) ChatPage(c *gin.Context, a apps.App, view ChatView) {
	chatID := c.Param("chatId")
	ctx := c.Request.Context()
	// Another user's chat (?userId=, as the chat list links it) is
	// shown to those who may read it; messages go to the caller's own
	// chats only, so its page has no input.
	user, _ := u.Access.Whose(api.Caller(c), c.Query("userId"), "")
	if _, err := u.Access.ChatOwner(ctx, api.Caller(c), a.ID, user, chatID, false); err != nil {
		c.String(http.StatusNotFound, "no such chat")
		return
	}
	p, _ := api.PrincipalOf(c)
	own := user == p.UserID
	data := pageData{AppID: a.ID, AppName: a.Name, ChatID: chatID, Title: chatID, APIBase: view.Base,
		Visitor: view.Visitor, ShowTools: view.ShowTools, Own: own, CanDelete: own || p.Admin(),
		// The nodes' inputs and outputs are the app's inner workings: for
		// those who build it.
		RunDetails: !view.Visitor && u.Access.CanEditApp(api.Caller(c), a),
		Items:      []pageItem{}}
	if view.Files == "read" || view.Files == "write" {
		data.Files = view.Files
	}
	if !own {
		data.UserID = user
		if data.Files == "write" {
			data.Files = "read"
		}
	}
	chat, err := u.Chats.Get(ctx, sandbox.Scope{AppID: a.ID, UserID: user, ChatID: chatID})
	if err == nil {
		data.Title = chat.Title
		raw, _ := u.Chats.Items(ctx, chat, 0, 500)
		asked := questions(raw)
		for i, it := range raw {
			pi := pageItem{ID: it.ID, Role: it.Role, Text: it.Text, DurationMs: it.DurationMs, Questions: asked[i]}
			if data.RunDetails {
				pi.Responses = it.Responses
			}
			var calls []toolcall.Call
			if view.ShowTools {
				_ = json.Unmarshal(it.ToolCalls, &calls)
			}
			for _, call := range calls {
				pi.Calls = append(pi.Calls, pageCall{Call: call, Command: callSummary(call.Tool, call.Arguments)})
			}
			data.Items = append(data.Items, pi)
		}
	} else if !errors.Is(err, history.ErrNotFound) {
		c.String(http.StatusInternalServerError, "could not read the chat; retry later")
		return
	}
	// The variables of the graph the chat runs (the published version's).
	if g, _, err := u.Apps.Running(ctx, a); err != nil {
		c.String(http.StatusInternalServerError, "could not read the app's published version; retry later")
		return
	} else if len(g.Variables) > 0 {
		data.Variables, _ = json.Marshal(g.Variables)
	}
	serveApp(c, http.StatusOK, "chat.html", data.Title, data)
}

// callSummary is what a tool card shows of a call: a command's command
// line, a skill tool's skill, script or file and arguments, or the
// arguments as the model sent them.
func callSummary(tool, arguments string) string {
	var args struct {
		Command, Name, Script, Path string
		Args                        []string
	}
	if json.Unmarshal([]byte(arguments), &args) != nil {
		return arguments
	}
	switch {
	case args.Command != "":
		return args.Command
	case tool == registry.RunSkillScriptName && args.Name != "":
		return strings.Join(append([]string{args.Name, args.Script}, args.Args...), " ")
	case tool == registry.LoadSkillName || tool == registry.ReadSkillFileName:
		if args.Name != "" {
			return strings.TrimSpace(args.Name + " " + args.Path)
		}
	}
	return arguments
}

package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
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
	UserID     string `json:"userId,omitempty"`
	CanDelete  bool   `json:"canDelete"`
	RunDetails bool   `json:"runDetails"`
	Terminal   bool   `json:"terminal,omitempty"`
	// Rewind offers regenerate and edit (and Branch, Fork, to signed-in
	// owners); Redo says the chat has turns a rewind set aside.
	Rewind    bool            `json:"rewind,omitempty"`
	Fork      bool            `json:"fork,omitempty"`
	Redo      bool            `json:"redo,omitempty"`
	Variables json.RawMessage `json:"variables,omitempty"`
	Items     []pageItem      `json:"items"`
	// Earlier is the seq of the first item shown when the chat has
	// earlier ones: the page asks for them with ?before=Earlier.
	Earlier int `json:"earlier,omitempty"`
}

// pageWindow is how many of a chat's items its page holds at first (the
// last 100 turns), and how many more each "earlier messages" brings: a
// long chat opens as fast as a short one, and its newest turns are the
// ones shown.
const pageWindow = 200

// earlierItems is what a chat page's ?before=N answers: the items before
// seq N, at most pageWindow of them, and Earlier as in pageData.
type earlierItems struct {
	Items   []pageItem `json:"items"`
	Earlier int        `json:"earlier,omitempty"`
	Redo    bool       `json:"redo,omitempty"`
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
	// Terminal: the visitor's link lets them open terminals.
	Terminal bool
}

// terminalFor tells whether the chat page offers its terminal, which
// runs what is typed: to the chat's owner unless the app turned
// terminals off, to a visitor only where their link allows it, to
// admins always.
func terminalFor(view ChatView, a apps.App, own, admin bool) bool {
	switch {
	case view.Visitor:
		return own && view.Terminal && !a.TerminalOff
	case admin:
		return true
	default:
		return own && !a.TerminalOff && view.Files != ""
	}
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
		Terminal:   u.Terminal && terminalFor(view, a, own, p.Admin()),
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
	if err != nil && !errors.Is(err, history.ErrNotFound) {
		c.String(http.StatusInternalServerError, "could not read the chat; retry later")
		return
	}
	// ?before=N: the page asks for the items before seq N, as JSON.
	if q, asked := c.GetQuery("before"); asked {
		before, perr := strconv.Atoi(q)
		if perr != nil || before < 0 {
			api.Error(c, http.StatusBadRequest, "before must be the seq of a chat item (a whole number of 0 or more), as the page's earlier field gives it")
			return
		}
		items, earlier, err := u.pageItems(ctx, chat, min(before, chat.Items), view.ShowTools, data.RunDetails)
		if err != nil {
			api.Error(c, http.StatusInternalServerError, "Could not read the chat's earlier messages; retry in a moment.")
			return
		}
		c.JSON(http.StatusOK, earlierItems{Items: items, Earlier: earlier, Redo: chat.Redo != nil})
		return
	}
	data.Rewind = u.Rewind && own
	data.Fork = data.Rewind && !view.Visitor
	if err == nil {
		data.Redo = data.Rewind && chat.Redo != nil
		data.Title = chat.Title
		if data.Items, data.Earlier, err = u.pageItems(ctx, chat, chat.Items, view.ShowTools, data.RunDetails); err != nil {
			c.String(http.StatusInternalServerError, "could not read the chat; retry later")
			return
		}
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

// pageItems are the chat's items before seq before (at most pageWindow,
// starting with a question), as its page shows them, and the seq of the
// first (0 when there is nothing earlier). The turn after them is read as
// well: it holds the answers of their last questions.
func (u *UI) pageItems(ctx context.Context, chat history.Chat, before int, showTools, runDetails bool) ([]pageItem, int, error) {
	items := []pageItem{}
	if before <= 0 {
		return items, 0, nil
	}
	from := max(0, before-pageWindow)
	raw, err := u.Chats.Items(ctx, chat, from, before-from+2)
	if err != nil {
		return nil, 0, err
	}
	// A window starting inside a turn starts at its next question.
	for len(raw) > 0 && from > 0 && raw[0].Role != "user" {
		raw, from = raw[1:], raw[0].Seq+1
	}
	asked := questions(raw)
	for i, it := range raw {
		if it.Seq >= before {
			break
		}
		pi := pageItem{ID: it.ID, Role: it.Role, Text: it.Text, DurationMs: it.DurationMs, Questions: asked[i]}
		if runDetails {
			pi.Responses = it.Responses
		}
		var calls []toolcall.Call
		if showTools {
			_ = json.Unmarshal(it.ToolCalls, &calls)
		}
		for _, call := range calls {
			pi.Calls = append(pi.Calls, pageCall{Call: call, Command: callSummary(call.Tool, call.Arguments)})
		}
		items = append(items, pi)
	}
	return items, from, nil
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

package chat

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/approval"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/runapp"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/redact"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/files"
)

// History keeps chats (history.Store).
type History interface {
	Open(ctx context.Context, chat sandbox.Scope) (history.Chat, error)
	AppendTurn(ctx context.Context, chat history.Chat, question, answer history.Item, now time.Time) (history.Chat, error)
}

// Handler serves POST /api/v1/chat/completions, compatible with
// FastGPT's chat API: OpenAI-shaped answers and chunks, and with detail
// the SSE events answer, flowNodeStatus, toolCall, toolParams,
// toolResponse, flowResponses and error, plus toolOutput carrying a
// command's output while it runs.
type Handler struct {
	Engine *nodes.Engine
	Apps   api.AppReader
	// AppList lists the apps for GET /api/v1/models; nil lists none.
	AppList AppLister
	// Versions reads the apps' published versions (apps.Store); nil: every
	// app runs its draft.
	Versions interface {
		Version(ctx context.Context, appID, versionID string) (apps.Version, error)
	}
	History History
	// Deleter deletes the sandbox of a run that keeps no chat (a request
	// without chatId that sends its history); nil: such runs are refused.
	Deleter api.SandboxDeleter
	// APIKey authorises programs that have no account (they name their
	// user in customUid); empty refuses them. Signed-in callers (a session
	// or their own API key, see Authenticate) chat as themselves.
	APIKey string
	// Access, when set, decides which apps signed-in callers may use.
	Access *api.Access
	// Runs counts share-link visitors' runs against their link's cap.
	Runs interface {
		TakeRun(ctx context.Context, l share.Link) error
	}
	// Redactor, when set, gives the app's secret redaction for what the
	// chat shows and keeps of the model's side: its answer and the
	// commands it wrote (the commands' output is redacted in the sandbox
	// chain).
	Redactor func(ctx context.Context, appID string) *redact.Redactor
	// RunLimits caps the runs in progress at once; nil caps none.
	RunLimits *RunLimits
	// Stops lets a stop request end a run in progress (E3); nil: runs
	// cannot be stopped.
	Stops *Stops
	// Approvals keeps the runs paused for a person's approval (P10) or
	// at an interactive node's question; ApprovalTimeout is how long one
	// waits (default 30 minutes). Audit records the rejected commands,
	// which never reach the sandbox chain.
	Approvals       Approvals
	ApprovalTimeout time.Duration
	Audit           AuditRecorder
	// Uploads holds the chats' uploaded files, which a message may
	// attach by name (K2); nil: messages attach none.
	Uploads files.Workspace
	// Checkpoints and Rewinds, when both are set, keep a checkpoint of
	// the chat's sandbox before each turn and serve rewind, redo and
	// fork (rewind.go); nil: chats cannot be rewound.
	Checkpoints Checkpoints
	Rewinds     Rewinder
	// CheckpointKeep and CheckpointMaxAge are the retention of a chat's
	// turn checkpoints (default 20 turns and a week).
	CheckpointKeep   int
	CheckpointMaxAge time.Duration
	// DefaultApp answers requests that name no app.
	DefaultApp string
	Now        func() time.Time
	Log        *slog.Logger

	// trace, when set (benchmarks), learns when each relayed event left
	// the engine.
	trace func(chatID string, at time.Time)
}

// maxChatBody bounds a request body.
const maxChatBody = 1 << 20

// validItemID matches a client's responseChatItemId: 1 to 64 letters,
// digits, '_' or '-', safe in URLs and logs.
var validItemID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (h *Handler) authorised(c *gin.Context) bool {
	if _, ok := api.PrincipalOf(c); ok {
		return true
	}
	got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok || h.APIKey == "" || subtle.ConstantTimeCompare([]byte(got), []byte(h.APIKey)) != 1 {
		api.Error(c, http.StatusUnauthorized, "missing or wrong API key: send Authorization: Bearer <FLOWBOX_API_KEY>")
		return false
	}
	return true
}

// Completions runs the app's workflow for the user's last message, in
// named steps: read the request, find whose chat it is, open the app and
// the chat, choose the app's version, admit the run, run it and record
// the turn. Each step that refuses has answered the client.
func (h *Handler) Completions(c *gin.Context) {
	if !h.authorised(c) {
		return
	}
	t, ok := h.readTurn(c)
	if !ok || !h.resolveCaller(c, t) || !h.openChat(c, t) || !h.chooseVersion(c, t) {
		return
	}
	release, ok := h.admit(c, t)
	if !ok {
		return
	}
	defer release()
	h.runTurn(c, t)
}

// turn is one request to Completions as its steps fill it in.
type turn struct {
	req      chatRequest
	question string
	attached []string
	replyID  string
	newChat  bool
	// sent is the history a request without chatId sent: the run keeps
	// no chat (see openai.go).
	sent      []llm.Message
	ephemeral bool

	principal auth.Principal
	signedIn  bool
	link      share.Link
	visitor   bool

	// askedDetail: the client asked for detail, even where a share link
	// that hides the tool cards turned it off; it still takes the
	// questions of the workflow's interactive nodes.
	askedDetail bool

	app    apps.App
	chat   history.Chat
	paused approval.Approval
	answer nodes.Answer // the checked answer to paused
	// waits is what the chat waits for when the request answers nothing:
	// a new message lapses it.
	waits  *approval.Approval
	resume *nodes.Resume
	// graph is what runs: the version versionID's graph, or the app's
	// draft when versionID is empty.
	graph     *nodes.Graph
	versionID string
}

// readTurn reads and checks the request: its JSON, its messages, the
// question (or an interactive answer) and the chat id.
func (h *Handler) readTurn(c *gin.Context) (*turn, bool) {
	t := &turn{}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, maxChatBody)
	dec := json.NewDecoder(body)
	err := dec.Decode(&t.req)
	if err == nil {
		// Read the body to its end: the server watches the connection for
		// a client going away during a long run only once the body is
		// consumed, and the decoder stops at the value's end (whatever
		// follows it is ignored, as before).
		_, err = io.Copy(io.Discard, body)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			api.Error(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", maxChatBody))
			return nil, false
		}
		api.Error(c, http.StatusBadRequest, "the request body is not valid JSON: "+err.Error())
		return nil, false
	}
	req := &t.req
	for i, m := range req.Messages {
		if m.Content.problem != "" {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("messages[%d].%s", i, m.Content.problem))
			return nil, false
		}
	}
	var problem string
	if t.replyID, problem = responseChatItemID(req.ResponseChatItemID); problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return nil, false
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			t.question, t.attached = req.Messages[i].Content.Text, req.Messages[i].Content.Files
			break
		}
	}
	t.newChat = req.ChatID == ""
	if req.Interactive != nil {
		if problem := req.Interactive.problem(); problem != "" {
			api.Error(c, http.StatusBadRequest, problem)
			return nil, false
		}
		if t.newChat {
			api.Error(c, http.StatusBadRequest, "an interactive answer needs the chatId of the chat that waits for it")
			return nil, false
		}
	} else if strings.TrimSpace(t.question) == "" && len(t.attached) == 0 {
		api.Error(c, http.StatusBadRequest, `messages must end with a non-empty {"role":"user","content":"..."}`)
		return nil, false
	}
	if !h.historySent(c, t) {
		return nil, false
	}
	if t.newChat {
		req.ChatID = api.NewID()
	} else if problem := files.ChatIDProblem(req.ChatID); problem != "" {
		api.Error(c, http.StatusBadRequest, "chatId: "+problem)
		return nil, false
	}
	if req.AppID == "" {
		req.AppID = h.modelApp(c.Request.Context(), req.Model)
	}
	if req.CustomUID == "" {
		req.CustomUID = "api"
	}
	return t, true
}

// resolveCaller decides whose chat this is: a share link's visitor, an
// app key's end user, an account, or the service key's end user.
func (h *Handler) resolveCaller(c *gin.Context, t *turn) bool {
	req := &t.req
	t.principal, t.signedIn = api.PrincipalOf(c)
	t.link, t.visitor = api.LinkOf(c)
	t.askedDetail = req.Detail
	customUID := func() bool {
		if len(req.CustomUID) > 128 || strings.ContainsFunc(req.CustomUID, unicode.IsControl) {
			api.Error(c, http.StatusBadRequest, "customUid must be 1 to 128 characters without control characters")
			return false
		}
		return true
	}
	switch {
	case t.visitor:
		req.AppID, req.CustomUID = t.principal.AppID, t.principal.UserID
		// A link that hides the tool cards sends answers only.
		req.Detail = req.Detail && t.link.ShowTools
	case t.signedIn && t.principal.Bound():
		// An app key: its app, whatever the request names; its end users
		// are its own, apart from accounts and other apps' users.
		if !customUID() {
			return false
		}
		req.AppID, req.CustomUID = t.principal.AppID, t.principal.UserID+":"+req.CustomUID
	case t.signedIn:
		req.CustomUID = t.principal.UserID
	default:
		// The service key: its end users live apart from accounts, app
		// keys' users and visitors (auth.ServiceUser).
		if !customUID() {
			return false
		}
		req.CustomUID = auth.ServiceUser(req.CustomUID)
	}
	return true
}

// openChat reads the app the caller may use and the caller's chat (a new
// chat's id names no stored chat: no need to look), with the files the
// message attaches.
func (h *Handler) openChat(c *gin.Context, t *turn) bool {
	ctx := c.Request.Context()
	req := &t.req
	app, err := h.Apps.Get(ctx, req.AppID)
	if err == nil && t.signedIn && h.Access != nil && !h.Access.CanUseApp(api.Caller(c), app) {
		err = apps.ErrNotFound
	}
	if errors.Is(err, apps.ErrNotFound) {
		api.Error(c, http.StatusNotFound, fmt.Sprintf("no app %q", req.AppID))
		return false
	} else if err != nil {
		h.Log.Error("read app", "appId", req.AppID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the app; retry later")
		return false
	}
	t.app = app
	// Chat ids are scoped per app and user: the chat is the caller's
	// (or their end user's) own, whatever other users named theirs.
	scope := sandbox.Scope{AppID: app.ID, UserID: req.CustomUID, ChatID: req.ChatID}
	t.chat = history.Of(scope)
	if !t.newChat {
		t.chat, err = h.History.Open(ctx, scope)
	}
	if err != nil {
		h.Log.Error("read chat", "chatId", req.ChatID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the chat; retry later")
		return false
	}
	if req.Interactive == nil && !t.newChat {
		if !h.messageAnswers(c, t) {
			return false
		}
	}
	if len(t.attached) > 0 && req.Interactive == nil {
		note, ok := h.attachments(c, t.chat, t.attached)
		if !ok {
			return false
		}
		t.question = strings.TrimSpace(t.question + "\n\n" + note)
	}
	if req.Interactive != nil {
		var ok bool
		if t.paused, t.answer, ok = h.approvalFor(c, t.chat, req.Interactive); !ok {
			return false
		}
	}
	return true
}

// messageAnswers makes a message the answer when the chat waits for an
// interactive node's question, as FastGPT takes the next message: its
// text is the option chosen, or the form's fields as a JSON object. A
// command's approval waits for an interactive answer; a message lapses
// it (in admit), as it lapses a question that expired.
func (h *Handler) messageAnswers(c *gin.Context, t *turn) bool {
	a := h.waiting(c.Request.Context(), t.chat)
	if a == nil || a.IsCommand() || !h.Now().Before(a.ExpiresAt) {
		t.waits = a
		return true
	}
	if len(t.attached) > 0 {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("the chat waits for the answer to question %s; files do not answer it: answer it first, then send the files", a.ID))
		return false
	}
	text := strings.TrimSpace(t.question)
	value := mustJSON(text)
	if a.Kind == nodes.KindFormInput && json.Valid([]byte(text)) {
		value = json.RawMessage(text)
	}
	t.req.Interactive = &interactiveAnswer{InteractiveID: a.ID, Value: value}
	return true
}

// chooseVersion decides which graph runs: the one a paused run paused in
// when it resumes, the draft when the request asks for it (only those
// who may edit the app may), else the app's published version, or its
// draft when it has none.
func (h *Handler) chooseVersion(c *gin.Context, t *turn) bool {
	if t.req.Draft && (!t.signedIn || h.Access == nil || !h.Access.CanEditApp(api.Caller(c), t.app)) {
		api.Error(c, http.StatusForbidden, "only the app's owner and admins may run its draft; leave out \"draft\" to run its published version")
		return false
	}
	switch {
	case t.req.Interactive != nil:
		t.versionID = t.paused.VersionID
	case t.req.Draft:
		t.versionID = ""
	default:
		t.versionID = t.app.PublishedVersionID
	}
	if t.versionID == "" || h.Versions == nil {
		t.graph, t.versionID = &t.app.Graph, ""
		return true
	}
	v, err := h.Versions.Version(c.Request.Context(), t.app.ID, t.versionID)
	if err != nil {
		h.Log.Error("read app version", "appId", t.app.ID, "versionId", t.versionID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not read the app's published version; retry later")
		return false
	}
	t.graph = v.Graph
	return true
}

// admit counts the run against the caps and the share link's runs, then
// claims the approval it answers (a refused run leaves the approval
// waiting) or lapses the one a new message supersedes. release ends the
// run's count.
func (h *Handler) admit(c *gin.Context, t *turn) (release func(), ok bool) {
	ctx := c.Request.Context()
	req := &t.req
	// Counted before the link's runs: a run refused here uses none of them.
	release, err := h.RunLimits.Acquire(ctx, req.CustomUID)
	if err != nil {
		runRefused(c, err)
		return nil, false
	}
	if t.visitor && h.Runs != nil {
		if err := h.Runs.TakeRun(ctx, t.link); errors.Is(err, share.ErrRunsUsed) {
			release()
			api.Error(c, http.StatusTooManyRequests, "this share link has used all its "+strconv.Itoa(t.link.MaxRuns)+" runs; ask whoever shared it for a new one")
			return nil, false
		} else if err != nil {
			release()
			api.Error(c, http.StatusServiceUnavailable, "could not count the run against the share link's cap; retry in a moment")
			return nil, false
		}
	}
	if req.Interactive == nil {
		// A new message instead of an answer: the waiting run does not
		// resume.
		h.lapsePending(ctx, t.waits, req.CustomUID)
		return release, true
	}
	if !h.claim(c, t.paused, t.answer, req.CustomUID) {
		release()
		return nil, false
	}
	t.resume = &nodes.Resume{Paused: t.paused.Paused, Answer: t.answer}
	if t.paused.IsCommand() {
		t.question = req.Interactive.question(t.paused.Command)
	} else {
		t.question = t.paused.Paused.Request.Said(t.answer)
	}
	if h.Redactor != nil {
		t.question = redactText(h.Redactor(ctx, t.app.ID), t.question)
	}
	return release, true
}

// runTurn runs the workflow, streams it to the client and records the
// turn, also when the client went away (its commands ran), before the
// client learns of a paused run, and after the answer otherwise.
func (h *Handler) runTurn(c *gin.Context, t *turn) {
	req := &t.req
	// A stop request (E3) cancels ctx with ErrStopped.
	ctx, done := h.Stops.Track(c.Request.Context(), sandbox.Scope{AppID: t.app.ID, UserID: req.CustomUID, ChatID: req.ChatID})
	defer done()
	if !t.ephemeral && req.Interactive == nil {
		h.checkpointTurn(ctx, t.app, t.chat, max(0, t.chat.Items))
	}
	run := nodes.Chat{AppID: t.app.ID, UserID: req.CustomUID, ChatID: req.ChatID, Question: t.question, History: t.history(),
		Variables: req.Variables, Via: via(t.principal, t.signedIn, t.link, t.visitor), Resume: t.resume}
	out := newChatStream(c, req.Stream, req.Detail, req.ChatID)
	out.model, out.includeUsage = t.app.ID, req.StreamOptions.IncludeUsage
	out.versionID = t.versionID
	if h.Redactor != nil {
		if r := h.Redactor(ctx, t.app.ID); r != nil {
			out.redactor, out.answer = r, r.Transformer()
		}
	}
	out.replyID = t.replyID
	if h.trace != nil {
		out.trace = func(at time.Time) { h.trace(req.ChatID, at) }
	}
	start := h.Now()
	var res *nodes.Result
	defer func() { h.endEphemeral(ctx, t, res) }()
	res, runErr := h.Engine.Run(runapp.Turn(ctx, h.Engine), t.graph, run, out.event)
	if capped(c, runErr) {
		return
	}
	if runErr != nil && errors.Is(runErr, nodes.ErrInvalid) {
		api.Error(c, http.StatusUnprocessableEntity, runErr.Error())
		return
	}
	if runErr != nil && errors.Is(runErr, nodes.ErrVariables) {
		api.Error(c, http.StatusBadRequest, runErr.Error())
		return
	}
	if res == nil {
		res = &nodes.Result{}
	}
	redactResult(out.redactor, res)
	answer := res.Answer
	// The turn is kept even when the client went away: its commands ran.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if res.Paused != nil && runErr == nil {
		// Kept before the client learns of it, so that an answer finds
		// the paused run and its turn, in whichever engine it arrives.
		q := res.Paused.Request
		command := redactText(out.redactor, q.Command)
		expires, err := h.keepPaused(saveCtx, t.chat, t.versionID, res, command)
		switch {
		case err != nil:
			h.Log.Error("keep paused run", "chatId", req.ChatID, "err", err)
			waits := "the command waits for approval"
			if !q.IsApproval() {
				waits = "the workflow waits for an answer"
			}
			runErr = errors.New(waits + ", but the paused run could not be kept: " + err.Error())
		case q.IsApproval():
			out.approval = interactive(q, command, expires)
		default:
			out.approval = question(q, redactText(out.redactor, q.Description), expires)
			out.askedDetail = t.askedDetail
		}
	}
	record := func() {
		if t.ephemeral {
			return
		}
		_, err := h.History.AppendTurn(saveCtx, t.chat,
			history.Item{Role: "user", Text: t.question},
			history.Item{Role: "assistant", ResponseChatItemID: t.replyID, VersionID: t.versionID, Text: answer, ToolCalls: toolCalls(res), Responses: mustJSON(res.Responses), DurationMs: h.Now().Sub(start).Milliseconds()},
			h.Now())
		if err != nil {
			h.Log.Error("record chat turn", "chatId", req.ChatID, "err", err)
		}
	}
	switch {
	case runErr != nil:
		answer = h.endedEarly(ctx, out, res, runErr)
		record()
	case out.approval != nil:
		// The answer continues this turn: it is written down first.
		record()
		out.finish(res)
	default:
		// The client has the whole answer before the turn is written down.
		out.finish(res)
		record()
	}
}

// via names the credential of a chat request for the audit: a share link,
// an API key (by the first characters of its hash, which let no one in),
// a session, or the service key.
func via(p auth.Principal, signedIn bool, link share.Link, visitor bool) string {
	switch {
	case visitor:
		return "share:" + link.ID
	case signedIn && p.ViaKey && p.Bound():
		return "app-key:" + p.KeyID[:min(12, len(p.KeyID))]
	case signedIn && p.ViaKey:
		return "key:" + p.KeyID[:min(12, len(p.KeyID))]
	case signedIn:
		return "session"
	}
	return "service-key"
}

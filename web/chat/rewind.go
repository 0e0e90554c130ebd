package chat

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/files"
)

// Rewind, redo and fork (R2, R3; docs/CHECKPOINTS.md). The chat's sandbox
// has a checkpoint "t<seq>" taken when the turn whose question is item
// seq started, if the sandbox existed then (Checkpoints.Before). A
// rewind to before turn seq keeps the sandbox's files as they are in
// "redo", restores the newest "t<k>" with k <= seq (or empties the
// sandbox when there is none: it did not exist before that turn), and
// sets the chat's turns from seq on aside; redo restores "redo" and
// puts them back. The next turn drops what redo would have used.

// Checkpoints is the chat sandboxes' checkpoints (sandbox.Manager).
type Checkpoints interface {
	Checkpoint(ctx context.Context, scope sandbox.Scope, name string) (sandbox.Checkpoint, error)
	Restore(ctx context.Context, scope sandbox.Scope, name string) error
	Fork(ctx context.Context, scope sandbox.Scope, name string, to sandbox.Scope) error
	DropCheckpoint(ctx context.Context, scope sandbox.Scope, name string) error
	Checkpoints(ctx context.Context, scope sandbox.Scope) ([]sandbox.Checkpoint, error)
}

// Rewinder is what the rewind needs of the history (history.Store).
type Rewinder interface {
	TurnOf(ctx context.Context, chat history.Chat, seq int) (int, error)
	Rewind(ctx context.Context, chat history.Chat, seq int, now time.Time) (history.Chat, error)
	Redo(ctx context.Context, chat history.Chat, now time.Time) (history.Chat, error)
	Fork(ctx context.Context, from history.Chat, through int, to history.Chat, title string, now time.Time) (history.Chat, error)
	SetRewindFloor(ctx context.Context, chat history.Chat, seq int) error
}

const redoCheckpoint = "redo"

func turnCheckpoint(seq int) string { return "t" + strconv.Itoa(seq) }

// turnOfCheckpoint is the seq of a turn's checkpoint's name, or -1.
func turnOfCheckpoint(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "t"))
	if !strings.HasPrefix(name, "t") || err != nil || n < 0 {
		return -1
	}
	return n
}

// before is the newest turn checkpoint of the list taken before turn
// seq started, "" when there is none.
func before(list []sandbox.Checkpoint, seq int) string {
	best, name := -1, ""
	for _, c := range list {
		if n := turnOfCheckpoint(c.Name); n >= 0 && n <= seq && n > best {
			best, name = n, c.Name
		}
	}
	return name
}

// checkpointsOn reports whether the chats' sandboxes have checkpoints.
func (h *Handler) checkpointsOn() bool { return h.Checkpoints != nil && h.Rewinds != nil }

// checkpointTurn keeps the chat's sandbox as it is before the turn at
// seq (R1), if it has one: what a rewind to this turn restores. The
// checkpoints of turns a rewind discarded, and what redo would have
// restored, go first: the chat moved on.
func (h *Handler) checkpointTurn(ctx context.Context, app apps.App, chat history.Chat, seq int) {
	if !h.checkpointsOn() {
		return
	}
	scope := chat.Scope()
	list, err := h.Checkpoints.Checkpoints(ctx, scope)
	if errors.Is(err, sandbox.ErrNotFound) {
		return // no sandbox yet: a rewind to here empties it
	}
	if err != nil {
		h.Log.Warn("checkpoint before the turn: list", "chatId", scope.ChatID, "err", err)
		return
	}
	for _, c := range list {
		if n := turnOfCheckpoint(c.Name); n >= seq || c.Name == redoCheckpoint {
			if err := h.Checkpoints.DropCheckpoint(ctx, scope, c.Name); err != nil {
				h.Log.Warn("checkpoint before the turn: drop", "chatId", scope.ChatID, "checkpoint", c.Name, "err", err)
			}
		}
	}
	if _, err := h.Checkpoints.Checkpoint(ctx, scope, turnCheckpoint(seq)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.Log.Warn("checkpoint before the turn", "chatId", scope.ChatID, "err", err)
		return
	}
	h.retain(ctx, app, chat, list, seq)
}

// retain drops the chat's turn checkpoints past the retention of its
// app's chats (R4): all but the newest keep, and those older than the
// maximum age (never the one just taken, before turn seq). The chat then
// rewinds as far as its oldest kept one.
func (h *Handler) retain(ctx context.Context, app apps.App, chat history.Chat, list []sandbox.Checkpoint, seq int) {
	keep, age := h.retention(app)
	var turns []int
	created := map[int]time.Time{}
	for _, c := range list {
		if n := turnOfCheckpoint(c.Name); n >= 0 && n < seq {
			turns = append(turns, n)
			created[n] = c.Created
		}
	}
	slices.Sort(turns)
	dropped := false
	floor := seq // the oldest kept: the one just taken, unless older stay
	for i, n := range turns {
		// turns holds the older ones; the one before seq is kept too.
		if len(turns)-i < keep && h.Now().Sub(created[n]) <= age {
			floor = n
			break
		}
		if err := h.Checkpoints.DropCheckpoint(ctx, chat.Scope(), turnCheckpoint(n)); err != nil {
			h.Log.Warn("drop a checkpoint past the retention", "chatId", chat.ID, "checkpoint", turnCheckpoint(n), "err", err)
			return
		}
		dropped = true
	}
	// A turn before the oldest kept checkpoint has no state to go back
	// to any more (nor "empty": the sandbox may have existed then).
	if dropped && floor > chat.RewindFloor {
		if err := h.Rewinds.SetRewindFloor(ctx, chat, floor); err != nil {
			h.Log.Warn("record the chat's rewind floor", "chatId", chat.ID, "err", err)
		}
	}
}

// tooOld answers a rewind or branch to a turn whose checkpoint the
// retention dropped.
func (h *Handler) tooOld(c *gin.Context, chat history.Chat, seq int) bool {
	if seq >= chat.RewindFloor {
		return false
	}
	// Only for the message: without the app, the engine's retention.
	app, _ := h.Apps.Get(c.Request.Context(), chat.AppID)
	keep, age := h.retention(app)
	api.Error(c, http.StatusConflict, fmt.Sprintf("the sandbox's checkpoints of this chat's earlier turns were dropped (it keeps those of its last %d turns, for %s at most): it goes back to item %s/%08d at the earliest", keep, age, chat.ID, chat.RewindFloor))
	return true
}

// rewindRequest names an item of a chat: FastGPT's contentId is the
// item's dataId.
type rewindRequest struct {
	AppID     string `json:"appId"`
	ChatID    string `json:"chatId"`
	ContentID string `json:"contentId"`
	CustomUID string `json:"customUid"`
	// NewChatID names a fork's chat; empty: a new id.
	NewChatID string `json:"newChatId"`
	// Title is a fork's title, in the reader's language; empty: the
	// chat's own, marked as a branch.
	Title string `json:"title"`
}

// readRewind reads the request from the query (DELETE, as FastGPT's
// item/delete) or a JSON body.
func readRewind(c *gin.Context, needItem bool) (rewindRequest, bool) {
	var r rewindRequest
	if c.Request.Method == http.MethodDelete || c.Request.ContentLength == 0 {
		r = rewindRequest{AppID: c.Query("appId"), ChatID: c.Query("chatId"), ContentID: c.Query("contentId"), CustomUID: c.Query("customUid")}
	} else if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10), &r); err != nil {
		api.Error(c, http.StatusBadRequest, "the body must be JSON: "+err.Error())
		return r, false
	}
	if problem := files.ChatIDProblem(r.ChatID); problem != "" {
		api.Error(c, http.StatusBadRequest, "chatId: "+problem)
		return r, false
	}
	if needItem && r.ContentID == "" {
		api.Error(c, http.StatusBadRequest, "contentId is required: the dataId of the chat's item to go back to")
		return r, false
	}
	return r, true
}

// chatFor opens the caller's chat for a rewind, redo or fork: 404 for a
// chat they do not have, 409 while a run of it is in progress.
func (h *Handler) chatFor(c *gin.Context, r rewindRequest) (history.Chat, bool) {
	if !h.checkpointsOn() {
		api.Error(c, http.StatusNotImplemented, "this engine keeps no checkpoints of chats' sandboxes (FLOWBOX_CHECKPOINTS), so chats cannot be rewound or branched")
		return history.Chat{}, false
	}
	scope, ok := h.callerChat(c, r.AppID, r.ChatID, r.CustomUID)
	if !ok {
		return history.Chat{}, false
	}
	ctx := c.Request.Context()
	chat, err := h.History.Open(ctx, scope)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not read the chat; retry later")
		return history.Chat{}, false
	}
	if chat.CreatedAt.IsZero() {
		api.Error(c, http.StatusNotFound, "no chat "+strconv.Quote(scope.ChatID))
		return history.Chat{}, false
	}
	running, err := h.Stops.Running(ctx, scope)
	if err != nil {
		api.Error(c, http.StatusServiceUnavailable, "could not tell whether a run of the chat is in progress; retry in a moment")
		return history.Chat{}, false
	}
	if running {
		api.Error(c, http.StatusConflict, "a run of this chat is in progress: stop it (POST /api/v1/chat/stop) or wait for its end, then try again")
		return history.Chat{}, false
	}
	return chat, true
}

// itemSeq is the seq of the chat's item dataId ("<chatId>/<seq>").
func itemSeq(c *gin.Context, chat history.Chat, dataID string) (int, bool) {
	rest, ok := strings.CutPrefix(dataID, chat.ID+"/")
	seq, err := strconv.Atoi(rest)
	if !ok || err != nil || seq < 0 {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("contentId %q is not a dataId of chat %q (they look like %q)", dataID, chat.ID, chat.ID+"/00000002"))
		return 0, false
	}
	return seq, true
}

// sandboxErr answers a failed checkpoint operation.
func (h *Handler) sandboxErr(c *gin.Context, what string, scope sandbox.Scope, err error) {
	switch {
	case errors.Is(err, sandbox.ErrRewindBusy):
		api.Error(c, http.StatusConflict, "a command of this chat's sandbox is still running (a terminal's or a previous run's), or a file is being uploaded to it; try again when it has ended")
	case errors.Is(err, sandbox.ErrUnsupported):
		api.Error(c, http.StatusConflict, "this chat's sandbox has no checkpoints (it was made before they were turned on, or its provider has none): "+err.Error())
	default:
		h.Log.Error(what, "chatId", scope.ChatID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not "+what+"; the chat is as it was; retry later")
	}
}

// Rewind serves DELETE /api/core/chat/item/delete?appId=&chatId=&contentId=
// (FastGPT's route; also POST with a JSON body): the chat goes back to
// before the turn holding item contentId, its sandbox too. Regenerating
// an answer is its turn's rewind and the question sent again; editing a
// question, the same with the edited one. The turns set aside come back
// with Redo until the chat's next turn.
func (h *Handler) Rewind(c *gin.Context) {
	_, chat, turn, ok := h.itemTurn(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if h.tooOld(c, chat, turn) {
		return
	}
	scope := chat.Scope()
	state, err := h.rewindSandbox(ctx, scope, turn)
	if err != nil {
		h.sandboxErr(c, "rewind the chat's sandbox", scope, err)
		return
	}
	after, err := h.Rewinds.Rewind(ctx, chat, turn, h.Now())
	if err != nil {
		h.Log.Error("rewind chat", "chatId", chat.ID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not rewind the chat's history; its sandbox was rewound; retry")
		return
	}
	c.JSON(http.StatusOK, gin.H{"chatId": chat.ID, "items": after.Items, "redo": after.Redo != nil, "sandbox": state})
}

// itemTurn reads a request naming an item of the caller's chat and
// finds the turn holding it; false when it answered the client.
func (h *Handler) itemTurn(c *gin.Context) (rewindRequest, history.Chat, int, bool) {
	if !h.authorised(c) {
		return rewindRequest{}, history.Chat{}, 0, false
	}
	r, ok := readRewind(c, true)
	if !ok {
		return r, history.Chat{}, 0, false
	}
	chat, ok := h.chatFor(c, r)
	if !ok {
		return r, chat, 0, false
	}
	seq, ok := itemSeq(c, chat, r.ContentID)
	if !ok {
		return r, chat, 0, false
	}
	turn, err := h.Rewinds.TurnOf(c.Request.Context(), chat, seq)
	if errors.Is(err, history.ErrNotFound) {
		api.Error(c, http.StatusNotFound, fmt.Sprintf("chat %q has no item %q", chat.ID, r.ContentID))
		return r, chat, 0, false
	} else if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not read the chat; retry later")
		return r, chat, 0, false
	}
	return r, chat, turn, true
}

// rewindSandbox keeps the sandbox's files and the chat's (its uploads and
// intermediate files) for a redo and restores them to before turn seq. It
// says what became of them: "restored", "emptied" (neither existed before
// that turn) or "none" (neither has ever existed).
func (h *Handler) rewindSandbox(ctx context.Context, scope sandbox.Scope, seq int) (string, error) {
	list, err := h.Checkpoints.Checkpoints(ctx, scope)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(list, func(c sandbox.Checkpoint) bool { return c.Name == redoCheckpoint }) {
		if err := h.Checkpoints.DropCheckpoint(ctx, scope, redoCheckpoint); err != nil {
			return "", err
		}
	}
	if _, err := h.Checkpoints.Checkpoint(ctx, scope, redoCheckpoint); err != nil {
		return "", err
	}
	name := before(list, seq)
	if err := h.Checkpoints.Restore(ctx, scope, name); err != nil {
		return "", err
	}
	if name == "" {
		return "emptied", nil
	}
	return "restored", nil
}

// Redo serves POST /api/core/chat/item/redo {appId, chatId}: the turns
// the last rewind set aside come back, and the sandbox as it was then.
func (h *Handler) Redo(c *gin.Context) {
	if !h.authorised(c) {
		return
	}
	r, ok := readRewind(c, false)
	if !ok {
		return
	}
	chat, ok := h.chatFor(c, r)
	if !ok {
		return
	}
	if chat.Redo == nil {
		api.Error(c, http.StatusConflict, "nothing to redo: the chat was not rewound, or it went on since")
		return
	}
	ctx := c.Request.Context()
	scope := chat.Scope()
	state := "none"
	list, err := h.Checkpoints.Checkpoints(ctx, scope)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.sandboxErr(c, "redo the chat's sandbox", scope, err)
		return
	}
	if slices.ContainsFunc(list, func(c sandbox.Checkpoint) bool { return c.Name == redoCheckpoint }) {
		if err := h.Checkpoints.Restore(ctx, scope, redoCheckpoint); err != nil {
			h.sandboxErr(c, "redo the chat's sandbox", scope, err)
			return
		}
		state = "restored"
	}
	after, err := h.Rewinds.Redo(ctx, chat, h.Now())
	if err != nil {
		h.Log.Error("redo chat", "chatId", chat.ID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not put the chat's turns back; retry")
		return
	}
	c.JSON(http.StatusOK, gin.H{"chatId": chat.ID, "items": after.Items, "redo": false, "sandbox": state})
}

// Fork serves POST /api/core/chat/fork {appId, chatId, contentId[,
// newChatId]}: a new chat of the caller's with the turns up to and
// including the one holding item contentId, and a sandbox as it was
// after that turn, titled as a branch of the chat it came from, which is
// untouched.
func (h *Handler) Fork(c *gin.Context) {
	r, chat, turn, ok := h.itemTurn(c)
	if !ok {
		return
	}
	if r.NewChatID == "" {
		r.NewChatID = api.NewID()
	} else if problem := files.ChatIDProblem(r.NewChatID); problem != "" {
		api.Error(c, http.StatusBadRequest, "newChatId: "+problem)
		return
	}
	title := strings.TrimSpace(r.Title)
	if n := utf8.RuneCountInString(title); n > maxTitle || strings.ContainsFunc(title, unicode.IsControl) {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("title: at most %d characters, without control characters", maxTitle))
		return
	}
	if title == "" {
		title = branchTitle(chat.Title)
	}
	ctx := c.Request.Context()
	if h.tooOld(c, chat, turn+2) {
		return
	}
	scope := chat.Scope()
	to := sandbox.Scope{AppID: scope.AppID, UserID: scope.UserID, ChatID: r.NewChatID}
	if exists, err := h.History.Open(ctx, to); err != nil || !exists.CreatedAt.IsZero() {
		api.Error(c, http.StatusConflict, "chat "+strconv.Quote(r.NewChatID)+" exists already: name another, or leave newChatId out")
		return
	}
	// The turn's end: the next turn's start, whose checkpoint is the
	// sandbox after it; the sandbox as it is now after the last turn.
	end := turn + 2
	state, err := h.forkSandbox(ctx, scope, end, end >= chat.Items, to)
	if err != nil {
		h.sandboxErr(c, "copy the chat's sandbox", scope, err)
		return
	}
	forked, err := h.Rewinds.Fork(ctx, chat, end-1, history.Of(to), title, h.Now())
	if err != nil {
		h.Log.Error("fork chat", "chatId", chat.ID, "err", err)
		api.Error(c, http.StatusInternalServerError, "could not copy the chat's history; retry")
		return
	}
	c.JSON(http.StatusOK, gin.H{"chatId": forked.ID, "title": forked.Title, "items": forked.Items, "sandbox": state})
}

// maxTitle bounds a title a fork is given.
const maxTitle = 200

// branchMark ends a branch's title, as the chat page's Branch button
// names it.
const branchMark = " (branch)"

// branchTitle is the title of a branch of a chat titled title; a
// branch's branch is marked once.
func branchTitle(title string) string {
	if strings.HasSuffix(title, branchMark) {
		return title
	}
	return strings.TrimSpace(title + branchMark)
}

// forkSandbox gives chat to a sandbox copied from the chat's as it was
// before turn end (or now, when last): "copied", or "none" when there
// was none then.
func (h *Handler) forkSandbox(ctx context.Context, scope sandbox.Scope, end int, last bool, to sandbox.Scope) (string, error) {
	list, err := h.Checkpoints.Checkpoints(ctx, scope)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	name := before(list, end)
	if last {
		// Now: a checkpoint of its own, dropped once copied.
		name = "fork-" + api.NewID()[:12]
		if _, err := h.Checkpoints.Checkpoint(ctx, scope, name); err != nil {
			return "", err
		}
		defer func() {
			if err := h.Checkpoints.DropCheckpoint(context.WithoutCancel(ctx), scope, name); err != nil {
				h.Log.Warn("drop a fork's checkpoint", "chatId", scope.ChatID, "err", err)
			}
		}()
	}
	if name == "" {
		return "none", nil
	}
	if err := h.Checkpoints.Fork(ctx, scope, name, to); err != nil {
		return "", err
	}
	return "copied", nil
}

// retention is the retention of the app's chats' checkpoints: the
// engine's, or the app's where it set lower.
func (h *Handler) retention(app apps.App) (keep int, maxAge time.Duration) {
	keep, maxAge = h.keep(), h.maxAge()
	if app.CheckpointKeep > 0 {
		keep = min(keep, app.CheckpointKeep)
	}
	if app.CheckpointMaxAgeHours > 0 {
		maxAge = min(maxAge, time.Duration(app.CheckpointMaxAgeHours)*time.Hour)
	}
	return keep, maxAge
}

// CheckpointRetention is the engine's retention of chats' checkpoints,
// which apps may lower; on is false when it keeps none.
func (h *Handler) CheckpointRetention() (keep int, maxAge time.Duration, on bool) {
	return h.keep(), h.maxAge(), h.checkpointsOn()
}

func (h *Handler) keep() int {
	if h.CheckpointKeep > 0 {
		return h.CheckpointKeep
	}
	return 20
}

func (h *Handler) maxAge() time.Duration {
	if h.CheckpointMaxAge > 0 {
		return h.CheckpointMaxAge
	}
	return 7 * 24 * time.Hour
}

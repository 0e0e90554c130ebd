package chat

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// Chats serves an app's chats.
type Chats struct {
	Apps    api.AppReader
	Chats   api.ChatStore
	Access  *api.Access
	Deleter api.SandboxDeleter
	// Sandboxes finds the sandbox of a chat whose first turn is not
	// recorded yet (sandbox.Manager): such a chat exists, and may be
	// deleted.
	Sandboxes interface {
		Lookup(ctx context.Context, scope sandbox.Scope) (sandbox.Instance, error)
	}
}

// List answers the app's chats: all of them for its owner, admins and the
// app's keys, the caller's own for everyone else.
func (h *Chats) List(c *gin.Context) {
	ctx := c.Request.Context()
	app, err := h.Apps.Get(ctx, c.Param("appId"))
	if err != nil || !h.Access.CanUseApp(api.Caller(c), app) {
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
		return
	}
	p, _ := api.PrincipalOf(c)
	user := p.UserID
	if h.Access.ManagesChats(api.Caller(c), app) {
		user = ""
	}
	chats, err := h.Chats.List(ctx, app.ID, user, 200)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list chats; retry later")
		return
	}
	if p.Bound() {
		// An app key sees its end users' and visitors' chats only.
		chats = slices.DeleteFunc(chats, func(ch history.Chat) bool { return !api.KeyReaches(p, ch.UserID) })
	}
	if chats == nil {
		chats = []history.Chat{}
	}
	c.JSON(http.StatusOK, gin.H{"chats": chats})
}

// chat loads the chat at :chatId (of ?userId=, or for app keys
// ?customUid=; the caller's own when neither) if the caller may reach it.
func (h *Chats) chat(c *gin.Context, write bool) (history.Chat, bool) {
	ctx := c.Request.Context()
	appID, chatID := c.Param("appId"), c.Param("chatId")
	user, problem := h.Access.Whose(api.Caller(c), c.Query("userId"), c.Query("customUid"))
	if problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return history.Chat{}, false
	}
	if _, err := h.Access.ChatOwner(ctx, api.Caller(c), appID, user, chatID, write); err != nil {
		api.Error(c, http.StatusNotFound, "no chat "+strconv.Quote(chatID))
		return history.Chat{}, false
	}
	chat, err := h.Chats.Get(ctx, sandbox.Scope{AppID: appID, UserID: user, ChatID: chatID})
	if err != nil {
		api.Error(c, http.StatusNotFound, "no chat "+strconv.Quote(chatID))
		return history.Chat{}, false
	}
	return chat, true
}

// Get answers a chat with its items (?from=seq&limit=n).
func (h *Chats) Get(c *gin.Context) {
	chat, ok := h.chat(c, false)
	if !ok {
		return
	}
	from, _ := strconv.Atoi(c.DefaultQuery("from", "0"))
	limit, _ := strconv.Atoi(c.DefaultQuery("limit", "100"))
	items, err := h.Chats.Items(c.Request.Context(), chat, from, min(max(limit, 1), 500))
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not read the chat; retry later")
		return
	}
	if items == nil {
		items = []history.Item{}
	}
	c.JSON(http.StatusOK, gin.H{"chat": chat, "items": items})
}

// Rename sets a chat's title.
func (h *Chats) Rename(c *gin.Context) {
	chat, ok := h.chat(c, true)
	if !ok {
		return
	}
	var body struct {
		Title string `json:"title"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 64<<10), &body); err != nil || strings.TrimSpace(body.Title) == "" {
		api.Error(c, http.StatusBadRequest, `send {"title": "..."}`)
		return
	}
	if err := h.Chats.Rename(c.Request.Context(), chat.Scope(), strings.TrimSpace(body.Title)); err != nil {
		api.Error(c, http.StatusInternalServerError, "could not rename the chat; retry later")
		return
	}
	c.JSON(http.StatusOK, gin.H{"chatId": chat.ID, "title": strings.TrimSpace(body.Title)})
}

// Delete removes one or many chats ({"chatIds": [...]}, the caller's own
// or, with "userId" (or an app key's "customUid"), that user's): it
// records their sandboxes' deletion durably, removes the chats and
// answers at once; it never waits for the sandboxes (S8).
func (h *Chats) Delete(c *gin.Context) {
	var body struct {
		ChatIDs   []string `json:"chatIds"`
		UserID    string   `json:"userId"`
		CustomUID string   `json:"customUid"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<20), &body); err != nil || len(body.ChatIDs) == 0 || len(body.ChatIDs) > 1000 {
		api.Error(c, http.StatusBadRequest, `send {"chatIds": ["...", ...]} with 1 to 1000 ids (and "userId" for another user's chats)`)
		return
	}
	user, problem := h.Access.Whose(api.Caller(c), body.UserID, body.CustomUID)
	if problem != "" {
		api.Error(c, http.StatusBadRequest, problem)
		return
	}
	ctx := c.Request.Context()
	appID := c.Param("appId")
	chats := make([]sandbox.Scope, len(body.ChatIDs))
	for i, id := range body.ChatIDs {
		chats[i] = sandbox.Scope{AppID: appID, UserID: user, ChatID: id}
		_, err := h.Access.ChatOwner(ctx, api.Caller(c), appID, user, id, true)
		if err == nil {
			err = h.exists(ctx, chats[i])
		}
		if errors.Is(err, errNoChat) || errors.Is(err, api.ErrNoAccess) {
			// A deletion is recorded for the chat: one that does not
			// exist must not be deleted ahead of whoever makes it.
			api.Error(c, http.StatusNotFound, "no chat "+strconv.Quote(id)+" of yours in this app; nothing was deleted (GET /api/apps/"+appID+"/chats lists your chats)")
			return
		} else if err != nil {
			api.Error(c, http.StatusServiceUnavailable, "could not check that the chats exist; nothing was deleted, retry later")
			return
		}
	}
	if err := h.Deleter.DeleteChats(ctx, chats); err != nil {
		api.Error(c, http.StatusServiceUnavailable, "could not record the deletion of the chats' sandboxes; nothing was deleted, retry later")
		return
	}
	for _, chat := range chats {
		if err := h.Chats.Delete(ctx, chat); err != nil {
			api.Error(c, http.StatusInternalServerError, "the chats' sandboxes are being deleted but chat "+strconv.Quote(chat.ChatID)+" could not be; retry")
			return
		}
	}
	c.JSON(http.StatusAccepted, gin.H{"deleted": body.ChatIDs})
}

// errNoChat: the chat has neither a recorded turn nor a sandbox.
var errNoChat = errors.New("no such chat")

// exists reports errNoChat unless the chat is recorded or has a sandbox
// (its first turn still running, or files opened first).
func (h *Chats) exists(ctx context.Context, chat sandbox.Scope) error {
	_, err := h.Chats.Get(ctx, chat)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, history.ErrNotFound):
		return err
	case h.Sandboxes == nil:
		return errNoChat
	}
	_, err = h.Sandboxes.Lookup(ctx, chat)
	if errors.Is(err, sandbox.ErrNotFound) {
		return errNoChat
	}
	return err
}

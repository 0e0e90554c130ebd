package web

import (
	"context"
	"errors"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/auth"
)

// ChatGetter reads chats (history.Store).
type ChatGetter interface {
	Get(ctx context.Context, chatID string) (history.Chat, error)
}

// Access applies F3 to chats: a chat's owner and admins may read and
// change it; the app's owner may read it; the app's keys may read and
// change the chats of their app's end users (their customUids) and of its
// share links' visitors, never an account's (T5); nobody else learns it
// exists.
// A chat with no turns yet belongs to whoever starts it, if they may use
// the app (theirs, a public one, or any for an admin).
type Access struct {
	Apps  AppReader
	Chats ChatGetter
}

var _ ChatAccess = (*Access)(nil)

// CanUseApp reports whether the caller may see and chat with an app.
// Callers bound to an app (app keys, share-link visitors) may use that
// one only.
func (a *Access) CanUseApp(c *gin.Context, app apps.App) bool {
	p, ok := PrincipalOf(c)
	if ok && p.Bound() {
		return app.ID == p.AppID
	}
	return ok && (p.Admin() || app.OwnerID == p.UserID || app.Public)
}

// CanEditApp reports whether the caller may change, delete or publish an
// app. Callers bound to an app never may.
func (a *Access) CanEditApp(c *gin.Context, app apps.App) bool {
	p, ok := PrincipalOf(c)
	return ok && !p.Bound() && (p.Admin() || app.OwnerID == p.UserID)
}

// ManagesChats reports whether the caller sees every chat of an app: its
// owner, admins, and the app's keys (its programs manage their end
// users' chats).
func (a *Access) ManagesChats(c *gin.Context, app apps.App) bool {
	p, ok := PrincipalOf(c)
	return a.CanEditApp(c, app) || (ok && p.Bound() && p.LinkID == "" && p.AppID == app.ID)
}

// ChatOwner implements ChatAccess.
func (a *Access) ChatOwner(ctx context.Context, c *gin.Context, appID, chatID string, write bool) (string, error) {
	p, ok := PrincipalOf(c)
	if !ok || (p.Bound() && p.AppID != appID) {
		return "", ErrNoAccess
	}
	app, err := a.Apps.Get(ctx, appID)
	if errors.Is(err, apps.ErrNotFound) {
		return "", ErrNoAccess
	} else if err != nil {
		return "", err
	}
	chat, err := a.Chats.Get(ctx, chatID)
	switch {
	case errors.Is(err, history.ErrNotFound):
		// An app key names its end users in the chat API; a chat it has
		// not made yet has no owner to give.
		if a.CanUseApp(c, app) && !(p.Bound() && p.LinkID == "") {
			return p.UserID, nil
		}
		return "", ErrNoAccess
	case err != nil:
		return "", err
	case chat.AppID != appID:
		return "", ErrNoAccess
	case chat.UserID == p.UserID || p.Admin() || a.ManagesChats(c, app) && p.Bound() && KeyReaches(p, chat.UserID):
		return chat.UserID, nil
	case !write && app.OwnerID == p.UserID:
		return chat.UserID, nil
	}
	return "", ErrNoAccess
}

// KeyReaches reports whether an app key's caller p may reach the chats of
// userID: its app's end users ("app:<appId>:<customUid>") and share-link
// visitors (whose chats of the app are all of its links'), not accounts
// or anyone else who chats with a public app.
func KeyReaches(p auth.Principal, userID string) bool {
	return p.Bound() && p.LinkID == "" &&
		(strings.HasPrefix(userID, auth.AppKeyUser(p.AppID)+":") || strings.HasPrefix(userID, sandbox.ShareLinkPrefix))
}

package web

import (
	"context"
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/nodes/apps"
	"github.com/flowbox/flowbox/nodes/history"
)

// ChatGetter reads chats (history.Store).
type ChatGetter interface {
	Get(ctx context.Context, chatID string) (history.Chat, error)
}

// Access applies F3 to chats: a chat's owner and admins may read and
// change it; the app's owner may read it; nobody else learns it exists.
// A chat with no turns yet belongs to whoever starts it, if they may use
// the app (theirs, a public one, or any for an admin).
type Access struct {
	Apps  AppReader
	Chats ChatGetter
}

var _ ChatAccess = (*Access)(nil)

// CanUseApp reports whether the caller may see and chat with an app.
func (a *Access) CanUseApp(c *gin.Context, app apps.App) bool {
	p, ok := PrincipalOf(c)
	return ok && (p.Admin() || app.OwnerID == p.UserID || app.Public)
}

// CanEditApp reports whether the caller may change or delete an app.
func (a *Access) CanEditApp(c *gin.Context, app apps.App) bool {
	p, ok := PrincipalOf(c)
	return ok && (p.Admin() || app.OwnerID == p.UserID)
}

// ChatOwner implements ChatAccess.
func (a *Access) ChatOwner(ctx context.Context, c *gin.Context, appID, chatID string, write bool) (string, error) {
	p, ok := PrincipalOf(c)
	if !ok {
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
		if a.CanUseApp(c, app) {
			return p.UserID, nil
		}
		return "", ErrNoAccess
	case err != nil:
		return "", err
	case chat.AppID != appID:
		return "", ErrNoAccess
	case chat.UserID == p.UserID || p.Admin():
		return chat.UserID, nil
	case !write && app.OwnerID == p.UserID:
		return chat.UserID, nil
	}
	return "", ErrNoAccess
}

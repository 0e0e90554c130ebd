package api

import (
	"context"
	"errors"
	"strings"
	"unicode"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
)

// ChatGetter reads chats (history.Store).
type ChatGetter interface {
	Get(ctx context.Context, chat sandbox.Scope) (history.Chat, error)
}

// Access applies F3 to chats: a chat's owner and admins may read and
// change it; the app's owner may read it; the app's keys may read and
// change the chats of their app's end users (their customUids) and of its
// share links' visitors, never an account's (T5); nobody else learns it
// exists.
// Chat ids are scoped per app and user (T5): a request names a chat by
// its app, its chat id and, when it is not the caller's own, its user
// (Whose). A chat with no turns yet is its user's to start, if they may
// use the app (theirs, a public one, or any for an admin); nobody can take
// or pre-empt a chat id of another user's.
type Access struct {
	Apps  AppReader
	Chats ChatGetter
}

var _ ChatAccess = (*Access)(nil)

// CanUseApp reports whether the caller may see and chat with an app.
// Callers bound to an app (app keys, share-link visitors) may use that
// one only.
func (a *Access) CanUseApp(p auth.Principal, app apps.App) bool {
	ok := p.SignedIn()
	if ok && p.Bound() {
		return app.ID == p.AppID
	}
	return ok && (p.Admin() || app.OwnerID == p.UserID || app.Public)
}

// CanEditApp reports whether the caller may change, delete or publish an
// app. Callers bound to an app never may.
func (a *Access) CanEditApp(p auth.Principal, app apps.App) bool {
	return p.SignedIn() && !p.Bound() && (p.Admin() || app.OwnerID == p.UserID)
}

// ManagesChats reports whether the caller sees every chat of an app: its
// owner, admins, and the app's keys (its programs manage their end
// users' chats).
func (a *Access) ManagesChats(p auth.Principal, app apps.App) bool {
	return a.CanEditApp(p, app) || (p.SignedIn() && p.Bound() && p.LinkID == "" && p.AppID == app.ID)
}

// Whose is the user whose chat a request names: userID when it names one
// (as chat lists show it), else the caller's own. An app key's own are its
// end users: customUID names one ("api" when none), as in the chat API.
// Naming a user says whose chat is meant, nothing more: ChatOwner decides
// whether the caller may reach it. problem is the answer to a malformed
// customUid.
func (a *Access) Whose(p auth.Principal, userID, customUID string) (user, problem string) {
	switch {
	case !p.SignedIn():
		return "", ""
	case userID != "":
		return userID, ""
	case p.LinkID != "":
		return p.UserID, ""
	case p.Bound():
		if customUID == "" {
			customUID = "api"
		}
		if len(customUID) > 128 || strings.ContainsFunc(customUID, unicode.IsControl) {
			return "", "customUid must be 1 to 128 characters without control characters"
		}
		return p.UserID + ":" + customUID, ""
	}
	return p.UserID, ""
}

// ownChat reports whether userID's chats are the caller's own: their
// account's or visitor id's, or for an app key its end users'.
func ownChat(p auth.Principal, userID string) bool {
	if p.Bound() && p.LinkID == "" {
		return strings.HasPrefix(userID, auth.AppKeyUser(p.AppID)+":")
	}
	return userID == p.UserID
}

// ChatOwner implements ChatAccess: the chat of userID (Whose) in appID.
func (a *Access) ChatOwner(ctx context.Context, p auth.Principal, appID, userID, chatID string, write bool) (string, error) {
	if !p.SignedIn() || userID == "" || (p.Bound() && p.AppID != appID) {
		return "", ErrNoAccess
	}
	app, err := a.Apps.Get(ctx, appID)
	if errors.Is(err, apps.ErrNotFound) {
		return "", ErrNoAccess
	} else if err != nil {
		return "", err
	}
	_, err = a.Chats.Get(ctx, sandbox.Scope{AppID: appID, UserID: userID, ChatID: chatID})
	switch {
	case errors.Is(err, history.ErrNotFound):
		// A chat not recorded yet: the caller's own to start.
		if ownChat(p, userID) && a.CanUseApp(p, app) {
			return userID, nil
		}
		return "", ErrNoAccess
	case err != nil:
		return "", err
	case ownChat(p, userID) || p.Admin() || a.ManagesChats(p, app) && p.Bound() && KeyReaches(p, userID):
		return userID, nil
	case !write && app.OwnerID == p.UserID:
		return userID, nil
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

package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
)

// AppStore keeps apps (apps.Store).
type AppStore interface {
	AppReader
	List(ctx context.Context, owner string) ([]apps.App, error)
	Put(ctx context.Context, a apps.App, now time.Time) error
	Delete(ctx context.Context, id string) error
}

// SandboxDeleter records that chats' or an app's sandboxes must go. It
// returns once the intent is durable; the workers do the rest (S8).
type SandboxDeleter interface {
	// DeleteChats takes chats by app, user and chat id.
	DeleteChats(ctx context.Context, chats []sandbox.Scope) error
	DeleteApp(ctx context.Context, appID string) error
}

// ChatStore keeps chats (history.Store).
type ChatStore interface {
	ChatGetter
	List(ctx context.Context, appID, userID string, limit int) ([]history.Chat, error)
	Items(ctx context.Context, chat history.Chat, from, limit int) ([]history.Item, error)
	Rename(ctx context.Context, chat sandbox.Scope, title string) error
	Delete(ctx context.Context, chat sandbox.Scope) error
}

// AppReader reads apps (apps.Store).
type AppReader interface {
	Get(ctx context.Context, id string) (apps.App, error)
	// Running is the graph the app's chats run: its published version's,
	// or its draft when it has none.
	Running(ctx context.Context, a apps.App) (g nodes.Graph, versionID string, err error)
}

// NewID returns a fresh random id: 24 hex digits, as chat and item ids are.
func NewID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ChatAccess decides who may reach a chat's sandbox (F3): the chat's
// owner, the app's owner and admins. A chat is named by its app, user
// and chat id (chat ids are scoped per app and user). It returns the chat
// owner's user id,
// which names the sandbox, or ErrNoAccess, which the API answers as 404:
// whether another user's chat exists is private.
type ChatAccess interface {
	ChatOwner(ctx context.Context, p auth.Principal, appID, userID, chatID string, write bool) (ownerID string, err error)
	// Whose is the user whose chat a request names (userId, or for app
	// keys customUid), the caller when it names none; problem answers a
	// malformed one.
	Whose(p auth.Principal, userID, customUID string) (user, problem string)
}

// ErrNoAccess: no such chat, or not yours.
var ErrNoAccess = errors.New("no such chat")

package account

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/sandboxapi"
)

// Accounts manages users and their API keys (auth.Store).
type Accounts interface {
	Users(ctx context.Context) ([]auth.User, error)
	CreateUser(ctx context.Context, name, password string, role auth.Role) (auth.User, error)
	SetDisabled(ctx context.Context, id string, disabled bool) error
	SetPassword(ctx context.Context, id, password string) error
	ChangePassword(ctx context.Context, id, old, password, keepToken string) error
	Keys(ctx context.Context, userID string) ([]auth.KeyInfo, error)
	CreateKey(ctx context.Context, userID string, spec auth.KeySpec) (string, error)
	RevokeKey(ctx context.Context, userID, keyID string) error
	User(ctx context.Context, id string) (auth.User, error)
	DeleteUser(ctx context.Context, id string) error
	CreateInvitedUser(ctx context.Context, name string, role auth.Role) (auth.User, auth.PasswordLink, error)
	IssuePasswordLink(ctx context.Context, id string) (auth.PasswordLink, error)
	PasswordLinkUser(ctx context.Context, token string) (auth.User, time.Time, error)
	UsePasswordLink(ctx context.Context, token, password string) (auth.User, error)
}

// OwnedApps lists and changes the apps a user owns (apps.Store).
type OwnedApps interface {
	List(ctx context.Context, owner string) ([]apps.App, error)
	Get(ctx context.Context, id string) (apps.App, error)
	Put(ctx context.Context, a apps.App, now time.Time) error
	Delete(ctx context.Context, id string) error
}

// UserChats finds and removes a user's chats (history.Store).
type UserChats interface {
	ByUser(ctx context.Context, userID string) ([]history.Chat, error)
	Delete(ctx context.Context, chat sandbox.Scope) error
}

// Users serves the admins' user management (/admin/api/users) and
// each user's own password and API keys (/api/me/password, /api/keys).
type Users struct {
	Accounts Accounts
	// Apps, Chats and Deleter serve the deletion of a user: their apps
	// are transferred or deleted, their chats deleted with their
	// sandboxes through the workers.
	Apps    OwnedApps
	Chats   UserChats
	Deleter api.SandboxDeleter
	// Sessions are their sandbox service API sessions, deleted with them.
	Sessions sandboxapi.SessionStore
	// Publishing moves an app's keys and share links to its new owner
	// when the apps are transferred; without it they stop with the
	// deleted account (auth.Store.Active).
	Publishing AppTransfer
	Now        func() time.Time
}

// AppTransfer hands an app's keys and share links to a new owner.
type AppTransfer interface {
	TransferApp(ctx context.Context, appID, to string) error
}

// List answers every user.
func (h *Users) List(c *gin.Context) {
	users, err := h.Accounts.Users(c.Request.Context())
	if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	if users == nil {
		users = []auth.User{}
	}
	c.JSON(http.StatusOK, gin.H{"users": users})
}

// Create adds a user ({"name", "password", "role"}; role user unless
// "admin") and answers the user. With {"invite": true} instead of a
// password, the user gets a one-time set-password link, answered once:
// {"user", "setPasswordUrl", "expiresAt"}.
func (h *Users) Create(c *gin.Context) {
	var body struct {
		Name     string    `json:"name"`
		Password string    `json:"password"`
		Role     auth.Role `json:"role"`
		Invite   bool      `json:"invite"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"name": "...", "password": "...", "role": "user" or "admin"}, or "invite": true instead of a password`)
		return
	}
	if body.Role == "" {
		body.Role = auth.RoleUser
	}
	if body.Invite {
		if body.Password != "" {
			api.Error(c, http.StatusBadRequest, `send either a password or "invite": true, not both`)
			return
		}
		u, link, err := h.Accounts.CreateInvitedUser(c.Request.Context(), body.Name, body.Role)
		if err != nil {
			api.Fail(c, err, "could not change the accounts")
			return
		}
		c.JSON(http.StatusCreated, gin.H{"user": u, "setPasswordUrl": SetPasswordPath(link.Token), "expiresAt": link.ExpiresAt})
		return
	}
	u, err := h.Accounts.CreateUser(c.Request.Context(), body.Name, body.Password, body.Role)
	if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusCreated, u)
}

// Disable and Enable switch an account off and on; a disabled user's
// sessions end and their keys are refused at once.
func (h *Users) Disable(c *gin.Context) { h.setDisabled(c, true) }
func (h *Users) Enable(c *gin.Context)  { h.setDisabled(c, false) }

func (h *Users) setDisabled(c *gin.Context, disabled bool) {
	id := c.Param("userId")
	if p, ok := api.PrincipalOf(c); ok && p.UserID == id && disabled {
		api.Error(c, http.StatusConflict, "you cannot disable your own account; ask another admin")
		return
	}
	if err := h.Accounts.SetDisabled(c.Request.Context(), id, disabled); err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "disabled": disabled})
}

// ResetPassword sets a user's password ({"password"}) and ends all their
// sessions. With {"invite": true} it issues a one-time set-password link
// instead ({"id", "setPasswordUrl", "expiresAt"}, answered once), which
// replaces any earlier link; the password and sessions stay until the
// link is used.
func (h *Users) ResetPassword(c *gin.Context) {
	var body struct {
		Password string `json:"password"`
		Invite   bool   `json:"invite"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"password": "..."} or {"invite": true}`)
		return
	}
	if body.Invite {
		if body.Password != "" {
			api.Error(c, http.StatusBadRequest, `send either a password or "invite": true, not both`)
			return
		}
		link, err := h.Accounts.IssuePasswordLink(c.Request.Context(), c.Param("userId"))
		if err != nil {
			api.Fail(c, err, "could not change the accounts")
			return
		}
		c.JSON(http.StatusOK, gin.H{"id": link.UserID, "setPasswordUrl": SetPasswordPath(link.Token), "expiresAt": link.ExpiresAt})
		return
	}
	if err := h.Accounts.SetPassword(c.Request.Context(), c.Param("userId"), body.Password); err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": c.Param("userId"), "passwordReset": true})
}

// ChangePassword is the caller's own change ({"oldPassword",
// "newPassword"}); every other session of theirs ends.
func (h *Users) ChangePassword(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	var body struct {
		Old string `json:"oldPassword"`
		New string `json:"newPassword"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"oldPassword": "...", "newPassword": "..."}`)
		return
	}
	keep, _ := c.Cookie(api.SessionCookie)
	err := h.Accounts.ChangePassword(c.Request.Context(), p.UserID, body.Old, body.New, keep)
	if errors.Is(err, auth.ErrBadCredentials) {
		api.Error(c, http.StatusForbidden, "the old password is wrong")
		return
	} else if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusOK, gin.H{"passwordChanged": true})
}

// Keys lists the caller's API keys: name, prefix and last use, never the
// secret.
func (h *Users) Keys(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	keys, err := h.Accounts.Keys(c.Request.Context(), p.UserID)
	if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	if keys == nil {
		keys = []auth.KeyInfo{}
	}
	c.JSON(http.StatusOK, gin.H{"keys": keys})
}

// CreateKey makes a key for the caller ({"name", "expiresAt" (RFC 3339,
// optional), "ratePerMinute" (optional)}); the answer is the only time
// the secret is shown.
func (h *Users) CreateKey(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	var body struct {
		Name          string    `json:"name"`
		ExpiresAt     time.Time `json:"expiresAt"`
		RatePerMinute int       `json:"ratePerMinute"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"name": "...", "expiresAt": "2027-01-31T00:00:00Z" (optional), "ratePerMinute": 60 (optional)}: `+err.Error())
		return
	}
	key, err := h.Accounts.CreateKey(c.Request.Context(), p.UserID, auth.KeySpec{Name: body.Name, ExpiresAt: body.ExpiresAt, RatePerMinute: body.RatePerMinute})
	if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusCreated, gin.H{"key": key, "name": strings.TrimSpace(body.Name),
		"note": "this is the only time the key is shown; keep it somewhere safe"})
}

// RevokeKey deletes one of the caller's keys.
func (h *Users) RevokeKey(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	if err := h.Accounts.RevokeKey(c.Request.Context(), p.UserID, c.Param("keyId")); err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": c.Param("keyId")})
}

// Delete removes a user (DELETE /admin/api/users/:userId). What they own
// is handled explicitly: the apps they own need ?apps=transfer&to=USER_ID
// (another user becomes their owner) or ?apps=delete (deleted with their
// sandboxes); their chats in any app are deleted with their sandboxes.
// Then the account, its sessions and keys go.
func (h *Users) Delete(c *gin.Context) {
	ctx := c.Request.Context()
	id := c.Param("userId")
	if p, ok := api.PrincipalOf(c); ok && p.UserID == id {
		api.Error(c, http.StatusConflict, "you cannot delete your own account; ask another admin")
		return
	}
	if _, err := h.Accounts.User(ctx, id); err != nil {
		if errors.Is(err, auth.ErrBadCredentials) {
			err = auth.ErrNotFound
		}
		api.Fail(c, err, "could not change the accounts")
		return
	}
	owned, err := h.Apps.List(ctx, id)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list the user's apps; nothing was deleted, retry later")
		return
	}
	mode, to := c.Query("apps"), c.Query("to")
	if len(owned) > 0 {
		switch mode {
		case "transfer":
			if to == id {
				api.Error(c, http.StatusBadRequest, "transfer the apps to another user than the one being deleted")
				return
			}
			if _, err := h.Accounts.User(ctx, to); err != nil {
				api.Error(c, http.StatusBadRequest, fmt.Sprintf("no user %q to transfer the apps to", to))
				return
			}
		case "delete":
		default:
			api.Error(c, http.StatusConflict, fmt.Sprintf("%s owns %d app(s): add ?apps=transfer&to=USER_ID to give them to another user, or ?apps=delete to delete them with their sandboxes", id, len(owned)))
			return
		}
	}
	var done []string
	for _, a := range owned {
		if mode == "transfer" {
			app, err := h.Apps.Get(ctx, a.ID)
			if err == nil {
				app.OwnerID = to
				err = h.Apps.Put(ctx, app, h.Now())
			}
			if err == nil && h.Publishing != nil {
				// The keys and links go with the app, explicitly.
				err = h.Publishing.TransferApp(ctx, a.ID, to)
			}
			if err != nil {
				api.Error(c, http.StatusInternalServerError, fmt.Sprintf("transferred %v, but not app %s; nothing else changed, retry", done, a.ID))
				return
			}
		} else {
			if err := h.Deleter.DeleteApp(ctx, a.ID); err != nil {
				api.Error(c, http.StatusServiceUnavailable, fmt.Sprintf("deleted %v, but could not record the deletion of app %s's sandboxes; retry later", done, a.ID))
				return
			}
			if err := h.Apps.Delete(ctx, a.ID); err != nil {
				api.Error(c, http.StatusInternalServerError, fmt.Sprintf("app %s's sandboxes are being deleted but the app could not be; retry", a.ID))
				return
			}
		}
		done = append(done, a.ID)
	}
	chats, err := h.Chats.ByUser(ctx, id)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list the user's chats; retry later")
		return
	}
	if len(chats) > 0 {
		scopes := make([]sandbox.Scope, len(chats))
		for i, ch := range chats {
			scopes[i] = ch.Scope()
		}
		if err := h.Deleter.DeleteChats(ctx, scopes); err != nil {
			api.Error(c, http.StatusServiceUnavailable, "could not record the deletion of the user's sandboxes; retry later")
			return
		}
		for _, chat := range scopes {
			if err := h.Chats.Delete(ctx, chat); err != nil {
				api.Error(c, http.StatusInternalServerError, "the user's sandboxes are being deleted but a chat could not be; retry")
				return
			}
		}
	}
	if h.Sessions != nil {
		// Their service API sessions go the chats' way: the deletion
		// tasks delete the sandboxes, then the records.
		list, err := h.Sessions.List(ctx, id, nil)
		if err != nil {
			api.Error(c, http.StatusInternalServerError, "could not list the user's sandbox sessions; retry later")
			return
		}
		for _, s := range list {
			if err := h.Deleter.DeleteChats(ctx, []sandbox.Scope{s.Scope()}); err != nil {
				api.Error(c, http.StatusServiceUnavailable, "could not record the deletion of the user's sandbox sessions; retry later")
				return
			}
		}
	}
	if err := h.Accounts.DeleteUser(ctx, id); err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	if done == nil {
		done = []string{}
	}
	c.JSON(http.StatusOK, gin.H{"deleted": id, "apps": done, "appsWere": mode, "chatsDeleted": len(chats)})
}

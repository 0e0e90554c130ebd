package visitor

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/ui"
)

// VisitorLinks is what the visitors' side needs of share links
// (share.Store).
type Links interface {
	Get(ctx context.Context, id string) (share.Link, error)
	NewVisitor(ctx context.Context, linkID, uid string) (string, share.Visitor, error)
	Visitor(ctx context.Context, linkID, token string) (share.Visitor, error)
	Identify(ctx context.Context, l share.Link, token string) (string, error)
	TakeRun(ctx context.Context, l share.Link) error
}

// Cookie holds a share-link visitor's session token; its path is
// the link's, so each link has its own.
const Cookie = "flowbox_visitor"

// Handler serves share links' visitors: the pages under
// /share/:linkId and the chat and file APIs under /share/:linkId/api,
// which are the signed-in users' handlers with the visitor as caller.
type Handler struct {
	Links Links
	Apps  api.AppReader
	Chats api.ChatStore
	UI    *ui.UI
	// Secure marks the visitor cookie Secure (HTTPS deployments).
	Secure bool
	// Limits holds each visitor's bucket of their link's rate.
	Limits *api.RateLimiter
	// HookLimits bounds the identity-hook calls visitors cause, per link
	// and per client address (see hookAllowed); nil: a limiter of
	// HookLimits' defaults.
	HookLimits *api.RateLimiter
	// Log receives why an identity hook failed, which visitors are not
	// told; default slog.Default().
	Log *slog.Logger
	// Creators, when set, says whether a link's creator is an enabled
	// account (auth.Store.Active): a link stops with its creator.
	Creators interface {
		Active(ctx context.Context, id string) error
	}
	Now func() time.Time
}

// shareError answers a refusal on a page (text) or the API (JSON).
func shareError(c *gin.Context, forAPI bool, status int, msg string) {
	if forAPI {
		api.Error(c, status, msg)
		return
	}
	c.Header("Content-Type", "text/plain; charset=utf-8")
	c.Header("X-Content-Type-Options", "nosniff")
	c.String(status, msg+"\n")
	c.Abort()
}

// Gate identifies a link's visitor. The link must exist and not have
// expired; a visitor without a session gets one on the link's page (from
// the identity hook when the link has one), and is refused on its API. API
// changes need the visitor's CSRF token, and the link's rate applies.
func (h *Handler) Gate(forAPI bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		link, err := h.Links.Get(ctx, c.Param("linkId"))
		switch {
		case errors.Is(err, share.ErrNotFound):
			shareError(c, forAPI, http.StatusNotFound, "This share link does not exist or was revoked; ask whoever shared it for a new one.")
			return
		case errors.Is(err, share.ErrExpired):
			shareError(c, forAPI, http.StatusGone, fmt.Sprintf("This share link expired on %s; ask whoever shared it for a new one.", link.ExpiresAt.UTC().Format("2006-01-02 15:04 MST")))
			return
		case err != nil:
			shareError(c, forAPI, http.StatusServiceUnavailable, "Could not open the share link; retry in a moment.")
			return
		}
		if h.Creators != nil {
			if err := h.Creators.Active(ctx, link.CreatedBy); errors.Is(err, auth.ErrBadCredentials) {
				shareError(c, forAPI, http.StatusNotFound, "This share link no longer works: the account that shared it was disabled or deleted. Ask the app's owner for a new one.")
				return
			} else if err != nil {
				shareError(c, forAPI, http.StatusServiceUnavailable, "Could not open the share link; retry in a moment.")
				return
			}
		}
		token, _ := c.Cookie(Cookie)
		v, err := h.Links.Visitor(ctx, link.ID, token)
		hookToken := c.Query("token")
		if !forAPI && link.HookURL != "" && hookToken != "" && err == nil && c.Request.Method == http.MethodGet {
			// A token over a session: the visitor chooses, with a POST
			// of the session's own (a link from elsewhere must not
			// swap who this browser chats as).
			h.askSwitch(c, link, v, hookToken)
			return
		}
		switch {
		case errors.Is(err, share.ErrNoVisitor) && forAPI:
			shareError(c, forAPI, http.StatusUnauthorized, "No visitor session for this link (it ended, or cookies are off); open the share link again.")
			return
		case errors.Is(err, share.ErrNoVisitor):
			if !h.welcome(c, link, hookToken) {
				return
			}
			// Come back without the token in the address bar and history.
			c.Redirect(http.StatusSeeOther, c.Request.URL.Path)
			c.Abort()
			return
		case err != nil:
			shareError(c, forAPI, http.StatusServiceUnavailable, "Could not check your visitor session; retry in a moment.")
			return
		}
		c.Set(api.PrincipalKey, auth.Principal{UserID: share.VisitorUser(link.ID, v.UID), Name: link.Name, Role: auth.RoleUser,
			AppID: link.AppID, LinkID: link.ID})
		c.Set(api.CSRFKey, v.CSRF)
		c.Set(api.LinkKey, link)
		if !forAPI {
			c.Next()
			return
		}
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if got := c.GetHeader(api.CSRFHeader); got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) != 1 {
				api.Error(c, http.StatusForbidden, api.ErrNoCSRF.Error())
				return
			}
		}
		if n := link.RatePerMinute; n > 0 && h.Limits != nil {
			if ok, wait := h.Limits.AllowAt(link.ID+"/"+v.UID, time.Minute/time.Duration(n), n); !ok {
				api.TooMany(c, &api.RateLimited{Wait: wait, What: fmt.Sprintf("this share link allows each visitor %d requests a minute", n)})
				return
			}
		}
		c.Next()
	}
}

// welcome opens a visitor session: for the identity hook's uid of the
// token when the link has a hook, else for a new visitor. It answers the
// client itself when it cannot.
func (h *Handler) welcome(c *gin.Context, link share.Link, token string) bool {
	ctx := c.Request.Context()
	uid := ""
	if link.HookURL != "" {
		if token == "" {
			shareError(c, false, http.StatusUnauthorized, "This share link is opened from the site that shared it: its address there carries your token (?token=...).")
			return false
		}
		if !h.hookAllowed(c, link) {
			return false
		}
		var err error
		uid, err = h.Links.Identify(ctx, link, token)
		if err != nil {
			h.hookFailed(c, link, err)
			return false
		}
	}
	sessionToken, _, err := h.Links.NewVisitor(ctx, link.ID, uid)
	if err != nil {
		shareError(c, false, http.StatusServiceUnavailable, "Could not open a visitor session; retry in a moment.")
		return false
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: Cookie, Value: sessionToken, Path: link.URL(),
		MaxAge: 30 * 24 * 3600, HttpOnly: true, Secure: h.Secure, SameSite: http.SameSiteLaxMode})
	return true
}

// app reads the link's app for a page.
func (h *Handler) app(c *gin.Context) (apps.App, share.Link, bool) {
	link, _ := api.LinkOf(c)
	a, err := h.Apps.Get(c.Request.Context(), link.AppID)
	if err != nil {
		shareError(c, false, http.StatusNotFound, "The app of this share link was deleted.")
		return apps.App{}, link, false
	}
	return a, link, true
}

// Home lists the visitor's chats of the link's app, with a new one.
func (h *Handler) Home(c *gin.Context) {
	a, link, ok := h.app(c)
	if !ok {
		return
	}
	p, _ := api.PrincipalOf(c)
	chats, err := h.Chats.List(c.Request.Context(), a.ID, p.UserID, 200)
	if err != nil {
		shareError(c, false, http.StatusInternalServerError, "Could not list your chats; retry in a moment.")
		return
	}
	h.UI.Render(c, "chats", a.Name, ui.ChatsPage(a, chats, link.URL(), p.UserID, true))
}

// Chat is a visitor's chat page: the signed-in users' page, with the
// link's choices of tool cards and files.
func (h *Handler) Chat(c *gin.Context) {
	a, link, ok := h.app(c)
	if !ok {
		return
	}
	if c.Param("chatId") == "new" {
		c.Redirect(http.StatusSeeOther, link.URL()+"/chat/"+api.NewID())
		return
	}
	h.UI.ChatPage(c, a, ui.ChatView{Base: link.URL(), Visitor: true, ShowTools: link.ShowTools,
		Files: string(link.Files), Terminal: link.Terminal})
}

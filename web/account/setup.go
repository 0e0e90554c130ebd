package account

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/ui"
)

// SetPasswordPath is the page of a one-time set-password link. Links are
// handed out relative: the page that shows one (or the operator) puts the
// server's origin in front.
func SetPasswordPath(token string) string { return "/set-password/" + url.PathEscape(token) }

// passwordLinkError answers why a set-password link cannot be used; each
// answer tells the person what to do next.
func passwordLinkError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, auth.ErrLinkExpired):
		api.Error(c, http.StatusGone, "this link has expired; ask an admin for a new one")
	case errors.Is(err, auth.ErrLinkInvalid):
		api.Error(c, http.StatusNotFound, "this link does not work: it was used already, replaced by a newer one, or mistyped; ask an admin for a new one")
	case errors.Is(err, auth.ErrDisabled):
		api.Error(c, http.StatusForbidden, "this account is disabled; ask an admin to enable it")
	case errors.Is(err, auth.ErrInvalid):
		api.Error(c, http.StatusBadRequest, err.Error())
	default:
		api.Error(c, http.StatusServiceUnavailable, "could not set the password; retry later")
	}
}

// SetPassword uses a set-password link ({"token", "password"}): the
// password is set, every session of the account ends and the person
// signs in with the new password. The link works once.
func (h *Users) SetPassword(c *gin.Context) {
	var body struct {
		Token    string `json:"token"`
		Password string `json:"password"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"token": "...", "password": "..."}`)
		return
	}
	u, err := h.Accounts.UsePasswordLink(c.Request.Context(), body.Token, body.Password)
	if err != nil {
		passwordLinkError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"name": u.Name, "passwordSet": true, "signIn": "/login"})
}

// passwordPage is what the set-password page shows: the form for Name,
// or why the link does not work.
type passwordPage struct {
	Token     string    `json:"token,omitempty"`
	Name      string    `json:"name,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Problem is the label of the reason the link cannot be used.
	Problem string `json:"problem,omitempty"`
}

// SetPasswordPage is the page of a set-password link: "choose your
// password" for the link's account, or a page saying why the link does
// not work and to ask an admin for a new one. Opening it does not use
// the link.
func (h *Users) SetPasswordPage(pages *ui.UI) gin.HandlerFunc {
	return func(c *gin.Context) {
		token := c.Param("token")
		u, expires, err := h.Accounts.PasswordLinkUser(c.Request.Context(), token)
		l := ui.Lang(c)
		c.Header("Referrer-Policy", "no-referrer") // the token is in the address
		data, status := passwordPage{Token: token, Name: u.Name, ExpiresAt: expires}, http.StatusOK
		switch {
		case err == nil:
		case errors.Is(err, auth.ErrLinkExpired):
			data, status = passwordPage{Problem: "linkExpired"}, http.StatusGone
		case errors.Is(err, auth.ErrLinkInvalid):
			data, status = passwordPage{Problem: "linkInvalid"}, http.StatusNotFound
		case errors.Is(err, auth.ErrDisabled):
			data, status = passwordPage{Problem: "linkDisabled"}, http.StatusForbidden
		default:
			c.String(http.StatusServiceUnavailable, "could not read the link; retry later")
			return
		}
		pages.RenderStatus(c, status, "setpassword", ui.Translate(l, "setPasswordTitle"), data)
	}
}

package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/web/auth"
)

// Sessions is the account store the session routes use (auth.Store).
type Sessions interface {
	Login(ctx context.Context, name, password string) (token, csrf string, u auth.User, err error)
	Logout(ctx context.Context, token string) error
}

// SessionHandler serves sign-in, sign-out and "who am I".
type SessionHandler struct {
	Accounts Sessions
	// Secure marks the cookie HTTPS-only; on unless serving plain HTTP on
	// a development machine.
	Secure bool
	TTL    time.Duration
}

// Login checks a name and password ({"name", "password"}) and sets the
// session cookie; the answer carries the CSRF token that state-changing
// requests must send in X-CSRF-Token.
func (h *SessionHandler) Login(c *gin.Context) {
	var body struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	}
	if err := decodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		apiError(c, http.StatusBadRequest, `send {"name": "...", "password": "..."}`)
		return
	}
	token, csrf, u, err := h.Accounts.Login(c.Request.Context(), body.Name, body.Password)
	if errors.Is(err, auth.ErrBadCredentials) {
		apiError(c, http.StatusUnauthorized, "wrong user name or password")
		return
	} else if err != nil {
		apiError(c, http.StatusServiceUnavailable, "could not sign you in; retry later")
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: h.Secure, SameSite: http.SameSiteLaxMode, MaxAge: int(h.TTL.Seconds())})
	c.JSON(http.StatusOK, gin.H{"user": u, "csrfToken": csrf})
}

// Logout ends the session and clears the cookie.
func (h *SessionHandler) Logout(c *gin.Context) {
	if token, err := c.Cookie(SessionCookie); err == nil {
		_ = h.Accounts.Logout(c.Request.Context(), token)
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: h.Secure, MaxAge: -1})
	c.JSON(http.StatusOK, gin.H{"signedOut": true})
}

// Me answers the caller and, for sessions, the CSRF token.
func (h *SessionHandler) Me(c *gin.Context) {
	p, _ := PrincipalOf(c)
	csrf, _ := c.Get(csrfKey)
	c.JSON(http.StatusOK, gin.H{"id": p.UserID, "name": p.Name, "role": p.Role, "csrfToken": csrf})
}

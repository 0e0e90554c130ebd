package web

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/auth"
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
	// AccountLimit throttles failed sign-ins per account name, whatever
	// address they come from (the router limits each address too);
	// AccountBurst failures, then one every 6 seconds. A success clears
	// the name's count. Nil: no per-account limit.
	AccountLimit *RateLimiter
	AccountBurst int
}

// accountEvery is the pace of sign-in attempts on one account name once
// its burst of failures is used.
const accountEvery = 6 * time.Second

// crossSite refuses a sign-in a page of another site makes the browser
// send: with an Origin or Sec-Fetch-Site of another origin, or as a form
// or text body (which a page elsewhere can post without asking).
func crossSite(r *http.Request) string {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		return `sign in with a JSON body (Content-Type: application/json): {"name": "...", "password": "..."}`
	}
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		return "this sign-in came from a page of another site; open this engine's own sign-in page"
	}
	return ""
}

// Login checks a name and password ({"name", "password"}) and sets the
// session cookie; the answer carries the CSRF token that state-changing
// requests must send in X-CSRF-Token.
func (h *SessionHandler) Login(c *gin.Context) {
	if msg := crossSite(c.Request); msg != "" {
		apiError(c, http.StatusForbidden, msg)
		return
	}
	var body struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	}
	if err := decodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		apiError(c, http.StatusBadRequest, `send {"name": "...", "password": "..."}`)
		return
	}
	account := "account:" + strings.ToLower(strings.TrimSpace(body.Name))
	if h.AccountLimit != nil {
		if ok, wait := h.AccountLimit.allowAt(account, accountEvery, max(h.AccountBurst, 1)); !ok {
			tooMany(c, &rateLimited{wait: wait, what: "too many failed sign-ins for this account"})
			return
		}
	}
	token, csrf, u, err := h.Accounts.Login(c.Request.Context(), body.Name, body.Password)
	if err == nil && h.AccountLimit != nil {
		h.AccountLimit.forget(account)
	}
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

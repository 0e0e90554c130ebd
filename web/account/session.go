package account

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/web/api"
)

// Sessions is the account store the session routes use (auth.Store).
type SessionStore interface {
	Login(ctx context.Context, name, password string) (token, csrf string, u auth.User, err error)
	Logout(ctx context.Context, token string) error
}

// Sessions serves sign-in, sign-out and "who am I".
type Sessions struct {
	Accounts SessionStore
	// Secure marks the cookie HTTPS-only; on unless serving plain HTTP on
	// a development machine.
	Secure bool
	TTL    time.Duration
	// AccountLimit throttles failed sign-ins per account name, whatever
	// address they come from (the router limits each address too);
	// AccountBurst failures, then one every 6 seconds. A success clears
	// the name's count. Nil: no per-account limit.
	AccountLimit *api.RateLimiter
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
func (h *Sessions) Login(c *gin.Context) {
	if msg := crossSite(c.Request); msg != "" {
		api.Error(c, http.StatusForbidden, msg)
		return
	}
	var body struct {
		Name     string `json:"name"`
		Password string `json:"password"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"name": "...", "password": "..."}`)
		return
	}
	account := "account:" + strings.ToLower(strings.TrimSpace(body.Name))
	if h.AccountLimit != nil {
		if ok, wait := h.AccountLimit.AllowAt(account, accountEvery, max(h.AccountBurst, 1)); !ok {
			api.TooMany(c, &api.RateLimited{Wait: wait, What: "too many failed sign-ins for this account"})
			return
		}
	}
	token, csrf, u, err := h.Accounts.Login(c.Request.Context(), body.Name, body.Password)
	if err == nil && h.AccountLimit != nil {
		h.AccountLimit.Forget(account)
	}
	if errors.Is(err, auth.ErrBadCredentials) {
		api.Error(c, http.StatusUnauthorized, "wrong user name or password")
		return
	} else if err != nil {
		api.Error(c, http.StatusServiceUnavailable, "could not sign you in; retry later")
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: api.SessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: h.Secure, SameSite: http.SameSiteLaxMode, MaxAge: int(h.TTL.Seconds())})
	c.JSON(http.StatusOK, gin.H{"user": u, "csrfToken": csrf})
}

// Logout ends the session and clears the cookie.
func (h *Sessions) Logout(c *gin.Context) {
	if token, err := c.Cookie(api.SessionCookie); err == nil {
		_ = h.Accounts.Logout(c.Request.Context(), token)
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: api.SessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: h.Secure, MaxAge: -1})
	c.JSON(http.StatusOK, gin.H{"signedOut": true})
}

// Me answers the caller and, for sessions, the CSRF token.
func (h *Sessions) Me(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	csrf, _ := c.Get(api.CSRFKey)
	c.JSON(http.StatusOK, gin.H{"id": p.UserID, "name": p.Name, "role": p.Role, "csrfToken": csrf})
}

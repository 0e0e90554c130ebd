package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/web/api"
)

// Gate lets through admins and operators with the admin token
// (FLOWBOX_ADMIN_TOKEN): the token as the password of HTTP basic auth,
// which browsers prompt for (any user name), or as "Authorization: Bearer
// <token>"; or an admin's own credentials as Authenticate reads them (an
// API key, or a session whose CSRF token a change must carry when
// requireCSRF). Whatever the credentials, a change that a browser sends
// from another site is refused: basic auth and cookies ride along on
// such requests. With no token configured, only admins get in.
func Gate(a api.Authenticator, token string, requireCSRF bool) gin.HandlerFunc {
	want := sha256.Sum256([]byte(token))
	crossOrigin := http.NewCrossOriginProtection()
	return func(c *gin.Context) {
		if err := crossOrigin.Check(c.Request); err != nil {
			api.Error(c, http.StatusForbidden, "a change to the admin pages must come from this site's own pages")
			return
		}
		_, got, basic := c.Request.BasicAuth()
		presented := basic
		if bearer, found := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); found {
			got, presented = strings.TrimSpace(bearer), true
		}
		if presented && token != "" {
			// Hashes compare in constant time whatever the lengths.
			sum := sha256.Sum256([]byte(got))
			if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				c.Next()
				return
			}
		}
		if !basic && a != nil {
			// An admin's API key or session. Bad ones fall through to the
			// challenge below, so that a browser asks for the token.
			err := api.Identify(c, a, requireCSRF)
			var limited *api.RateLimited
			switch {
			case errors.As(err, &limited):
				api.TooMany(c, limited)
				return
			case errors.Is(err, api.ErrNoCSRF):
				api.Error(c, http.StatusForbidden, err.Error())
				return
			case err != nil && !errors.Is(err, auth.ErrBadCredentials):
				api.CredentialError(c, err)
				return
			}
			if p, ok := api.PrincipalOf(c); ok {
				if !p.Admin() {
					api.Error(c, http.StatusForbidden, "this needs an admin")
					return
				}
				c.Next()
				return
			}
		}
		if token == "" {
			api.Error(c, http.StatusUnauthorized, "sign in as an admin (the admin token is off: set FLOWBOX_ADMIN_TOKEN to let operators in without an account)")
			return
		}
		c.Header("WWW-Authenticate", `Basic realm="Flowbox admin", charset="UTF-8"`)
		api.Error(c, http.StatusUnauthorized, "sign in as an admin, or give the admin token (FLOWBOX_ADMIN_TOKEN) as the password of HTTP basic auth or as Authorization: Bearer <token>")
	}
}

package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// requireAdminToken lets through the requests that carry the admin token:
// as the password of HTTP basic auth, which browsers prompt for (any user
// name), or as "Authorization: Bearer <token>". With no token configured
// it refuses every request: the admin pages are never served
// unauthenticated.
func requireAdminToken(token string) gin.HandlerFunc {
	want := sha256.Sum256([]byte(token))
	return func(c *gin.Context) {
		if token == "" {
			apiError(c, http.StatusForbidden, "the admin pages are off: set FLOWBOX_ADMIN_TOKEN to turn them on")
			return
		}
		got, ok := "", false
		if _, pw, basic := c.Request.BasicAuth(); basic {
			got, ok = pw, true
		} else if bearer, found := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); found {
			got, ok = strings.TrimSpace(bearer), true
		}
		// Hashes compare in constant time whatever the lengths.
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			c.Header("WWW-Authenticate", `Basic realm="Flowbox admin", charset="UTF-8"`)
			apiError(c, http.StatusUnauthorized, "the admin pages need the admin token (FLOWBOX_ADMIN_TOKEN): as the password of HTTP basic auth, or Authorization: Bearer <token>")
			return
		}
		c.Next()
	}
}

// adminGate lets signed-in admins through (their session cookie is
// SameSite=Lax, so other sites cannot ride on it) and everyone else only
// with the admin token.
func adminGate(a Authenticator, token string) gin.HandlerFunc {
	tokenGate := requireAdminToken(token)
	return func(c *gin.Context) {
		if cookie, err := c.Cookie(SessionCookie); err == nil && cookie != "" && a != nil {
			if p, csrf, err := a.Session(c.Request.Context(), cookie); err == nil && p.Admin() {
				c.Set(principalKey, p)
				c.Set("flowbox.csrf", csrf)
				c.Next()
				return
			}
		}
		tokenGate(c)
	}
}

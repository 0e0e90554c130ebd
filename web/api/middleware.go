package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/flowbox/flowbox/auth"
)

// SessionCookie holds a browser session's token.
const SessionCookie = "flowbox_session"

// CSRFHeader must carry the session's CSRF token on every state-changing
// request made with a session cookie.
const CSRFHeader = "X-CSRF-Token"

// Authenticator resolves credentials (auth.Store).
type Authenticator interface {
	Session(ctx context.Context, token string) (auth.Principal, string, error)
	APIKey(ctx context.Context, key string) (auth.Principal, error)
}

// Keys of what Authenticate learns, in the gin context.
const (
	PrincipalKey = "flowbox.principal"
	CSRFKey      = "flowbox.csrf"
)

// PrincipalOf returns the authenticated caller, if any.
func PrincipalOf(c *gin.Context) (auth.Principal, bool) {
	v, ok := c.Get(PrincipalKey)
	if !ok {
		return auth.Principal{}, false
	}
	p, ok := v.(auth.Principal)
	return p, ok
}

// principal is the request's caller; the zero Principal (SignedIn false)
// when no credential identified one.
func Caller(c *gin.Context) auth.Principal {
	p, _ := PrincipalOf(c)
	return p
}

// AuthenticateOrServiceKey is Authenticate, except that a request bearing
// serviceKey (FLOWBOX_API_KEY, for programs without an account) goes on
// anonymous: it is no user's API key, and the handler behind checks it
// itself. An empty serviceKey lets nothing through.
func AuthenticateOrServiceKey(a Authenticator, serviceKey string) gin.HandlerFunc {
	authn := Authenticate(a)
	return func(c *gin.Context) {
		if bearer, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok && serviceKey != "" &&
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(bearer)), []byte(serviceKey)) == 1 {
			c.Next()
			return
		}
		authn(c)
	}
}

// Authenticate identifies the caller from an API key (Authorization:
// Bearer) or a session cookie and refuses a cookie-authenticated request
// that changes state without the session's CSRF token. A request with no
// credentials goes on anonymous; bad credentials are refused.
func Authenticate(a Authenticator) gin.HandlerFunc {
	return func(c *gin.Context) {
		var limited *RateLimited
		switch err := Identify(c, a, true); {
		case err == nil:
			c.Next()
		case errors.As(err, &limited):
			TooMany(c, limited)
		case errors.Is(err, ErrNoCSRF):
			Error(c, http.StatusForbidden, err.Error())
		default:
			CredentialError(c, err)
		}
	}
}

// keyLimits holds the buckets of API keys that have a rate of their own.
// Each engine process counts for itself.
var keyLimits = &RateLimiter{}

// RateLimited refuses a request over a limit; wait is when to retry.
type RateLimited struct {
	Wait time.Duration
	What string
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("too many requests (%s); retry in %s", e.What, e.Wait.Round(time.Second))
}

// TooMany answers a rateLimited refusal.
func TooMany(c *gin.Context, e *RateLimited) {
	c.Header("Retry-After", fmt.Sprint(int(math.Ceil(e.Wait.Seconds()))))
	Error(c, http.StatusTooManyRequests, e.Error())
}

// ErrNoCSRF refuses a change made with a session cookie but without the
// session's CSRF token.
var ErrNoCSRF = errors.New("missing or wrong " + CSRFHeader + " header; reload the page")

// Identify sets the caller's principal from an API key or a session
// cookie. No credentials: nil, and no principal. Bad credentials: an
// error wrapping auth.ErrBadCredentials that says which; with
// requireCSRF, a change made with a session cookie but without its CSRF
// token: errNoCSRF. It writes no answer.
func Identify(c *gin.Context, a Authenticator, requireCSRF bool) error {
	ctx := c.Request.Context()
	if bearer, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
		p, err := a.APIKey(ctx, strings.TrimSpace(bearer))
		switch {
		case errors.Is(err, auth.ErrKeyExpired):
			return fmt.Errorf("the API key has expired; make a new one: %w", err)
		case err != nil:
			return fmt.Errorf("the API key is not valid: %w", err)
		}
		if p.KeyRatePerMinute > 0 {
			n := p.KeyRatePerMinute
			if ok, wait := keyLimits.AllowAt(p.KeyID, time.Minute/time.Duration(n), n); !ok {
				return &RateLimited{Wait: wait, What: fmt.Sprintf("this API key's limit of %d requests a minute", n)}
			}
		}
		c.Set(PrincipalKey, p)
		return nil
	}
	token, err := c.Cookie(SessionCookie)
	if err != nil || token == "" {
		return nil
	}
	p, csrf, err := a.Session(ctx, token)
	if err != nil {
		return fmt.Errorf("your session has ended; sign in again: %w", err)
	}
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		got := c.GetHeader(CSRFHeader)
		if requireCSRF && (got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1) {
			return ErrNoCSRF
		}
	}
	c.Set(PrincipalKey, p)
	c.Set(CSRFKey, csrf)
	return nil
}

// CredentialError answers credentials identify refused: 401 with what
// was wrong, or 503 when they could not be checked.
func CredentialError(c *gin.Context, err error) {
	if errors.Is(err, auth.ErrBadCredentials) {
		msg, _, _ := strings.Cut(err.Error(), ": ")
		Error(c, http.StatusUnauthorized, msg)
		return
	}
	Error(c, http.StatusServiceUnavailable, "could not check your credentials; retry later")
}

// RequireUser refuses anonymous callers.
func RequireUser() gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, ok := PrincipalOf(c); !ok {
			Error(c, http.StatusUnauthorized, "sign in, or send Authorization: Bearer <API key>")
			return
		}
		c.Next()
	}
}

// RequireAccount refuses callers bound to one app (app keys): they reach
// only that app's chat API, chats and files.
func RequireAccount() gin.HandlerFunc {
	return func(c *gin.Context) {
		if p, ok := PrincipalOf(c); ok && p.Bound() {
			Error(c, http.StatusForbidden, "an app key reaches only its app's chat API, chats and sandbox files; use a personal key or sign in for this")
			return
		}
		c.Next()
	}
}

// RequirePage sends anonymous visitors to the sign-in page.
func RequirePage() gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, ok := PrincipalOf(c); !ok {
			c.Redirect(http.StatusSeeOther, "/login")
			c.Abort()
			return
		}
		c.Next()
	}
}

// RateLimiter allows each key (a client address, a user) a steady rate
// with a burst; keys idle for ten minutes are forgotten.
type RateLimiter struct {
	Every time.Duration // one request per Every, on average
	Burst int
	Now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// allow takes one request from key's budget, or says how long to wait.
func (r *RateLimiter) allow(key string) (bool, time.Duration) {
	return r.AllowAt(key, r.Every, r.Burst)
}

// AllowAt is allow with the rate given for this key (a new rate takes
// effect once the key's bucket is forgotten).
func (r *RateLimiter) AllowAt(key string, every time.Duration, burst int) (bool, time.Duration) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buckets == nil {
		r.buckets = map[string]*bucket{}
	}
	if now.Sub(r.swept) > time.Minute {
		for k, b := range r.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b := r.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Every(every), burst)}
		r.buckets[key] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Forget drops key's bucket: its next request starts a full burst.
func (r *RateLimiter) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.buckets, key)
}

// Middleware limits requests by the key keyOf returns.
func (r *RateLimiter) Middleware(keyOf func(c *gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if ok, wait := r.allow(keyOf(c)); !ok {
			TooMany(c, &RateLimited{Wait: wait, What: "the engine's limit for each caller"})
			return
		}
		c.Next()
	}
}

// ByClient keys limits by the client's address.
func ByClient(c *gin.Context) string { return c.ClientIP() }

// ByUser keys limits by the caller, or the address when anonymous.
func ByUser(c *gin.Context) string {
	if p, ok := PrincipalOf(c); ok {
		return "u:" + p.UserID
	}
	return "ip:" + c.ClientIP()
}

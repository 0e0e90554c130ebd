package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/web/auth"
)

func TestAuthenticateAndCSRF(t *testing.T) {
	store := auth.New(mongotest.DB(t))
	store.Cost = bcrypt.MinCost
	ctx := context.Background()
	alice, _ := store.CreateUser(ctx, "alice", "correct horse", auth.RoleUser)
	store.CreateUser(ctx, "root", "admin password", auth.RoleAdmin)
	token, csrf, _, _ := store.Login(ctx, "alice", "correct horse")
	adminToken, adminCSRF, _, _ := store.Login(ctx, "root", "admin password")
	key, _ := store.CreateAPIKey(ctx, alice.ID, "cli")

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(Authenticate(store))
	who := func(c *gin.Context) {
		p, ok := PrincipalOf(c)
		if !ok {
			c.String(200, "anonymous")
			return
		}
		c.String(200, p.Name)
	}
	r.GET("/who", who)
	r.POST("/user", RequireUser(), who)
	r.POST("/admin", RequireAdmin(), who)
	// The chat API's route: the configured service key passes on to the
	// handler, which checks it; everything else is authenticated as above.
	withKey := gin.New()
	withKey.POST("/chat", AuthenticateOrServiceKey(store, "svc-key"), who)
	noKey := gin.New()
	noKey.POST("/chat", AuthenticateOrServiceKey(store, ""), who)
	for _, tc := range []struct {
		name   string
		r      *gin.Engine
		bearer string
		status int
		body   string
	}{
		{"service key", withKey, "svc-key", 200, "anonymous"},
		{"user key beside a service key", withKey, key, 200, "alice"},
		{"wrong key", withKey, "svc-key2", 401, "API key is not valid"},
		{"no service key configured", noKey, "", 401, "API key is not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/chat", nil)
			req.Header.Set("Authorization", "Bearer "+tc.bearer)
			rec := httptest.NewRecorder()
			tc.r.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Errorf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tc.status, tc.body)
			}
		})
	}

	tests := []struct {
		name, method, path string
		cookie, csrf, key  string
		status             int
		body               string
	}{
		{"anonymous read", "GET", "/who", "", "", "", 200, "anonymous"},
		{"session read needs no CSRF", "GET", "/who", token, "", "", 200, "alice"},
		{"session write with CSRF", "POST", "/user", token, csrf, "", 200, "alice"},
		{"session write without CSRF", "POST", "/user", token, "", "", 403, "X-CSRF-Token"},
		{"session write with another's CSRF", "POST", "/user", token, adminCSRF, "", 403, "X-CSRF-Token"},
		{"API key needs no CSRF", "POST", "/user", "", "", key, 200, "alice"},
		{"bad API key", "GET", "/who", "", "", "fbk_nope", 401, "API key is not valid"},
		{"forged session", "GET", "/who", "fbs_forged", "", "", 401, "sign in again"},
		{"anonymous write", "POST", "/user", "", "", "", 401, "sign in"},
		{"user at admin route", "POST", "/admin", token, csrf, "", 403, "needs an admin"},
		{"admin at admin route", "POST", "/admin", adminToken, adminCSRF, "", 200, "root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tc.cookie})
			}
			if tc.csrf != "" {
				req.Header.Set(CSRFHeader, tc.csrf)
			}
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("got %d %s, want %d containing %q", rec.Code, rec.Body, tc.status, tc.body)
			}
		})
	}
}

func TestRateLimiter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rl := &RateLimiter{Every: time.Second, Burst: 3, Now: func() time.Time { return now }}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/login", rl.Middleware(ByClient), func(c *gin.Context) { c.String(200, "ok") })
	hit := func(ip string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/login", nil)
		req.RemoteAddr = ip + ":1234"
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	for i := 0; i < 3; i++ {
		if rec := hit("10.0.0.1"); rec.Code != 200 {
			t.Fatalf("request %d within the burst: %d", i, rec.Code)
		}
	}
	rec := hit("10.0.0.1")
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("over the burst: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := hit("10.0.0.2"); rec.Code != 200 {
		t.Fatalf("another client is limited too: %d", rec.Code)
	}
	now = now.Add(time.Second)
	if rec := hit("10.0.0.1"); rec.Code != 200 {
		t.Fatalf("after a second: %d, want the budget refilled by one", rec.Code)
	}
}

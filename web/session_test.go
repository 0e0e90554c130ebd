package web

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/flowbox/flowbox/internal/mongodb/mongotest"
	"github.com/flowbox/flowbox/web/auth"
)

// A browser's round: sign in, use the cookie (with the CSRF token for
// writes), sign out.
func TestSessionRoundTrip(t *testing.T) {
	store := auth.New(mongotest.DB(t))
	store.Cost = bcrypt.MinCost
	store.CreateUser(context.Background(), "alice", "correct horse", auth.RoleUser)
	h := &SessionHandler{Accounts: store, TTL: time.Hour}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(Authenticate(store))
	r.POST("/api/login", h.Login)
	r.POST("/api/logout", h.Logout)
	r.GET("/api/me", RequireUser(), h.Me)
	r.POST("/api/write", RequireUser(), func(c *gin.Context) { c.String(200, "written") })
	srv := httptest.NewServer(r)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	do := func(method, path, body, csrf string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if csrf != "" {
			req.Header.Set(CSRFHeader, csrf)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	if code, body := do("POST", "/api/login", `{"name":"alice","password":"wrong horse"}`, ""); code != 401 || !strings.Contains(body, "wrong user name or password") {
		t.Fatalf("bad password: %d %s", code, body)
	}
	code, body := do("POST", "/api/login", `{"name":"alice","password":"correct horse"}`, "")
	if code != 200 || strings.Contains(body, "passwordHash") {
		t.Fatalf("login: %d %s", code, body)
	}
	csrf := body[strings.Index(body, `"csrfToken":"`)+len(`"csrfToken":"`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	if code, body := do("GET", "/api/me", "", ""); code != 200 || !strings.Contains(body, `"name":"alice"`) || !strings.Contains(body, csrf) {
		t.Fatalf("me: %d %s", code, body)
	}
	if code, _ := do("POST", "/api/write", "", ""); code != 403 {
		t.Fatalf("a write without the CSRF token: %d, want 403", code)
	}
	if code, body := do("POST", "/api/write", "", csrf); code != 200 || body != "written" {
		t.Fatalf("a write with the CSRF token: %d %s", code, body)
	}
	if code, _ := do("POST", "/api/logout", "", csrf); code != 200 {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := do("GET", "/api/me", "", ""); code != 401 {
		t.Fatalf("after logout: %d, want 401", code)
	}
}

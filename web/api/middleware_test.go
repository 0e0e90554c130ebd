package api

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

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

package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyz(t *testing.T) {
	tests := []struct {
		name   string
		checks []Check
		status int
		body   map[string]string
	}{
		{"all up", []Check{{"mongodb", func(context.Context) error { return nil }}}, 200, map[string]string{"mongodb": "ok"}},
		{"redis down", []Check{
			{"mongodb", func(context.Context) error { return nil }},
			{"redis", func(context.Context) error { return errors.New("connection refused") }},
		}, 503, map[string]string{"mongodb": "ok", "redis": "connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			New(Config{Ready: tc.checks}).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			var got struct {
				Ready  bool              `json:"ready"`
				Checks map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status || got.Ready != (tc.status == http.StatusOK) {
				t.Fatalf("status %d ready %v, want %d", rec.Code, got.Ready, tc.status)
			}
			for k, v := range tc.body {
				if got.Checks[k] != v {
					t.Errorf("check %s = %q, want %q", k, got.Checks[k], v)
				}
			}
		})
	}
}

package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/workers"
)

// TestQueueDashboard: the dashboard answers with the admin token and
// refuses without it, on a real redis-server and on the embedded Redis.
func TestQueueDashboard(t *testing.T) {
	redises := []struct {
		name  string
		start func(testing.TB) string
	}{
		{"redis-server", func(t testing.TB) string { return redistest.Server(t) }},
		{"embedded", redistest.Embedded},
	}
	for _, rk := range redises {
		t.Run(rk.name, func(t *testing.T) {
			opt := asynq.RedisClientOpt{Addr: rk.start(t)}
			client := asynq.NewClient(opt)
			defer client.Close()
			task, err := workers.NewDeleteAppTask("app-1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Enqueue(task); err != nil {
				t.Fatal(err)
			}
			dash := asynqmon.New(asynqmon.Options{RootPath: QueuesPath, RedisConnOpt: opt})
			defer dash.Close()

			tests := []struct {
				name   string
				token  string // configured
				auth   func(*http.Request)
				path   string
				status int
				body   string
			}{
				{"no token configured", "", func(r *http.Request) { r.SetBasicAuth("admin", "") }, "/api/queues", 403, "FLOWBOX_ADMIN_TOKEN"},
				{"no credentials", "s3cret", func(*http.Request) {}, "/api/queues", 401, "admin token"},
				{"wrong password", "s3cret", func(r *http.Request) { r.SetBasicAuth("admin", "guess") }, "/api/queues", 401, "admin token"},
				{"wrong bearer", "s3cret", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cre") }, "/api/queues", 401, "admin token"},
				{"basic auth, page", "s3cret", func(r *http.Request) { r.SetBasicAuth("anyone", "s3cret") }, "", 200, "<html"},
				{"basic auth, API", "s3cret", func(r *http.Request) { r.SetBasicAuth("anyone", "s3cret") }, "/api/queues", 200, workers.QueueDeletions},
				{"bearer, API", "s3cret", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, "/api/queues", 200, workers.QueueDeletions},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					h := New(Config{Queues: dash, AdminToken: tc.token})
					req := httptest.NewRequest("GET", QueuesPath+tc.path, nil)
					tc.auth(req)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					body := rec.Body.String()
					if rec.Code != tc.status || !strings.Contains(body, tc.body) {
						t.Fatalf("GET %s: status %d, body %.300q; want %d and a body containing %q", req.URL.Path, rec.Code, body, tc.status, tc.body)
					}
					if rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic") {
						t.Errorf("401 without a Basic challenge: browsers would not prompt")
					}
				})
			}

			// The API lists the queue with its task.
			h := New(Config{Queues: dash, AdminToken: "s3cret"})
			req := httptest.NewRequest("GET", QueuesPath+"/api/queues", nil)
			req.SetBasicAuth("", "s3cret")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var got struct {
				Queues []struct {
					Queue   string `json:"queue"`
					Pending int    `json:"pending"`
				} `json:"queues"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("queues API: %v; body %s", err, rec.Body)
			}
			if len(got.Queues) != 1 || got.Queues[0].Queue != workers.QueueDeletions || got.Queues[0].Pending != 1 {
				t.Errorf("queues = %+v, want %s with 1 pending task", got.Queues, workers.QueueDeletions)
			}
		})
	}
}

// TestMetrics: /metrics serves the workers' metrics in Prometheus' text
// format.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	workers.NewMetrics(reg)
	srv := httptest.NewServer(New(Config{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	for _, name := range []string{
		"flowbox_sandbox_scans_total", "flowbox_sandbox_scan_duration_seconds", "flowbox_sandboxes_stopped_total",
		"flowbox_sandboxes_deleted_total", "flowbox_reconcile_repairs_total",
	} {
		if !strings.Contains(string(body), "# TYPE "+name) {
			t.Errorf("/metrics lacks %s; got:\n%s", name, body)
		}
	}
}

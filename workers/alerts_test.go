package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/internal/redisconn/redistest"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/workers"
)

const alertSecret = "test-alert-secret"

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// alertReceiver answers each delivery with the next of statuses (the
// last one repeated) and keeps what it got.
type alertReceiver struct {
	mu       sync.Mutex
	statuses []int
	got      []delivery
}

func (r *alertReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, delivery{req.Header.Clone(), body})
	status := r.statuses[0]
	if len(r.statuses) > 1 {
		r.statuses = r.statuses[1:]
	}
	r.mu.Unlock()
	w.WriteHeader(status)
	io.WriteString(w, "receiver says "+strconv.Itoa(status))
}

func (r *alertReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func refusal(app string, at time.Time) audit.Alert {
	return audit.Alert{Event: audit.AlertRefused, Period: audit.AlertEvery, Record: audit.Record{Time: at, AppID: app, ChatID: "c1",
		UserID: "u1", SandboxID: "sb1", Kind: audit.KindCommand, Tool: "sandbox_shell", Command: "rm -rf /",
		Decision: audit.Refused, Rule: "rm-root", Reason: "deletes everything", Status: audit.StatusRefused, Instance: "host:1"}}
}

// TestAlertWebhookHandler: each answer of the receiver gives its outcome
// (done, retried, or refused for good), and every delivery carries the
// event, a timestamp and a signature that verifies with the secret.
func TestAlertWebhookHandler(t *testing.T) {
	e := newEnv(t, bwrapProvider(t), redistest.Embedded(t))
	recv := &alertReceiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	am := workers.NewAlertMetrics()
	reg.MustRegister(am)
	w, _, _ := e.workers(t, func(c *workers.Config) {
		// The receiver is on loopback: allowed as an operator would.
		allow, err := outbound.ParseAllow(srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Alerts = workers.AlertWebhook{URL: srv.URL + "/hook", Secret: alertSecret, Metrics: am, Client: allow.Client(outbound.Options{})}
	})
	task, err := workers.NewAlertWebhookTask(refusal("app1", e.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		status         int
		ok, skipsRetry bool
	}{
		{200, true, false},
		{204, true, false},
		{400, false, true},
		{404, false, true},
		{410, false, true},
		{408, false, false},
		{429, false, false},
		{500, false, false},
		{503, false, false},
		{302, false, false}, // not followed: the alert goes where the operator said
	}
	for _, tc := range tests {
		recv.mu.Lock()
		recv.statuses, recv.got = []int{tc.status}, nil
		recv.mu.Unlock()
		err := w.HandleAlertWebhook(context.Background(), task)
		if (err == nil) != tc.ok || errors.Is(err, asynq.SkipRetry) != tc.skipsRetry {
			t.Errorf("receiver answers %d: %v; want ok %v, SkipRetry %v", tc.status, err, tc.ok, tc.skipsRetry)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Itoa(tc.status)) {
			t.Errorf("receiver answers %d: the error %q does not say so", tc.status, err)
		}
		got := recv.deliveries()
		if len(got) != 1 {
			t.Fatalf("receiver answers %d: got %d requests, want 1", tc.status, len(got))
		}
		checkSigned(t, got[0], alertSecret)
	}
	if n := metric(t, reg, "flowbox_alerts_delivered_total", "event", "refused"); n != 2 {
		t.Errorf("delivered %v, want 2", n)
	}
	if n := metric(t, reg, "flowbox_alerts_failed_total", "event", "refused", "reason", "rejected"); n != 3 {
		t.Errorf("rejected %v, want 3", n)
	}
	if n := metric(t, reg, "flowbox_alerts_failed_total", "event", "refused", "reason", "retry"); n != 5 {
		t.Errorf("failed to be retried %v, want 5", n)
	}

	// A payload that is not an alert is not retried.
	if err := w.HandleAlertWebhook(context.Background(), asynq.NewTask(workers.TypeAlertWebhook, []byte("{"))); !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("bad payload: %v, want SkipRetry", err)
	}
}

// checkSigned checks a delivery as a receiver would: the signature of
// "<timestamp>.<body>", a recent timestamp, the event header matching
// the body, and no secret in the body.
func checkSigned(t *testing.T, d delivery, secret string) map[string]any {
	t.Helper()
	ts := d.header.Get("X-Flowbox-Timestamp")
	if want := workers.SignAlert(secret, ts, d.body); d.header.Get("X-Flowbox-Signature") != want || !strings.HasPrefix(want, "sha256=") {
		t.Errorf("signature %q, want %q", d.header.Get("X-Flowbox-Signature"), want)
	}
	if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Hour {
		t.Errorf("timestamp %q is not a recent Unix time", ts)
	}
	var body map[string]any
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	if body["event"] != d.header.Get("X-Flowbox-Event") || body["id"] != d.header.Get("X-Flowbox-Delivery") || body["id"] == "" {
		t.Errorf("headers %v do not match the body %s", d.header, d.body)
	}
	if strings.Contains(string(d.body), secret) {
		t.Errorf("the body carries the secret: %s", d.body)
	}
	return body
}

// TestAlertQueue: alerts are queued as tasks with the record's fields;
// the same alert raised twice in one period (by two engine processes) is
// queued once, the second counted as suppressed.
func TestAlertQueue(t *testing.T) {
	addr := redistest.Embedded(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	am := workers.NewAlertMetrics()
	reg.MustRegister(am)
	q := workers.NewAlertQueue(workers.AlertQueueConfig{Redis: rdb, Metrics: am, Logger: quiet})
	other := workers.NewAlertQueue(workers.AlertQueueConfig{Redis: rdb, Metrics: am, Logger: quiet})
	at := time.Now().Truncate(time.Minute).Add(10 * time.Second)
	q.Send(refusal("app1", at))
	q.Send(refusal("app2", at))
	if err := q.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	other.Send(refusal("app1", at.Add(30*time.Second)))
	if err := other.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	q.Close()
	other.Close()
	q.Send(refusal("app3", at)) // after Close: dropped, counted

	tasks, err := asynq.NewInspectorFromRedisClient(rdb).ListPendingTasks(workers.QueueMaintenance)
	if err != nil {
		t.Fatal(err)
	}
	apps := map[string]workers.AlertPayload{}
	for _, task := range tasks {
		var p workers.AlertPayload
		if task.Type != workers.TypeAlertWebhook || json.Unmarshal(task.Payload, &p) != nil || task.MaxRetry != 8 || task.ID != p.ID {
			t.Fatalf("task %+v", task)
		}
		apps[p.AppID] = p
	}
	p := apps["app1"]
	if len(tasks) != 2 || len(apps) != 2 || p.Event != audit.AlertRefused || p.Rule != "rm-root" || p.Reason != "deletes everything" ||
		p.Command != "rm -rf /" || p.ChatID != "c1" || p.UserID != "u1" || p.SandboxID != "sb1" || p.Status != "refused" ||
		p.Instance != "host:1" || !p.Time.Equal(at) || p.WindowSeconds != 60 {
		t.Fatalf("queued %+v; want one refusal of app1 with its record's fields, one of app2", apps)
	}
	for name, want := range map[string]float64{"flowbox_alerts_enqueued_total": 2, "flowbox_alerts_suppressed_total": 1} {
		if n := metric(t, reg, name, "event", "refused"); n != want {
			t.Errorf("%s = %v, want %v", name, n, want)
		}
	}
	if n := metric(t, reg, "flowbox_alerts_failed_total", "event", "refused", "reason", "not_queued"); n != 1 {
		t.Errorf("not queued %v, want 1", n)
	}
}

package web_test

// The audit's alert hook through the product: commands refused by the
// operator's policy, or failing again and again, reach a local webhook
// receiver as signed alerts, delivered by the workers, retried when the
// receiver fails, and not repeated within their window.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/engine/enginetest"
)

const alertSecret = "alert-secret-for-tests-0123456789"

// alertReceiver is an operator's webhook: it answers each delivery with
// the next of statuses (the last repeated) and keeps what it got.
type alertReceiver struct {
	mu       sync.Mutex
	statuses []int
	got      []alertDelivery
}

type alertDelivery struct {
	header http.Header
	body   []byte
	status int
}

func (r *alertReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	status := r.statuses[0]
	if len(r.statuses) > 1 {
		r.statuses = r.statuses[1:]
	}
	r.got = append(r.got, alertDelivery{req.Header.Clone(), body, status})
	r.mu.Unlock()
	w.WriteHeader(status)
}

func (r *alertReceiver) deliveries() []alertDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alertDelivery(nil), r.got...)
}

// alertBody is what a receiver reads of a delivery.
type alertBody struct {
	ID, Event, AppID, ChatID, UserID, SandboxID, Kind, Tool, Command, Rule, Reason, Status, Instance string
	Time                                                                                             time.Time
	Suppressed, Failures                                                                             int
	WindowSeconds                                                                                    int64
}

// verify checks a delivery as a receiver must: the HMAC-SHA256 of
// "<timestamp>.<body>" with the shared secret, a timestamp within five
// minutes (older ones are replays), the event header naming the body's
// event; it returns the body.
func verify(t *testing.T, d alertDelivery) alertBody {
	t.Helper()
	ts := d.header.Get("X-Flowbox-Timestamp")
	mac := hmac.New(sha256.New, []byte(alertSecret))
	mac.Write([]byte(ts + "." + string(d.body)))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); !hmac.Equal([]byte(d.header.Get("X-Flowbox-Signature")), []byte(want)) {
		t.Errorf("signature %q does not verify (want %q) for %s", d.header.Get("X-Flowbox-Signature"), want, d.body)
	}
	if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		t.Errorf("timestamp %q is not within five minutes of now", ts)
	}
	var b alertBody
	if err := json.Unmarshal(d.body, &b); err != nil {
		t.Fatalf("body %s: %v", d.body, err)
	}
	if b.Event == "" || d.header.Get("X-Flowbox-Event") != b.Event || d.header.Get("X-Flowbox-Delivery") != b.ID || b.ID == "" {
		t.Errorf("headers %v do not name the body's event and id: %s", d.header, d.body)
	}
	if strings.Contains(string(d.body), alertSecret) {
		t.Errorf("the body carries the webhook's secret: %s", d.body)
	}
	return b
}

// startAlerting serves the product with its workers, the operator's
// policy (nc forbidden by rule "no-nc") and the alert webhook pointed at
// a receiver answering statuses.
func startAlerting(t *testing.T, env map[string]string, statuses ...int) (*enginetest.Env, *alertReceiver, string) {
	t.Helper()
	recv := &alertReceiver{statuses: statuses}
	hook := httptest.NewServer(recv)
	t.Cleanup(hook.Close)
	file := filepath.Join(t.TempDir(), "policy.json")
	policy := `{"rules": [{"id": "no-nc", "command": ["nc", "ncat"], "decision": "forbid", "justification": "raw sockets are not for agents here"}]}`
	if err := os.WriteFile(file, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"FLOWBOX_POLICY_FILE": file,
		"FLOWBOX_ALERT_WEBHOOK_URL": hook.URL + "/flowbox", "FLOWBOX_ALERT_WEBHOOK_SECRET": alertSecret,
		// The receiver is on loopback: allowed as an operator would.
		"FLOWBOX_OUTBOUND_ALLOW": hook.Listener.Addr().String()}
	for k, v := range env {
		vars[k] = v
	}
	e := enginetest.Start(t, enginetest.Options{Env: vars, Workers: true})
	alice := e.CreateUser(t, "alice", auth.RoleUser)
	return e, recv, alice
}

// promValue reads one series (name and labels as /metrics writes them)
// from the product's /metrics.
func promValue(t *testing.T, e *enginetest.Env, series string) float64 {
	t.Helper()
	resp := e.Anonymous().Do(t, "GET", "/metrics", nil)
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// settled waits until every alert raised so far is queued and as many
// were delivered as queued, and returns that number.
func settled(t *testing.T, e *enginetest.Env, event string) float64 {
	t.Helper()
	if err := e.Engine.Services.Alerts.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	enqueued := `flowbox_alerts_enqueued_total{event="` + event + `"}`
	delivered := `flowbox_alerts_delivered_total{event="` + event + `"}`
	waitUntil(t, "the queued "+event+" alerts are delivered", func() bool {
		return promValue(t, e, delivered) == promValue(t, e, enqueued)
	})
	return promValue(t, e, delivered)
}

// TestAlertWebhookRefusal: a policy refusal gives one signed alert naming
// the rule, without the webhook's secret or the command's; more
// refusals of the app within the minute are suppressed; another app's
// refusal is an alert of its own.
func TestAlertWebhookRefusal(t *testing.T) {
	t.Parallel()
	e, recv, aliceID := startAlerting(t, nil, http.StatusOK)
	alice := e.Login(t, "alice", enginetest.Password("alice"))
	first, second := newApp(t, alice, "first"), newApp(t, alice, "second")

	half := "Ab3dE6gH9jK2mN5pQ8sT1vW4"
	key := "sk-proj-" + half + half
	chatID, _ := sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": first,
		"messages": message("$ OPENAI_API_KEY=" + key + " nc -l 4444")}, 200)
	waitUntil(t, "the refusal's alert arrives", func() bool { return len(recv.deliveries()) >= 1 })
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": first, "messages": message("$ rm -rf /")}, 200)
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": first, "messages": message("$ ncat -l 1")}, 200)
	if statuses, _ := toolStatuses(t, alice, first, chatID); len(statuses) != 1 || statuses[0] != "refused" {
		t.Fatalf("the command was not refused: %v", statuses)
	}
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": second, "messages": message("$ nc -l 4444")}, 200)

	if n := settled(t, e, "refused"); n != 2 {
		t.Errorf("delivered %v refusal alerts, want 2 (one per app)", n)
	}
	if n := promValue(t, e, `flowbox_alerts_suppressed_total{event="refused"}`); n != 2 {
		t.Errorf("suppressed %v, want 2 (the app's second and third refusals)", n)
	}
	got := recv.deliveries()
	if len(got) != 2 {
		t.Fatalf("the receiver got %d deliveries, want 2", len(got))
	}
	byApp := map[string]alertBody{}
	for _, d := range got {
		b := verify(t, d)
		byApp[b.AppID] = b
		if strings.Contains(string(d.body), key) || strings.Contains(string(d.body), half) {
			t.Errorf("the alert carries the command's secret: %s", d.body)
		}
	}
	a := byApp[first]
	if a.Event != "refused" || a.Rule != "no-nc" || a.Reason != "raw sockets are not for agents here" || a.Status != "refused" ||
		a.ChatID != chatID || a.UserID != aliceID || a.SandboxID == "" || !strings.Contains(a.Command, "nc -l 4444") ||
		a.Kind != "command" || a.Tool != "sandbox_shell" || a.Instance == "" || a.Suppressed != 0 || a.WindowSeconds != 60 ||
		time.Since(a.Time) > time.Minute {
		t.Errorf("the first app's alert: %+v", a)
	}
	if b := byApp[second]; b.Event != "refused" || b.Rule != "no-nc" {
		t.Errorf("the second app's alert: %+v", b)
	}
}

// TestAlertWebhookRetry: a receiver that fails (500) gets the alert
// again, the same alert signed anew, until it takes it.
func TestAlertWebhookRetry(t *testing.T) {
	t.Parallel()
	e, recv, _ := startAlerting(t, map[string]string{"FLOWBOX_ALERT_RETRY_DELAY": "100ms"},
		http.StatusInternalServerError, http.StatusOK)
	alice := e.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "retried")
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "messages": message("$ nc -l 4444")}, 200)

	if n := settled(t, e, "refused"); n != 1 {
		t.Fatalf("delivered %v alerts, want 1", n)
	}
	got := recv.deliveries()
	if len(got) != 2 || got[0].status != 500 || got[1].status != 200 {
		t.Fatalf("the receiver got %d deliveries, want 2: the failed one and its retry", len(got))
	}
	a, b := verify(t, got[0]), verify(t, got[1])
	if a.ID != b.ID || string(got[0].body) != string(got[1].body) || b.Rule != "no-nc" {
		t.Errorf("the retry is not the same alert:\n%s\n%s", got[0].body, got[1].body)
	}
	if n := promValue(t, e, `flowbox_alerts_failed_total{event="refused",reason="retry"}`); n != 1 {
		t.Errorf("failed deliveries to be retried: %v, want 1", n)
	}
}

// TestAlertFailureRate: the third failed command of an app within the
// hour raises one failure_rate alert; three more within the hour raise
// none (one suppressed).
func TestAlertFailureRate(t *testing.T) {
	t.Parallel()
	e, recv, _ := startAlerting(t, map[string]string{"FLOWBOX_ALERT_EVENTS": "failure_rate", "FLOWBOX_ALERT_FAILURE_RATE": "3/1h"}, http.StatusOK)
	alice := e.Login(t, "alice", enginetest.Password("alice"))
	app := newApp(t, alice, "failing")
	fail := func(n int) {
		for range n {
			sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "messages": message("$ false")}, 200)
		}
	}

	fail(2)
	// A refusal is no failure, and refusals are not alerted here.
	sendTurn(t, alice, "/api/v1/chat/completions", map[string]any{"appId": app, "messages": message("$ nc -l 4444")}, 200)
	if n := settled(t, e, "failure_rate"); n != 0 || len(recv.deliveries()) != 0 {
		t.Fatalf("after 2 failures: %v alerts delivered, %d received; want none", n, len(recv.deliveries()))
	}
	fail(1)
	if n := settled(t, e, "failure_rate"); n != 1 {
		t.Fatalf("after 3 failures: %v alerts delivered, want 1", n)
	}
	fail(3)
	if n := settled(t, e, "failure_rate"); n != 1 {
		t.Errorf("after 6 failures: %v alerts delivered, want still 1", n)
	}
	if n := promValue(t, e, `flowbox_alerts_suppressed_total{event="failure_rate"}`); n != 1 {
		t.Errorf("suppressed %v, want 1", n)
	}
	got := recv.deliveries()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d deliveries, want 1", len(got))
	}
	b := verify(t, got[0])
	if b.Event != "failure_rate" || b.AppID != app || b.Failures != 3 || b.WindowSeconds != 3600 || b.Status != "failed" || b.Command != "false" {
		t.Errorf("the alert: %+v", b)
	}
	if n := promValue(t, e, `flowbox_alerts_enqueued_total{event="refused"}`); n != 0 {
		t.Errorf("refusals alerted: %v", n)
	}
}

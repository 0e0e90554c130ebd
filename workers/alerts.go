package workers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/internal/batchqueue"
	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/sandbox/audit"
)

// TypeAlertWebhook posts one alert of the audit (audit.Alerter) to the
// operator's webhook, signed with the shared secret.
const TypeAlertWebhook = "alert:webhook"

// Delivery of the alerts. A failed delivery is retried 8 times (with
// asynq's exponential backoff, about 2 hours in all, or
// AlertWebhook.RetryDelay doubling) and then archived.
const (
	alertRetries = 8
	// alertTimeout bounds one POST.
	alertTimeout = 10 * time.Second
	// alertRetryCap bounds one delay of AlertWebhook.RetryDelay's
	// doubling.
	alertRetryCap = time.Hour
	// alertBuffer bounds the alerts waiting to be queued in one process.
	alertBuffer = 256
)

// alertClient posts the alerts when AlertWebhook.Client is nil: the
// outbound client with no exceptions. It follows no redirect: a signed
// alert goes where the operator said, or is retried.
var alertClient = outbound.Allow{}.Client(outbound.Options{})

// AlertWebhook is where the workers deliver alerts. Zero values have the
// documented defaults.
type AlertWebhook struct {
	// URL receives the alerts; empty: a queued alert is dropped (logged).
	URL string
	// Secret signs each delivery (X-Flowbox-Signature).
	Secret string
	// RetryDelay is the delay before the first retry of a failed
	// delivery, doubled at each retry up to an hour; 0: Config.RetryDelay.
	RetryDelay time.Duration
	// Metrics counts deliveries; nil: NewAlertMetrics(), registered
	// nowhere.
	Metrics *AlertMetrics
	// Client posts the alerts; nil: the outbound client with no
	// exceptions (public addresses only), following no redirect.
	Client *http.Client
}

// AlertPayload is the body of a delivery, and the task's payload. It
// carries what the audit record says, the command as redaction left it,
// and never the webhook's URL or secret.
type AlertPayload struct {
	// ID names the alert; a retried delivery carries the same, so that a
	// receiver can tell it has seen it.
	ID    string           `json:"id"`
	Event audit.AlertEvent `json:"event"`
	// Time is when the call that raised it began.
	Time      time.Time `json:"time"`
	AppID     string    `json:"appId"`
	ChatID    string    `json:"chatId"`
	UserID    string    `json:"userId"`
	SandboxID string    `json:"sandboxId"`
	ActorID   string    `json:"actorId,omitempty"`
	ActorKind string    `json:"actorKind,omitempty"`
	Kind      string    `json:"kind"`
	Tool      string    `json:"tool,omitempty"`
	Command   string    `json:"command,omitempty"`
	Path      string    `json:"path,omitempty"`
	Rule      string    `json:"rule,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Status    string    `json:"status"`
	ExitCode  int       `json:"exitCode"`
	// Instance names the engine process that ran the call.
	Instance string `json:"instance"`
	// Suppressed counts the alerts of this event and app not sent since
	// the previous one.
	Suppressed int `json:"suppressed"`
	// WindowSeconds is how long this alert silences the next ones of its
	// event and app; Failures, for failure_rate, how many commands failed
	// or timed out within it.
	WindowSeconds int64 `json:"windowSeconds"`
	Failures      int   `json:"failures,omitempty"`
}

// NewAlertWebhookTask returns the task that delivers a. Its id is the
// alert's event, app and the period it falls in: a second engine process
// raising the same alert in the same period is refused by the queue
// (asynq.ErrTaskIDConflict), which keeps the task for the period.
func NewAlertWebhookTask(a audit.Alert) (*asynq.Task, error) {
	if a.Event == "" || a.Period <= 0 {
		return nil, fmt.Errorf("a %s task needs an event and a period (got %q, %s)", TypeAlertWebhook, a.Event, a.Period)
	}
	r := a.Record
	id := fmt.Sprintf("%s:%s:%s:%d", TypeAlertWebhook, a.Event, r.AppID, r.Time.Truncate(a.Period).Unix())
	payload, err := json.Marshal(AlertPayload{ID: id, Event: a.Event, Time: r.Time.UTC(),
		AppID: r.AppID, ChatID: r.ChatID, UserID: r.UserID, SandboxID: r.SandboxID, ActorID: r.ActorID, ActorKind: r.ActorKind,
		Kind: string(r.Kind), Tool: r.Tool, Command: r.Command, Path: r.Path, Rule: r.Rule, Reason: r.Reason,
		Status: string(r.Status), ExitCode: r.ExitCode, Instance: r.Instance,
		Suppressed: a.Suppressed, WindowSeconds: int64(a.Period / time.Second), Failures: a.Failures})
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", TypeAlertWebhook, err)
	}
	return asynq.NewTask(TypeAlertWebhook, payload, asynq.TaskID(id), asynq.Retention(a.Period),
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(alertRetries), asynq.Timeout(2*alertTimeout)), nil
}

// SignAlert is the X-Flowbox-Signature of a delivery: "sha256=" and the
// hex HMAC-SHA256, keyed by the secret, of the X-Flowbox-Timestamp, a
// dot, and the body.
func SignAlert(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// HandleAlertWebhook posts the alert as JSON with X-Flowbox-Event,
// X-Flowbox-Timestamp (Unix seconds, of this attempt) and
// X-Flowbox-Signature (SignAlert). A 2xx answer delivers it; 408, 429,
// 5xx and network errors are retried; any other answer is final: the
// receiver refused it, and retrying would not change its mind.
func (w *Workers) HandleAlertWebhook(ctx context.Context, t *asynq.Task) error {
	var p AlertPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Event == "" {
		return fmt.Errorf("alert webhook: bad payload %.200q: %w", t.Payload(), asynq.SkipRetry)
	}
	hook := w.cfg.Alerts
	m := hook.Metrics
	if hook.URL == "" {
		m.failed.WithLabelValues(string(p.Event), alertRejected).Inc()
		return fmt.Errorf("alert webhook: alert %s dropped: FLOWBOX_ALERT_WEBHOOK_URL is not set on this worker: %w", p.ID, asynq.SkipRetry)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("alert webhook: encode alert %s: %w", p.ID, asynq.SkipRetry)
	}
	ctx, cancel := context.WithTimeout(ctx, alertTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		m.failed.WithLabelValues(string(p.Event), alertRejected).Inc()
		return fmt.Errorf("alert webhook: the webhook URL: %w", asynq.SkipRetry)
	}
	ts := strconv.FormatInt(w.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "flowbox-alerts")
	req.Header.Set("X-Flowbox-Event", string(p.Event))
	req.Header.Set("X-Flowbox-Delivery", p.ID)
	req.Header.Set("X-Flowbox-Timestamp", ts)
	req.Header.Set("X-Flowbox-Signature", SignAlert(hook.Secret, ts, body))
	client := hook.Client
	if client == nil {
		client = alertClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// The URL may carry a token of the receiver's: say what failed,
		// not where.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return w.alertFailed(ctx, p, fmt.Errorf("alert webhook: post alert %s: %w", p.ID, err))
	}
	said, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		m.delivered.WithLabelValues(string(p.Event)).Inc()
		return nil
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		m.failed.WithLabelValues(string(p.Event), alertRejected).Inc()
		return fmt.Errorf("alert webhook: the receiver refused alert %s with %s (%.200q); not retried: %w", p.ID, resp.Status, said, asynq.SkipRetry)
	default:
		return w.alertFailed(ctx, p, fmt.Errorf("alert webhook: the receiver answered alert %s with %s (%.200q)", p.ID, resp.Status, said))
	}
}

// alertFailed counts a delivery that failed and will be retried, or was
// the last try.
func (w *Workers) alertFailed(ctx context.Context, p AlertPayload, err error) error {
	reason := alertRetry
	retried, ok1 := asynq.GetRetryCount(ctx)
	maxRetry, ok2 := asynq.GetMaxRetry(ctx)
	if ok1 && ok2 && retried >= maxRetry {
		reason = alertGaveUp
	}
	w.cfg.Alerts.Metrics.failed.WithLabelValues(string(p.Event), reason).Inc()
	return err
}

// retryDelay spaces the retries of the tasks: the alerts' by
// AlertWebhook.RetryDelay when set, the others by Config.RetryDelay.
func (w *Workers) retryDelay(n int, err error, t *asynq.Task) time.Duration {
	if d := w.cfg.Alerts.RetryDelay; d > 0 && t.Type() == TypeAlertWebhook {
		for range min(n, 20) {
			if d *= 2; d >= alertRetryCap {
				return alertRetryCap
			}
		}
		return d
	}
	return w.cfg.RetryDelay(n, err, t)
}

// AlertQueueConfig configures an AlertQueue.
type AlertQueueConfig struct {
	// Redis carries the queue (required); the AlertQueue never closes it.
	Redis *redis.Client
	// Metrics counts what is queued and suppressed; nil:
	// NewAlertMetrics(), registered nowhere.
	Metrics *AlertMetrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// AlertQueue queues the alerts of an audit.Alerter as TypeAlertWebhook
// tasks, off the command's path: Send only hands the alert to a
// goroutine. When more than a few hundred wait (Redis down or slow), an
// alert is dropped, counted and logged rather than slowing commands.
type AlertQueue struct {
	client *asynq.Client
	m      *AlertMetrics
	log    *slog.Logger
	q      *batchqueue.Queue[audit.Alert]
}

// NewAlertQueue starts a queue; Close stops it.
func NewAlertQueue(cfg AlertQueueConfig) *AlertQueue {
	if cfg.Metrics == nil {
		cfg.Metrics = NewAlertMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	q := &AlertQueue{client: asynq.NewClientFromRedisClient(cfg.Redis), m: cfg.Metrics, log: cfg.Logger.With("component", "alerts")}
	q.q = batchqueue.New(batchqueue.Config{Size: alertBuffer, Batch: 1}, func(as []audit.Alert) { q.enqueue(as[0]) })
	return q
}

// Send queues a in the background (audit.AlertConfig.Send); it never
// blocks.
func (q *AlertQueue) Send(a audit.Alert) {
	switch err := q.q.Offer(a); {
	case errors.Is(err, batchqueue.ErrFull):
		q.notQueued(a, errors.New("too many alerts waiting to be queued"))
	case err != nil:
		q.notQueued(a, errors.New("the alert queue is closed: the engine is stopping"))
	}
}

// Suppressed counts an alert the alerter did not send
// (audit.AlertConfig.Suppressed).
func (q *AlertQueue) Suppressed(e audit.AlertEvent) {
	q.m.suppressed.WithLabelValues(string(e)).Inc()
}

// Flush returns once every alert sent before it is queued (or failed to
// be), or when ctx ends.
func (q *AlertQueue) Flush(ctx context.Context) error { return q.q.Flush(ctx) }

// Close queues what waits and stops the queue; later alerts are dropped
// (counted).
func (q *AlertQueue) Close() { q.q.Close() }

func (q *AlertQueue) enqueue(a audit.Alert) {
	task, err := NewAlertWebhookTask(a)
	if err != nil {
		q.notQueued(a, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), enqueueTimeout)
	defer cancel()
	switch _, err := q.client.EnqueueContext(ctx, task); {
	case err == nil:
		q.m.enqueued.WithLabelValues(string(a.Event)).Inc()
	case errors.Is(err, asynq.ErrTaskIDConflict):
		// Another engine process raised it in this period.
		q.m.suppressed.WithLabelValues(string(a.Event)).Inc()
	default:
		q.notQueued(a, err)
	}
}

func (q *AlertQueue) notQueued(a audit.Alert, err error) {
	q.m.failed.WithLabelValues(string(a.Event), alertNotQueued).Inc()
	r := a.Record
	q.log.Error("alert not queued", "err", err, "event", a.Event, "time", r.Time, "appId", r.AppID, "chatId", r.ChatID,
		"userId", r.UserID, "command", r.Command, "rule", r.Rule, "status", r.Status, "suppressed", a.Suppressed)
}

// AlertMetrics are the alerts' Prometheus metrics.
//
//	flowbox_alerts_enqueued_total{event}         alerts queued for delivery
//	flowbox_alerts_suppressed_total{event}       alerts not sent: within the window of the previous
//	                                             one of their event and app (the next one counts them)
//	flowbox_alerts_delivered_total{event}        alerts the receiver accepted (2xx)
//	flowbox_alerts_failed_total{event,reason}    retry: a delivery failed and will be retried;
//	                                             gave_up: the last retry failed; rejected: the
//	                                             receiver refused it (4xx) or no webhook is set;
//	                                             not_queued: it could not be queued (logged)
//
// AlertMetrics is a prometheus.Collector: register it once with the
// engine's registry.
type AlertMetrics struct {
	enqueued, suppressed, delivered, failed *prometheus.CounterVec
}

// Reasons of flowbox_alerts_failed_total.
const (
	alertRetry     = "retry"
	alertGaveUp    = "gave_up"
	alertRejected  = "rejected"
	alertNotQueued = "not_queued"
)

// NewAlertMetrics creates the metrics, registered nowhere.
func NewAlertMetrics() *AlertMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &AlertMetrics{
		enqueued:   counter("flowbox_alerts_enqueued_total", "Alerts queued for delivery to the webhook, by event.", "event"),
		suppressed: counter("flowbox_alerts_suppressed_total", "Alerts not sent for being within the window of the previous one of their event and app, by event.", "event"),
		delivered:  counter("flowbox_alerts_delivered_total", "Alerts the webhook accepted, by event.", "event"),
		failed: counter("flowbox_alerts_failed_total",
			"Alert deliveries that failed, by event and reason (retry, gave_up, rejected, not_queued).", "event", "reason"),
	}
	for _, e := range audit.AlertEvents {
		for _, c := range []*prometheus.CounterVec{m.enqueued, m.suppressed, m.delivered} {
			c.WithLabelValues(string(e))
		}
	}
	return m
}

var _ prometheus.Collector = (*AlertMetrics)(nil)

func (m *AlertMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []*prometheus.CounterVec{m.enqueued, m.suppressed, m.delivered, m.failed} {
		c.Describe(ch)
	}
}

func (m *AlertMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []*prometheus.CounterVec{m.enqueued, m.suppressed, m.delivered, m.failed} {
		c.Collect(ch)
	}
}

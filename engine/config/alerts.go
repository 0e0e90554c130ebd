package config

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowbox/flowbox/sandbox/audit"
)

// Alerts configures the audit's alert webhook (audit.Alerter,
// workers.TypeAlertWebhook).
type Alerts struct {
	// WebhookURL receives the alerts, an absolute http(s) URL.
	// FLOWBOX_ALERT_WEBHOOK_URL; empty: no alerts.
	WebhookURL string
	// WebhookSecret signs them (X-Flowbox-Signature).
	// FLOWBOX_ALERT_WEBHOOK_SECRET; required with WebhookURL.
	WebhookSecret string
	// Events are what is alerted on. FLOWBOX_ALERT_EVENTS,
	// comma-separated (default refused,limited,oom,failure_rate); see
	// audit.AlertEvents.
	Events []audit.AlertEvent
	// FailureCount failed or timed-out commands of one app within
	// FailureWindow raise a failure_rate alert. FLOWBOX_ALERT_FAILURE_RATE,
	// "<count>/<duration>" (default 10/5m).
	FailureCount  int
	FailureWindow time.Duration
	// RetryDelay is the delay before the first retry of a failed
	// delivery, doubled at each retry. FLOWBOX_ALERT_RETRY_DELAY; empty:
	// asynq's exponential backoff (15 seconds to a minute at first).
	RetryDelay time.Duration
}

// alerts reads the FLOWBOX_ALERT_* variables.
func alerts(str func(key, def string) string, errs *[]string) Alerts {
	a := Alerts{WebhookURL: str("FLOWBOX_ALERT_WEBHOOK_URL", ""), WebhookSecret: str("FLOWBOX_ALERT_WEBHOOK_SECRET", "")}
	if a.WebhookURL != "" {
		u, err := url.Parse(a.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The URL may carry the receiver's token: it is not repeated.
			*errs = append(*errs, "FLOWBOX_ALERT_WEBHOOK_URL is not an absolute http:// or https:// URL")
		}
		if a.WebhookSecret == "" {
			*errs = append(*errs, "FLOWBOX_ALERT_WEBHOOK_SECRET is required with FLOWBOX_ALERT_WEBHOOK_URL: every alert is signed with it, so that the receiver can tell it came from this engine")
		}
	}
	for _, name := range strings.Split(str("FLOWBOX_ALERT_EVENTS", "refused,limited,oom,failure_rate"), ",") {
		e := audit.AlertEvent(strings.TrimSpace(name))
		switch {
		case e == "" || slices.Contains(a.Events, e):
		case slices.Contains(audit.AlertEvents, e):
			a.Events = append(a.Events, e)
		default:
			known := make([]string, len(audit.AlertEvents))
			for i, k := range audit.AlertEvents {
				known[i] = string(k)
			}
			*errs = append(*errs, fmt.Sprintf("FLOWBOX_ALERT_EVENTS: %q is not an event; use some of %s, comma-separated", e, strings.Join(known, ", ")))
		}
	}
	rate := str("FLOWBOX_ALERT_FAILURE_RATE", "10/5m")
	count, window, ok := strings.Cut(rate, "/")
	n, err := strconv.Atoi(strings.TrimSpace(count))
	d, derr := time.ParseDuration(strings.TrimSpace(window))
	if !ok || err != nil || n < 1 || derr != nil || d <= 0 {
		*errs = append(*errs, fmt.Sprintf("FLOWBOX_ALERT_FAILURE_RATE=%q is not <count>/<duration> such as 10/5m (at least 1 failure, a positive duration)", rate))
	} else {
		a.FailureCount, a.FailureWindow = n, d
	}
	if v := str("FLOWBOX_ALERT_RETRY_DELAY", ""); v != "" {
		if a.RetryDelay, err = time.ParseDuration(v); err != nil || a.RetryDelay <= 0 {
			*errs = append(*errs, fmt.Sprintf("FLOWBOX_ALERT_RETRY_DELAY=%q is not a positive duration such as 30s", v))
		}
	}
	return a
}

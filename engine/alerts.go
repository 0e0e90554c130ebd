package engine

import (
	"log/slog"

	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/workers"
)

// startAlerts builds the audit's alert hook when a webhook is configured:
// the alerter decides on the command's path which records are alerts, the
// queue hands them to the workers (workers.TypeAlertWebhook) in the
// background. Without a webhook, s.Alerter is nil and sends nothing.
func startAlerts(s *Services, cfg config.Alerts, log *slog.Logger) {
	s.AlertMetrics = workers.NewAlertMetrics()
	if cfg.WebhookURL == "" {
		return
	}
	s.Alerts = workers.NewAlertQueue(workers.AlertQueueConfig{Redis: s.Redis, Metrics: s.AlertMetrics, Logger: log})
	s.closers = append(s.closers, s.Alerts.Close) // before Redis closes
	s.Alerter = audit.NewAlerter(audit.AlertConfig{Events: cfg.Events, FailureCount: cfg.FailureCount, FailureWindow: cfg.FailureWindow,
		Send: s.Alerts.Send, Suppressed: s.Alerts.Suppressed})
}

// alertWebhook is where the workers deliver the alerts, through the
// outbound client with the operator's exceptions (FLOWBOX_OUTBOUND_ALLOW):
// a webhook on the engine's own networks must be allowed explicitly.
func alertWebhook(s *Services, cfg config.Alerts, allow outbound.Allow) workers.AlertWebhook {
	return workers.AlertWebhook{URL: cfg.WebhookURL, Secret: cfg.WebhookSecret, RetryDelay: cfg.RetryDelay, Metrics: s.AlertMetrics,
		Client: allow.Client(outbound.Options{})}
}

package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/sandbox/workspace"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/workers"
)

// The web layer records chat and app deletions, and the admin's stops and
// deletions, through the workers.
var (
	_ api.SandboxDeleter = (*workers.Workers)(nil)
	_ web.SandboxAdmin   = (*workers.Workers)(nil)
)

// NewRegistry is the engine's Prometheus registry: the process's own
// metrics and, registered later, the workers'.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewWorkers builds the task workers on the engine's services. They run
// only once started; unstarted, they still record deletions.
func NewWorkers(svc *Services, cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*workers.Workers, error) {
	w, err := workers.New(workers.Config{
		Manager:         svc.Manager,
		Store:           svc.Store,
		Redis:           svc.Redis,
		Metrics:         workers.NewMetrics(reg),
		Concurrency:     cfg.Workers.Concurrency,
		ShutdownTimeout: cfg.Workers.ShutdownTimeout,
		PollInterval:    cfg.Workers.PollInterval,
		Audit:           svc.Audit,
		AuditRetention:  cfg.Workers.AuditRetention,
		Alerts:          alertWebhook(svc, cfg.Alerts, cfg.Trust.OutboundAllow),
		Approvals:       approvalExpirer{svc},
		// A service API session, and an app's chats (R4), may have an
		// idle timeout of their own.
		IdleTimeouts: idleTimeouts{svc}.read,
		MinIdle:      sessions.MinIdle,
		ChatData: []workers.ChatData{svc.Approvals, svc.Sessions, svc.Previews,
			workspace.ChatData{Files: svc.Workspace, Chats: history.New(svc.DB), Records: svc.Store, Provider: svc.Provider.Name()}},
		Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	refill := w.RequestPoolRefill
	svc.poolRefill.Store(&refill)
	return w, nil
}

// idleTimeouts are the sandboxes whose idle timeout is not the engine's:
// the sessions' that set one, and the sandboxes of the apps that do.
type idleTimeouts struct{ svc *Services }

func (t idleTimeouts) read(ctx context.Context) (map[string]time.Duration, error) {
	out, err := t.svc.Sessions.IdleTimeouts(ctx)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]time.Duration{}
	}
	byApp, err := apps.New(t.svc.DB, nil).IdleTimeouts(ctx)
	if err != nil {
		return nil, err
	}
	for appID, d := range byApp {
		records, err := t.svc.Store.ByApp(ctx, appID, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range records {
			if _, own := out[r.SandboxID]; !own {
				out[r.SandboxID] = d
			}
		}
	}
	return out, nil
}

// approvalExpirer settles the approvals nobody answered in time and
// audits each as a rejection.
type approvalExpirer struct{ svc *Services }

func (e approvalExpirer) ExpireApprovals(ctx context.Context, now time.Time) (int, error) {
	return e.svc.Approvals.Expire(ctx, now, func(r audit.Record) { e.svc.AuditWriter.Write(ctx, r) })
}

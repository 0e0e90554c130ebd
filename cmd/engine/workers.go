package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flowbox/flowbox/internal/config"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/workers"
)

// The web layer records chat and app deletions through the workers.
var _ web.SandboxDeleter = (*workers.Workers)(nil)

// newRegistry is the engine's Prometheus registry: the process's own
// metrics and, registered later, the workers'.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// newWorkers builds the task workers on the engine's services. They run
// only once started; unstarted, they still record deletions.
func newWorkers(svc *services, cfg config.Config, log *slog.Logger, reg prometheus.Registerer) (*workers.Workers, error) {
	w, err := workers.New(workers.Config{
		Manager:         svc.manager,
		Store:           svc.store,
		Redis:           svc.redis,
		Metrics:         workers.NewMetrics(reg),
		Concurrency:     cfg.Workers.Concurrency,
		ShutdownTimeout: cfg.Workers.ShutdownTimeout,
		Logger:          log,
	})
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	return w, nil
}

// newDashboard is the queue dashboard, served by web at web.QueuesPath.
func newDashboard(svc *services) *asynqmon.HTTPHandler {
	return asynqmon.New(asynqmon.Options{RootPath: web.QueuesPath, RedisConnOpt: svc.redisOpt})
}

// worker runs the task workers and their scheduler without the HTTP
// server, so that operators can add workers on other machines. It needs
// the MongoDB and the Redis the engines share: the embedded ones belong to
// the engine serve process that started them.
func worker(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("worker takes no arguments (got %q); it is configured by FLOWBOX_* variables", args)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.MongoURI == "" || cfg.RedisAddr == "" {
		return errors.New("engine worker needs the MongoDB and the Redis that engine serve uses: set FLOWBOX_MONGODB_URI and FLOWBOX_REDIS_ADDR (on the embedded defaults, engine serve runs the workers itself)")
	}
	log := newLogger(cfg.LogLevel)
	svc, err := start(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer svc.Close()
	w, err := newWorkers(svc, cfg, log, newRegistry())
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	log.Info("flowbox worker running", "version", version, "sandboxProvider", svc.provider.Name(), "mongodb", svc.mongoDesc, "redis", svc.redisDesc)
	<-ctx.Done()
	log.Info("shutting down: letting running tasks finish", "timeout", cfg.Workers.ShutdownTimeout)
	w.Shutdown()
	return nil
}

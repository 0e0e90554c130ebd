// Package engine is the engine's composition root: it builds one engine
// process (the database, Redis, the sandbox provider and manager, the task
// workers, the workflow engine, accounts and the HTTP handler) from
// configuration. cmd/engine, the web tests, the browser tests and the
// benchmarks all build the product here, so what is tested is what ships.
// It wires; it must hold no product logic of its own.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/workers"
)

// Options are what a caller adds to the configuration. The zero value is
// what engine serve runs.
type Options struct {
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registry receives the process's and the workers' metrics; nil: a
	// new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Middleware wraps the sandbox exec chain, outermost first (the shell
	// policy, redaction and audit plug in here).
	Middleware []sandbox.Middleware
	// PasswordCost is bcrypt's work factor for the accounts' passwords;
	// 0: bcrypt.DefaultCost. Tests lower it.
	PasswordCost int
	// LimitClock is the clock of the sign-in and identity-hook rate
	// limits; nil: time.Now. Tests freeze it, so that what they count
	// does not depend on how fast the machine runs them.
	LimitClock func() time.Time
}

// Engine is one engine process, built and not yet serving: the caller
// serves Handler, starts the workers (StartWorkers) if it wants them, and
// calls Close when done.
type Engine struct {
	// Handler is every route of the product (web.New).
	Handler http.Handler
	// Workers run the stop scan, deletions and reconciliation once
	// started; unstarted, they still record deletions.
	Workers *workers.Workers
	// Services are the long-lived components under the product.
	Services *Services
	// Accounts, Apps and Chats are the product's stores, for operators'
	// commands and for tests that set up users and apps.
	Accounts *auth.Store
	Apps     *apps.Store
	Chats    *history.Store
	// Tools is the one tool registry the tool-call node and the sandbox
	// service API run tools from (A3).
	Tools *registry.Registry

	stopWarmup   context.CancelFunc
	cfg          config.Config
	log          *slog.Logger
	passwordCost int
	limitClock   func() time.Time
	dashboard    *dashboard
	started      bool
}

// New builds the whole product from cfg. Anything started before a
// failure is stopped again.
func New(ctx context.Context, cfg config.Config, opts Options) (_ *Engine, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := opts.Registry
	if reg == nil {
		reg = NewRegistry()
	}
	svc, err := Start(ctx, cfg, log, opts.Middleware...)
	if err != nil {
		return nil, err
	}
	e := &Engine{Services: svc, cfg: cfg, log: log, passwordCost: opts.PasswordCost, limitClock: opts.LimitClock}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if err := reg.Register(svc.AuditMetrics); err != nil {
		return nil, fmt.Errorf("register the audit metrics: %w", err)
	}
	if err := reg.Register(svc.AlertMetrics); err != nil {
		return nil, fmt.Errorf("register the alert metrics: %w", err)
	}
	if err := reg.Register(poolCollector{svc.Manager}); err != nil {
		return nil, fmt.Errorf("register the warm pool metrics: %w", err)
	}
	if err := reg.Register(sandboxCollector{svc.Sampler}); err != nil {
		return nil, fmt.Errorf("register the sandboxes' metrics: %w", err)
	}
	if e.Workers, err = NewWorkers(svc, cfg, log, reg); err != nil {
		return nil, err
	}
	e.dashboard = &dashboard{opts: asynqmon.Options{RootPath: web.QueuesPath, RedisConnOpt: svc.redisOpt}}
	prod, err := e.product(ctx)
	if err != nil {
		return nil, err
	}
	// The tools' shared resources warm up in the background: a slow MCP
	// server must not hold up the engine's start.
	warm, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.stopWarmup = cancel
	go func() {
		defer cancel()
		if err := e.Tools.Warmup(warm); err != nil && warm.Err() == nil {
			log.Info("some tools did not warm up; they are listed on first use", "err", err)
		}
	}()
	e.Handler = web.New(web.Config{
		Ready:      svc.readyChecks(),
		Metrics:    promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Queues:     e.dashboard,
		AdminToken: cfg.AdminToken,
		// X-Forwarded-For counts only from the operator's proxies.
		TrustedProxies: cfg.Trust.TrustedProxies,
		Product:        prod,
	})
	return e, nil
}

// StartWorkers starts the task server and its scheduler.
func (e *Engine) StartWorkers() error {
	if err := e.Workers.Start(); err != nil {
		return fmt.Errorf("start the workers: %w", err)
	}
	e.started = true
	return nil
}

// StopWorkers lets running tasks finish and stops the workers, if
// started; Close does it too.
func (e *Engine) StopWorkers() {
	if e.started {
		e.Workers.Shutdown()
		e.started = false
	}
}

// Close lets running tasks finish, then stops everything New started, in
// reverse order. The HTTP server serving Handler must be shut down first.
func (e *Engine) Close() {
	e.StopWorkers()
	e.dashboard.Close()
	if e.stopWarmup != nil {
		e.stopWarmup()
	}
	if e.Tools != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := e.Tools.Shutdown(ctx); err != nil {
			e.log.Warn("tools did not shut down cleanly", "err", err)
		}
		cancel()
	}
	e.Services.Close()
}

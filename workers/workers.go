package workers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// Config configures the workers. Zero values have the documented defaults.
type Config struct {
	// Manager drives the sandboxes (required).
	Manager *sandbox.Manager
	// Store holds the records, the claims and the deletion intents
	// (required).
	Store *mongostore.Store
	// Redis carries the queues and the periodic tasks' leases (required).
	// The workers never close it.
	Redis *redis.Client
	// Metrics receives the counters; nil: NewMetrics(nil), registered
	// nowhere.
	Metrics *Metrics

	// Concurrency is how many tasks this process runs at once. Default 10.
	Concurrency int
	// ProviderConcurrency bounds the provider calls one task makes at once
	// (stops, deletes). Default 8.
	ProviderConcurrency int
	// AppBatch is how many sandboxes a deletion of an app removes per
	// step. Default 100.
	AppBatch int
	// ReconcileEvery is how often reconciliation runs. Default 10 minutes.
	ReconcileEvery time.Duration
	// Grace is how old a provider resource without a record, or a running
	// record without a resource, must be before reconciliation removes or
	// repairs it. Default 10 minutes: well above the two minutes an
	// ensure may take between writing a record and creating its resource.
	Grace time.Duration
	// StaleClaim is how old a claim must be before reconciliation takes
	// its holder for dead. Default 10 minutes; a claim is held for one
	// provider call.
	StaleClaim time.Duration
	// TombstoneTTL is how long a done deletion is kept, refusing the
	// deleted chat's late commands. Default 24 hours.
	TombstoneTTL time.Duration
	// ShutdownTimeout is how long Shutdown lets running tasks finish
	// before they are put back in their queue. Default 30 seconds.
	ShutdownTimeout time.Duration
	// RetryDelay spaces a failed task's retries. Default: asynq's
	// exponential backoff.
	RetryDelay asynq.RetryDelayFunc
	// PollInterval is how often an idle worker looks for new tasks and
	// for retries that are due. Default 1 second.
	PollInterval time.Duration
	// ScanSchedule and ReconcileSchedule are the scheduler's cron specs.
	// Defaults "*/5 * * * *" and "*/10 * * * *": aligned on the clock, so
	// the schedulers of all processes fire together and the period lease
	// lets one of their tasks run. They must match sandbox.IdleAfter and
	// ReconcileEvery; tests make them fire more often and move the clock.
	ScanSchedule      string
	ReconcileSchedule string

	// Audit, when set, has its records older than AuditRetention deleted
	// daily (TypeAuditPrune) at AuditSchedule (default "30 3 * * *");
	// AuditRetention 0 keeps them forever.
	Audit          AuditPruner
	AuditRetention time.Duration
	AuditSchedule  string

	// Alerts is where TypeAlertWebhook tasks are delivered.
	Alerts AlertWebhook

	// Approvals, when set, has the approvals nobody answered in time
	// settled as rejected (TypeApprovalExpire) at ApprovalSchedule
	// (default every minute).
	Approvals        ApprovalExpirer
	ApprovalSchedule string

	// ChatData are the stores that keep something of a chat besides its
	// sandbox (approvals, uploaded files): a chat's or an app's deletion
	// task clears them once the sandboxes are gone.
	ChatData []ChatData

	// IdleTimeouts, when set, gives the sandboxes (by ID) that may stay
	// idle for another time than sandbox.IdleAfter before the stop scan
	// stops them: service API sessions with a timeout of their own. It is
	// read once per scan. MinIdle is the shortest such timeout (default
	// and at most sandbox.IdleAfter): the scan runs every MinIdle and
	// looks at every sandbox idle that long.
	IdleTimeouts func(ctx context.Context) (map[string]time.Duration, error)
	MinIdle      time.Duration

	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Manager == nil || c.Store == nil || c.Redis == nil {
		return errors.New("workers: Manager, Store and Redis are required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Concurrency, 10)
	def(&c.ProviderConcurrency, 8)
	def(&c.AppBatch, 100)
	dur(&c.ReconcileEvery, 10*time.Minute)
	dur(&c.Grace, 10*time.Minute)
	dur(&c.StaleClaim, 10*time.Minute)
	dur(&c.TombstoneTTL, 24*time.Hour)
	dur(&c.ShutdownTimeout, 30*time.Second)
	dur(&c.PollInterval, time.Second)
	if c.RetryDelay == nil {
		c.RetryDelay = asynq.DefaultRetryDelayFunc
	}
	if c.IdleTimeouts == nil || c.MinIdle <= 0 || c.MinIdle > sandbox.IdleAfter {
		c.MinIdle = sandbox.IdleAfter
	}
	if c.ScanSchedule == "" {
		// Every period of the shortest idle timeout: every 5 minutes for
		// chats alone, every minute with service API sessions.
		c.ScanSchedule = fmt.Sprintf("*/%d * * * *", max(1, int(c.MinIdle/time.Minute)))
	}
	if c.ReconcileSchedule == "" {
		c.ReconcileSchedule = "*/10 * * * *"
	}
	if c.AuditSchedule == "" {
		c.AuditSchedule = "30 3 * * *"
	}
	if c.ApprovalSchedule == "" {
		c.ApprovalSchedule = "* * * * *"
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Alerts.Metrics == nil {
		c.Alerts.Metrics = NewAlertMetrics()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Workers run the sandbox tasks: their handlers, the server that feeds
// them from the queues, the scheduler of the periodic ones, and the API
// that records deletions.
type Workers struct {
	cfg       Config
	log       *slog.Logger
	m         *Metrics
	owner     string // names this process in claims and leases
	client    *asynq.Client
	inspector *asynq.Inspector

	srv   *asynq.Server
	sched *asynq.Scheduler
}

// New returns the workers; Start runs them.
func New(cfg Config) (*Workers, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	return &Workers{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "workers"),
		m:         cfg.Metrics,
		owner:     fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomID(4)),
		client:    asynq.NewClientFromRedisClient(cfg.Redis),
		inspector: asynq.NewInspectorFromRedisClient(cfg.Redis),
	}, nil
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// ServeMux routes every task type to its handler, counting what it
// processes.
func (w *Workers) ServeMux() *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(w.instrument)
	mux.HandleFunc(TypeStopIdle, w.HandleStopIdle)
	mux.HandleFunc(TypeDeleteChat, w.HandleDeleteChat)
	mux.HandleFunc(TypeDeleteApp, w.HandleDeleteApp)
	mux.HandleFunc(TypeReconcile, w.HandleReconcile)
	mux.HandleFunc(TypeAuditPrune, w.HandleAuditPrune)
	mux.HandleFunc(TypeApprovalExpire, w.HandleApprovalExpire)
	mux.HandleFunc(TypeAlertWebhook, w.HandleAlertWebhook)
	mux.HandleFunc(TypePoolRefill, w.HandlePoolRefill)
	return mux
}

func (w *Workers) instrument(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := next.ProcessTask(ctx, t)
		w.m.processed.WithLabelValues(t.Type()).Inc()
		if err != nil {
			w.m.failed.WithLabelValues(t.Type()).Inc()
		}
		return err
	})
}

// Start runs the task server and the scheduler in the background. Every
// process may run both: the periodic tasks take a lease per period, so
// several schedulers still give one scan per period.
func (w *Workers) Start() error {
	w.srv = asynq.NewServerFromRedisClient(w.cfg.Redis, asynq.Config{
		Concurrency:              w.cfg.Concurrency,
		Queues:                   Queues(),
		RetryDelayFunc:           w.retryDelay,
		ShutdownTimeout:          w.cfg.ShutdownTimeout,
		TaskCheckInterval:        w.cfg.PollInterval,
		DelayedTaskCheckInterval: w.cfg.PollInterval,
		ErrorHandler:             asynq.ErrorHandlerFunc(w.logFailure),
		Logger:                   asynqLogger{w.log},
		LogLevel:                 asynq.WarnLevel,
	})
	if err := w.srv.Start(w.ServeMux()); err != nil {
		return fmt.Errorf("start the task server: %w", err)
	}
	w.sched = asynq.NewScheduler(ownConnectionTo(w.cfg.Redis), &asynq.SchedulerOpts{
		Logger:          asynqLogger{w.log},
		LogLevel:        asynq.WarnLevel,
		PostEnqueueFunc: w.logEnqueue,
	})
	// Unique keeps the duplicates of one period out of the queue while
	// the first waits; the lease decides between those that get in.
	entries := []struct {
		spec string
		task *asynq.Task
		opts []asynq.Option
	}{
		{w.cfg.ScanSchedule, NewStopIdleTask(), []asynq.Option{asynq.Unique(w.cfg.MinIdle / 2)}},
		{w.cfg.ReconcileSchedule, NewReconcileTask(w.cfg.ReconcileEvery), []asynq.Option{asynq.Unique(w.cfg.ReconcileEvery / 2)}},
		{"@every " + PoolRefillEvery.String(), NewPoolRefillTask(), []asynq.Option{asynq.Unique(PoolRefillEvery / 2)}},
	}
	if w.cfg.Audit != nil && w.cfg.AuditRetention > 0 {
		entries = append(entries, struct {
			spec string
			task *asynq.Task
			opts []asynq.Option
		}{w.cfg.AuditSchedule, NewAuditPruneTask(), []asynq.Option{asynq.Unique(12 * time.Hour)}})
	}
	if w.cfg.Approvals != nil {
		entries = append(entries, struct {
			spec string
			task *asynq.Task
			opts []asynq.Option
		}{w.cfg.ApprovalSchedule, NewApprovalExpireTask(), []asynq.Option{asynq.Unique(30 * time.Second)}})
	}
	for _, e := range entries {
		if _, err := w.sched.Register(e.spec, e.task, e.opts...); err != nil {
			w.srv.Shutdown()
			return fmt.Errorf("schedule %s at %q: %w", e.task.Type(), e.spec, err)
		}
	}
	if err := w.sched.Start(); err != nil {
		w.srv.Shutdown()
		return fmt.Errorf("start the scheduler: %w", err)
	}
	// The warm pool fills at start, not a period later.
	w.RequestPoolRefill()
	w.log.Info("workers started", "queues", Queues(), "concurrency", w.cfg.Concurrency, "owner", w.owner)
	return nil
}

// Shutdown stops the scheduler, then the server: no new task starts, and
// running ones get Config.ShutdownTimeout to finish before they are put
// back in their queue for another worker.
func (w *Workers) Shutdown() {
	if w.sched != nil {
		w.sched.Shutdown()
	}
	if w.srv != nil {
		w.srv.Shutdown()
	}
}

func (w *Workers) logFailure(ctx context.Context, t *asynq.Task, err error) {
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	if retried >= maxRetry || errors.Is(err, asynq.SkipRetry) {
		w.log.Error("task failed for good; it is archived, see the queue dashboard", "type", t.Type(), "task", id, "retried", retried, "err", err)
		return
	}
	w.log.Warn("task failed; it will be retried", "type", t.Type(), "task", id, "retried", retried, "maxRetry", maxRetry, "err", err)
}

func (w *Workers) logEnqueue(info *asynq.TaskInfo, err error) {
	switch {
	case err == nil:
		w.log.Debug("periodic task enqueued", "type", info.Type, "task", info.ID)
	case errors.Is(err, asynq.ErrDuplicateTask):
		w.log.Debug("periodic task already queued by another scheduler", "err", err)
	default:
		w.log.Warn("periodic task not enqueued", "err", err)
	}
}

// lease reports whether this call won the period of length period that
// now falls in, rounded to the nearest period boundary so that clocks a
// little apart still agree. The first of the duplicate tasks several
// schedulers enqueue for one period wins; the others skip.
func (w *Workers) lease(ctx context.Context, typ string, period time.Duration) (bool, error) {
	at := w.cfg.Now().Add(period / 2).Truncate(period).UTC()
	key := "flowbox:workers:lease:" + typ + ":" + at.Format(time.RFC3339)
	ok, err := w.cfg.Redis.SetNX(ctx, key, w.owner, 2*period).Result()
	if err != nil {
		return false, fmt.Errorf("take the lease of %s for %s: %w", typ, at.Format(time.RFC3339), err)
	}
	return ok, nil
}

// ownConnection opens a connection of its own to the workers' Redis. The
// scheduler gets one: it closes its connection when it shuts down, and
// complains about a shared one.
type ownConnection struct{ opts *redis.Options }

func (o ownConnection) MakeRedisClient() any { return redis.NewClient(o.opts) }

// ownConnectionTo copies only the fields that name the server: the shared
// client writes to its own options while it opens connections, so cloning
// them whole would race with it.
func ownConnectionTo(c *redis.Client) ownConnection {
	o := c.Options()
	return ownConnection{&redis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig}}
}

// asynqLogger sends asynq's log lines to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }

// Fatal is called by asynq when it cannot go on.
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...))
	os.Exit(1)
}

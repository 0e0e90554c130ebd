package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/flowbox/flowbox/sandbox/egress"
)

// Timeouts a command may ask for (S6).
const (
	MinTimeout     = 1 * time.Second
	MaxTimeout     = 300 * time.Second
	DefaultTimeout = 30 * time.Second
)

// ClampTimeout bounds a requested timeout to 1s–300s; zero or negative
// means DefaultTimeout.
func ClampTimeout(d time.Duration) time.Duration {
	switch {
	case d <= 0:
		return DefaultTimeout
	case d < MinTimeout:
		return MinTimeout
	case d > MaxTimeout:
		return MaxTimeout
	}
	return d
}

// Scope names the chat a sandbox belongs to.
type Scope struct {
	AppID, UserID, ChatID string
}

// SandboxID is the scope's sandbox ID (S1).
func (s Scope) SandboxID() string { return IDFor(s.AppID, s.UserID, s.ChatID) }

// ChatKey names the chat in the stores that keep something of it (its
// history, approvals, deletion records): chat ids are scoped per app and
// user (T5), so two users' chats "c1" of one app are two chats. Each part
// is path-escaped, so no two chats spell the same key.
func (s Scope) ChatKey() string {
	return url.PathEscape(s.AppID) + "/" + url.PathEscape(s.UserID) + "/" + url.PathEscape(s.ChatID)
}

func (s Scope) validate() error {
	if s.AppID == "" || s.UserID == "" || s.ChatID == "" {
		return fmt.Errorf("a sandbox needs appId, userId and chatId (got %q, %q, %q)", s.AppID, s.UserID, s.ChatID)
	}
	return nil
}

// Clock is what the manager's waits run on: the wait for a busy sandbox
// and the heartbeat of a running command. Tests inject a fake one and
// move it when the code under test waits.
type Clock interface {
	// Now reads the clock that After counts on.
	Now() time.Time
	// After is time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Manager.
type Config struct {
	Provider Provider // required
	Store    Store    // required
	// Limits are written into new records and passed to the provider;
	// zero fields take the provider's defaults.
	Limits Limits
	// Network lets sandboxes reach the network. Off by default.
	Network bool
	// Egress is the operator's allowlist of host names sandboxes may
	// reach through the egress proxy (see Spec.Egress); empty: none.
	// Exclusive with Network.
	Egress []string
	// LimitsFor, when set, tightens Limits for one scope (an app's
	// policy): a field it gives below the operator's wins for a sandbox
	// created from then on; it never raises one, nor sets one the
	// operator left to the provider's default.
	LimitsFor func(ctx context.Context, scope Scope) Limits
	// EgressFor, when set, tightens Egress for one scope (an app's
	// policy): of the patterns it returns, the manager keeps those that
	// Egress covers; an empty non-nil list turns egress off. nil from it
	// keeps Egress.
	EgressFor func(ctx context.Context, scope Scope) []string
	// MountsFor, when set, gives the host directories a scope's sandbox
	// sees (Spec.Mounts), when it is created.
	MountsFor func(ctx context.Context, scope Scope) ([]Mount, error)
	// Caps bound the sandboxes running at once (see Caps); the zero
	// value caps nothing. With any cap set, Store must implement
	// RunningCounter.
	Caps Caps
	// Lifecycle, when set, gives the apps' startup and shutdown commands
	// (P4); ShutdownTimeout bounds the shutdown commands of one stop or
	// delete (default DefaultShutdownTimeout).
	Lifecycle       Lifecycle
	ShutdownTimeout time.Duration
	// Middleware is the chain every command and file operation goes
	// through, outermost first (see Middleware).
	Middleware []Middleware
	// BusyWait bounds how long a command waits while the stop scan or
	// reconciliation holds its sandbox (ErrBusy) before it fails with
	// ErrUnavailable. Default 1 minute; it must stay below the two
	// minutes an ensure may take.
	BusyWait time.Duration
	// Heartbeat is how often a sandbox's record is refreshed while a
	// command runs in it, so that a command outlasting IdleAfter is never
	// taken for idleness. Default 1 minute; it must stay well below
	// IdleAfter.
	Heartbeat time.Duration
	// Files, when set, keeps checkpoints of the host files sandboxes
	// mount (a chat's uploads and intermediate files) beside the
	// provider's of the sandboxes: Checkpoint, Restore, Fork and the
	// others take both.
	Files FileCheckpoints
	// RestoreWait bounds how long a restore of a sandbox's checkpoint
	// waits for its running commands (default 10 s), before it gives up
	// with ErrRewindBusy.
	RestoreWait time.Duration
	// Now dates the records (lastActiveAt, createdAt) and the fast path's
	// window; default Clock.Now. Tests inject one.
	Now func() time.Time
	// Clock times the manager's waits (BusyWait, Heartbeat); default the
	// real time.
	Clock Clock
	// Pool configures the warm pool (B2); its zero value has none.
	Pool PoolConfig
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Manager is the lifecycle manager: it ensures a chat's sandbox exists and
// runs, keeps its record, and runs commands in it.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	exec    ExecFunc
	file    FileFunc
	ensures singleflight.Group
	// admission serialises the starts that Caps count (a one-slot
	// semaphore, so that a wait for it ends with its context).
	admission chan struct{}
	counter   RunningCounter
	// busy counts this process's commands in each sandbox (markBusy);
	// owner names its claims.
	busyMu sync.Mutex
	busy   map[string]int
	// fileLocks: per sandbox, its commands against a restore (files).
	fileLocks sync.Map // id → *sync.RWMutex
	owner     string
	// warm maps the sandboxes this process ensured and has not seen stop
	// to when it last refreshed their record. Within WarmWindow of that,
	// a command skips the ensure step and refreshes the record after the
	// command instead of before it: the stop scan only claims sandboxes
	// idle for minutes longer, so it cannot stop one under a command
	// started this way. A stale entry costs one failed provider
	// Exec (ErrNotFound / ErrNotRunning) and a full ensure.
	warm sync.Map // sandbox ID → time.Time
	// created holds the sandboxes this process created whose startup
	// commands have not run yet (with Config.Lifecycle).
	created sync.Map // sandbox ID → struct{}
	// pool is the warm pool; nil without PoolConfig.Store.
	pool *pool
	// adopted maps a sandbox that has just adopted a warm pool member to
	// the member's tidy-up (afterAdoption).
	adopted sync.Map // sandbox ID → func()
	// samples holds each sandbox's last metrics sample (MetricsOf).
	samples sync.Map // sandbox ID → lastSample
	// portTouched holds when a connection to each sandbox's port last
	// refreshed its record (DialPort).
	portTouched sync.Map // sandbox ID → time.Time
	// behind tracks the work that follows commands (refreshBehind,
	// afterAdoption); closed once Close has begun.
	behind struct {
		sync.Mutex
		wg     sync.WaitGroup
		closed bool
	}
}

// IdleAfter is how long a sandbox may go unused before the stop scan
// (package workers) stops it, and how often that scan runs: five minutes,
// a product rule that is not configurable (S7, seed 000 §9). The scan
// claims only sandboxes whose record is older than this, so everything
// here that lets a record age while the sandbox is in use must stay well
// below it, clock skew between engines included: WarmWindow, ensureTimeout
// and Config.Heartbeat. Change them together.
const IdleAfter = 5 * time.Minute

// WarmWindow is how long after its last record refresh a sandbox's
// commands may take the fast path (see IdleAfter).
const WarmWindow = 2 * time.Minute

// New returns a manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Provider == nil || cfg.Store == nil {
		return nil, errors.New("sandbox manager: Provider and Store are required")
	}
	if cfg.Network && len(cfg.Egress) > 0 {
		return nil, errors.New("sandbox manager: Network and Egress exclude each other")
	}
	if _, err := egress.ParsePatterns(cfg.Egress); err != nil {
		return nil, fmt.Errorf("sandbox manager: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	if cfg.BusyWait <= 0 {
		cfg.BusyWait = time.Minute
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Minute
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("provider", cfg.Provider.Name()), admission: make(chan struct{}, 1),
		busy: map[string]int{}, owner: newOwner()}
	if cfg.Caps.On() {
		c, ok := cfg.Store.(RunningCounter)
		if !ok {
			return nil, fmt.Errorf("sandbox manager: caps need a Store that counts running records (sandbox.RunningCounter); %T does not", cfg.Store)
		}
		m.counter = c
	}
	var err error
	if m.pool, err = m.newPool(cfg.Pool); err != nil {
		return nil, err
	}
	m.exec, m.file = sealOutput(m.execCore), m.fileCore
	for i := len(cfg.Middleware) - 1; i >= 0; i-- {
		if h := cfg.Middleware[i].Exec; h != nil {
			m.exec = sealOutput(h(m.exec))
		}
		if h := cfg.Middleware[i].File; h != nil {
			m.file = h(m.file)
		}
	}
	if cfg.Provider.Capabilities().Unsafe {
		m.log.Warn("sandbox provider is UNSAFE: commands run with the engine's own privileges and no isolation; never use it in production")
	}
	return m, nil
}

// Provider returns the provider the manager drives.
func (m *Manager) Provider() Provider { return m.cfg.Provider }

// background runs f in the background; Close waits for it. Once Close has
// begun, f runs before background returns.
func (m *Manager) background(f func()) {
	m.behind.Lock()
	closed := m.behind.closed
	if !closed {
		m.behind.wg.Go(f)
	}
	m.behind.Unlock()
	if closed {
		f()
	}
}

// afterAdoption runs, in the background, the tidy-up of the warm pool
// member the sandbox id adopted, if it did: its document removed (its
// claim stays, see adopt), the pool's refill asked for. It runs once the
// command that caused the adoption has run (beside it, it would take the
// machine from it), or adoptionTidyWithin after the adoption, whichever
// comes first.
func (m *Manager) afterAdoption(id string) {
	if f, ok := m.adopted.LoadAndDelete(id); ok {
		m.background(f.(func()))
	}
}

// Close waits for the work still running after commands (record
// refreshes, warm pool tidy-ups); later work runs before its command
// returns. The store must stay open until Close returns.
func (m *Manager) Close() {
	m.behind.Lock()
	m.behind.closed = true
	m.behind.Unlock()
	m.behind.wg.Wait()
}

// Files gives actor the scope's workspace. Every operation goes through
// the file hooks of Config.Middleware; the first one that reaches the
// provider creates or wakes the sandbox (S2: opening a chat's files counts
// as first use), so an operation a hook refuses creates nothing. Errors of
// the sandbox (ErrUnavailable, ErrDeleted, ...) come from the operations.
func (m *Manager) Files(ctx context.Context, scope Scope, actor Actor) (Files, error) {
	if err := scope.validate(); err != nil {
		return nil, err
	}
	return &chainFiles{m: m, actor: actor, files: &lazyFiles{m: m, scope: scope}}, nil
}

// Lookup returns the scope's record without creating anything;
// ErrNotFound when the chat has no sandbox.
func (m *Manager) Lookup(ctx context.Context, scope Scope) (Instance, error) {
	if err := scope.validate(); err != nil {
		return Instance{}, err
	}
	return m.cfg.Store.Get(ctx, m.cfg.Provider.Name(), scope.SandboxID())
}

// Stop stops a sandbox and marks its record stopped (provider first, see
// the package comment). The stop scan calls it while it holds the
// sandbox's claim, so that no command starts in between.
func (m *Manager) Stop(ctx context.Context, sandboxID string) error {
	m.shutdown(ctx, sandboxID)
	m.warm.Delete(sandboxID)
	m.samples.Delete(sandboxID)
	if err := m.cfg.Provider.Stop(ctx, sandboxID); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", sandboxID, err)
	}
	err := m.cfg.Store.SetStatus(ctx, m.cfg.Provider.Name(), sandboxID, StatusStopped)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("mark sandbox %s stopped: %w", sandboxID, err)
	}
	return nil
}

// Delete removes a sandbox and then its record. Idempotent.
func (m *Manager) Delete(ctx context.Context, sandboxID string) error {
	m.shutdown(ctx, sandboxID)
	m.warm.Delete(sandboxID)
	m.samples.Delete(sandboxID)
	if err := m.cfg.Provider.Delete(ctx, sandboxID); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", sandboxID, err)
	}
	if err := m.cfg.Store.Delete(ctx, m.cfg.Provider.Name(), sandboxID); err != nil {
		return fmt.Errorf("delete record of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

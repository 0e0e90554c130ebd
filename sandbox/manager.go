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
	owner  string
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

// ensureTimeout bounds one ensure, waiting for a stop in progress
// included. The record is refreshed at its start, so a command starts at
// most this long after its record says it did (see IdleAfter).
const ensureTimeout = 2 * time.Minute

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

// Ensure makes the scope's sandbox exist and run (S2, S3) and returns its
// ID. Concurrent calls for one sandbox in this process share one attempt;
// across processes the record's unique index and the provider's idempotent
// Ensure make them converge on one sandbox. A sandbox being stopped is
// waited for (up to Config.BusyWait) and then started again. An error
// wraps ErrUnavailable when the provider failed or the wait ran out,
// ErrDeleted when the chat or its app has been deleted, and ErrLimit (a
// *LimitError) when a sandbox that is not running would pass one of
// Config.Caps.
func (m *Manager) Ensure(ctx context.Context, scope Scope) (string, error) {
	id, err := m.ensureShared(ctx, scope)
	// No command of this call waits to run first.
	m.afterAdoption(scope.SandboxID())
	return id, err
}

// ensureShared is Ensure without the tidy-up of an adoption, which a
// command's caller does once the command has run (afterAdoption).
func (m *Manager) ensureShared(ctx context.Context, scope Scope) (string, error) {
	if err := scope.validate(); err != nil {
		return "", err
	}
	id := scope.SandboxID()
	// The shared attempt must not die with the first caller's context:
	// the others still wait for it, and a half-done creation is worse.
	ch := m.ensures.DoChan(id, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ensureTimeout)
		defer cancel()
		touched := m.cfg.Now()
		err := m.ensure(ctx, scope, id)
		if err == nil {
			m.warm.Store(id, touched)
		}
		return nil, err
	})
	select {
	case r := <-ch:
		return id, r.Err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// limitsFor is the operator's limits tightened by the scope's (LimitsFor).
func (m *Manager) limitsFor(ctx context.Context, scope Scope) Limits {
	lim := m.cfg.Limits
	if m.cfg.LimitsFor == nil {
		return lim
	}
	app := m.cfg.LimitsFor(ctx, scope)
	if app.CPUCount > 0 && lim.CPUCount > 0 && app.CPUCount < lim.CPUCount {
		lim.CPUCount = app.CPUCount
	}
	if app.MemoryMiB > 0 && lim.MemoryMiB > 0 && app.MemoryMiB < lim.MemoryMiB {
		lim.MemoryMiB = app.MemoryMiB
	}
	if app.Pids > 0 && lim.Pids > 0 && app.Pids < lim.Pids {
		lim.Pids = app.Pids
	}
	if app.DiskGiB > 0 && lim.DiskGiB > 0 && app.DiskGiB < lim.DiskGiB {
		lim.DiskGiB = app.DiskGiB
	}
	return lim
}

func (m *Manager) instance(scope Scope, id string) Instance {
	return Instance{
		Provider: m.cfg.Provider.Name(), SandboxID: id,
		AppID: scope.AppID, UserID: scope.UserID, ChatID: scope.ChatID,
		Limit: m.cfg.Limits,
	}
}

func (m *Manager) ensure(ctx context.Context, scope Scope, id string) error {
	pooled := m.pool != nil && m.pool.on
	lim := m.limitsFor(ctx, scope)
	inst := m.instance(scope, id)
	inst.Limit = lim // written with a new record
	// A sandbox without a record is created now (a stopped one keeps its
	// record): its startup commands will run, and it may adopt a member
	// of the warm pool. Record first: a provider resource never exists
	// without a record.
	spec := Spec{
		ID: id, Limits: lim, Network: m.cfg.Network,
		Labels: map[string]string{"appId": scope.AppID, "userId": scope.UserID, "chatId": scope.ChatID},
	}
	spec.Egress = m.cfg.Egress
	if m.cfg.EgressFor != nil && len(m.cfg.Egress) > 0 {
		if app := m.cfg.EgressFor(ctx, scope); app != nil {
			spec.Egress = egress.Narrow(m.cfg.Egress, app)
		}
	}
	// A member of the pool is claimed beside the record's write, which
	// says whether the sandbox is new; released if it is not.
	var pk *pick
	if pooled {
		pk = m.pickMember(ctx, spec)
		defer m.dropPick(ctx, pk)
	}
	fresh, recorded, started := false, false, false
	switch {
	case pooled:
		// The pool's path: one insert both writes a new sandbox's
		// record and says that it is new (Store.Create), where a lookup
		// and a Touch take eight round trips; under the caps, it is
		// counted after the insert (create).
		created, counted, err := m.create(ctx, inst)
		switch {
		case err == nil:
			fresh, recorded, started = created, created, counted
		case errors.Is(err, ErrBusy):
			fresh = created // touch waits for the claim's end
		case errors.Is(err, ErrDeleted):
			return fmt.Errorf("sandbox %s: %w", id, err)
		case errors.Is(err, ErrLimit):
			return fmt.Errorf("start sandbox %s: %w", id, err)
		case errors.Is(err, ErrUnavailable):
			return fmt.Errorf("record sandbox %s: %w", id, err)
		default:
			return fmt.Errorf("record sandbox %s: %w: %w", id, ErrUnavailable, err)
		}
	case m.cfg.Lifecycle != nil:
		_, err := m.cfg.Store.Get(ctx, m.cfg.Provider.Name(), id)
		fresh = errors.Is(err, ErrNotFound)
	}
	if !recorded {
		var err error
		if started, err = m.touch(ctx, inst); err != nil {
			return err
		}
	}
	// notStarted takes back the running status this call wrote: the
	// record would hold a place under the caps for a sandbox that does
	// not run.
	notStarted := func() {
		if !started {
			return
		}
		if serr := m.cfg.Store.SetStatus(context.WithoutCancel(ctx), m.cfg.Provider.Name(), id, StatusStopped); serr != nil && !errors.Is(serr, ErrNotFound) {
			m.log.Warn("sandbox record left running after a failed start; reconciliation will correct it", "sandboxId", id, "err", serr)
		}
	}
	// The chat's directories are made once the record says the chat is
	// not deleted (touch): made before, they would race the deletion's
	// removal of them, fail as "unavailable" instead of "deleted", or be
	// left behind. A new sandbox that may adopt a pool member takes the
	// member's directories instead (adopt): creating the chat's first
	// would be work thrown away on the path the pool exists to make short.
	adoptable := fresh && pooled
	var mounts []Mount
	if !adoptable {
		var err error
		if mounts, err = m.mountsFor(ctx, scope); err != nil {
			notStarted()
			return err
		}
	}
	spec.Mounts = mounts
	if adoptable {
		if m.adopt(ctx, scope, spec, pk) {
			m.markCreated(id)
			return nil
		}
		var err error
		if spec.Mounts, err = m.mountsFor(ctx, scope); err != nil {
			notStarted()
			return err
		}
	}
	if err := m.cfg.Provider.Ensure(ctx, spec); err != nil {
		m.log.Error("sandbox ensure failed", "sandboxId", id, "err", err)
		notStarted()
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return fmt.Errorf("ensure sandbox %s: %w", id, err)
	}
	if fresh {
		m.markCreated(id)
	}
	return nil
}

// create writes a new sandbox's record (Store.Create) and reports whether
// it did. Under Config.Caps the insert goes first, in the admission turn,
// and the running records are counted after it, the new one among them
// (as not counted, see admit): a sandbox past a cap has its record taken
// back (a *LimitError), and counted says that the record holds a place
// under the caps. Counting first would cost every command of an existing
// chat that takes this path a count; a running sandbox is never refused.
func (m *Manager) create(ctx context.Context, inst Instance) (created, counted bool, err error) {
	if !m.cfg.Caps.On() {
		created, err = m.cfg.Store.Create(ctx, inst, m.cfg.Now())
		return created, false, err
	}
	select {
	case m.admission <- struct{}{}:
		defer func() { <-m.admission }()
	case <-ctx.Done():
		return false, false, fmt.Errorf("wait for the sandbox caps to be checked: %w", ctx.Err())
	}
	created, err = m.cfg.Store.Create(ctx, inst, m.cfg.Now())
	if err != nil || !created {
		return created, false, err
	}
	if err := m.admit(ctx, inst, true); err != nil {
		if derr := m.cfg.Store.Delete(context.WithoutCancel(ctx), inst.Provider, inst.SandboxID); derr != nil && !errors.Is(derr, ErrNotFound) {
			err = errors.Join(err, fmt.Errorf("remove the record written before the count (reconciliation will): %w", derr))
		}
		return false, false, err
	}
	return true, true, nil
}

// mountsFor makes the scope's directories and returns their mounts
// (Config.MountsFor; none without it).
func (m *Manager) mountsFor(ctx context.Context, scope Scope) ([]Mount, error) {
	if m.cfg.MountsFor == nil {
		return nil, nil
	}
	mounts, err := m.cfg.MountsFor(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("%w: prepare the sandbox's directories: %w", ErrUnavailable, err)
	}
	return mounts, nil
}

// markCreated has the startup commands of a sandbox this process just
// created run before its first command.
func (m *Manager) markCreated(id string) {
	if m.cfg.Lifecycle != nil {
		m.created.Store(id, struct{}{})
	}
}

// touch refreshes the record, waiting while the stop scan or
// reconciliation holds the sandbox: the command then restarts a sandbox
// whose stop has just ended, instead of racing it. started says that the
// record was admitted under Config.Caps, not running before.
func (m *Manager) touch(ctx context.Context, inst Instance) (started bool, err error) {
	deadline := m.cfg.Clock.Now().Add(m.cfg.BusyWait)
	wait := 20 * time.Millisecond
	for {
		started, err := m.touchAdmitted(ctx, inst)
		switch {
		case err == nil:
			return started, nil
		case errors.Is(err, ErrLimit):
			return false, fmt.Errorf("start sandbox %s: %w", inst.SandboxID, err)
		case errors.Is(err, ErrDeleted):
			return false, fmt.Errorf("sandbox %s: %w", inst.SandboxID, err)
		case errors.Is(err, ErrUnavailable):
			return false, fmt.Errorf("record sandbox %s: %w", inst.SandboxID, err)
		case !errors.Is(err, ErrBusy):
			return false, fmt.Errorf("record sandbox %s: %w: %w", inst.SandboxID, ErrUnavailable, err)
		}
		left := deadline.Sub(m.cfg.Clock.Now())
		if left <= 0 {
			return false, fmt.Errorf("sandbox %s is still being stopped or repaired after %s: %w: %w", inst.SandboxID, m.cfg.BusyWait, ErrUnavailable, ErrBusy)
		}
		select {
		case <-m.cfg.Clock.After(min(wait, left)):
		case <-ctx.Done():
			return false, fmt.Errorf("wait for sandbox %s to be stopped: %w", inst.SandboxID, ctx.Err())
		}
		wait = min(2*wait, time.Second)
	}
}

// touchAdmitted is one Touch, which starts the sandbox's record running,
// past Config.Caps: a sandbox whose record is not running yet is counted
// against them first, one admission at a time in this process (see Caps),
// and refused with a *LimitError when a cap is reached. started says
// that it was so admitted.
func (m *Manager) touchAdmitted(ctx context.Context, inst Instance) (started bool, err error) {
	if !m.cfg.Caps.On() {
		return false, m.cfg.Store.Touch(ctx, inst, m.cfg.Now())
	}
	// A running sandbox is never refused, and needs no turn.
	if cur, err := m.cfg.Store.Get(ctx, inst.Provider, inst.SandboxID); err == nil && cur.Status == StatusRunning {
		return false, m.cfg.Store.Touch(ctx, inst, m.cfg.Now())
	}
	select {
	case m.admission <- struct{}{}:
		defer func() { <-m.admission }()
	case <-ctx.Done():
		return false, fmt.Errorf("wait for the sandbox caps to be checked: %w", ctx.Err())
	}
	// Read again under the turn: another engine process may have started
	// the sandbox meanwhile.
	cur, err := m.cfg.Store.Get(ctx, inst.Provider, inst.SandboxID)
	switch {
	case err == nil && (cur.Status == StatusRunning || cur.Status == StatusDeleting):
		// Running: admitted already. Deleting: Touch refuses it.
	case err == nil || errors.Is(err, ErrNotFound):
		if err := m.admit(ctx, inst, false); err != nil {
			return false, err
		}
		started = true
	default:
		return false, fmt.Errorf("read the record: %w: %w", ErrUnavailable, err)
	}
	return started, m.cfg.Store.Touch(ctx, inst, m.cfg.Now())
}

// Exec runs a command in the scope's sandbox, creating or waking it first,
// through the chain of Config.Middleware.
// When the sandbox service cannot run the command, the result is the one
// the agent sees (exitCode -1 and a message to retry later, N5) and the
// error wraps ErrUnavailable. A command that fails or times out is a
// result with a nil error. A command for a deleted chat fails with an
// error wrapping ErrDeleted and creates nothing; one whose sandbox is not
// running and may not start under Config.Caps, with a *LimitError
// (ErrLimit) whose text says which cap, and the result carries that text.
// A command with standard input (ExecRequest.Stdin) needs a provider that
// can give it one (ErrNoStdin otherwise) and runs without a timeout.
func (m *Manager) Exec(ctx context.Context, scope Scope, req ExecRequest) (ExecResult, error) {
	if req.LongLived() {
		if !m.cfg.Provider.Capabilities().Stdin {
			return ExecResult{ExitCode: -1}, fmt.Errorf("%w: the %s provider has none", ErrNoStdin, m.cfg.Provider.Name())
		}
		req.Timeout = 0
	} else {
		req.Timeout = ClampTimeout(req.Timeout)
	}
	call := &Call{Scope: scope, SandboxID: IDFor(scope.AppID, scope.UserID, scope.ChatID), Request: req}
	return m.exec(ctx, call)
}

func (m *Manager) execCore(ctx context.Context, call *Call) (ExecResult, error) {
	start := time.Now()
	if err := call.Scope.validate(); err != nil {
		return ExecResult{}, err
	}
	if call.Hook != "" {
		return m.run(ctx, call)
	}
	// Busy from before the ensure: a sandbox this command is about to
	// use is not stopped to make room under its user's cap.
	defer m.markBusy(call.SandboxID)()
	// A sandbox created by an Ensure of its own (not a command's) runs its
	// startup commands before its first command.
	notice := m.startup(ctx, call.Scope, call.SandboxID)
	if last, ok := m.warm.Load(call.SandboxID); ok && m.cfg.Now().Sub(last.(time.Time)) < WarmWindow {
		res, err, done := m.execWarm(ctx, call)
		if done {
			return withNotice(notice, res, err), err
		}
	}
	for attempt := 0; ; attempt++ {
		_, err := m.ensureShared(ctx, call.Scope)
		if err != nil {
			m.afterAdoption(call.SandboxID)
			return failed(err, time.Since(start)), err
		}
		notice += m.startup(ctx, call.Scope, call.SandboxID)
		res, err := m.run(ctx, call)
		m.afterAdoption(call.SandboxID)
		res = withNotice(notice, res, err)
		// Stopped or removed elsewhere between the ensure and the
		// command: the command did not start; ensure once more.
		if attempt == 0 && ctx.Err() == nil && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotRunning)) {
			m.warm.Delete(call.SandboxID)
			continue
		}
		if err == nil && !call.Request.LongLived() {
			m.touchAfter(ctx, call)
		}
		return m.execResult(ctx, call, start, res, err)
	}
}

// touchAfter refreshes the record once the command has run (S5 counts the
// whole command as use). A stop scan that marked the sandbox while the
// command started cannot then leave the record saying stoped for a
// sandbox the command brought back. A scan that holds the sandbox now
// (ErrBusy) is stopping it after the command: the record it writes will
// be true, so nothing is done here.
func (m *Manager) touchAfter(ctx context.Context, call *Call) {
	err := m.cfg.Store.Touch(context.WithoutCancel(ctx), m.instance(call.Scope, call.SandboxID), m.cfg.Now())
	if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrDeleted) {
		m.log.Warn("sandbox record not refreshed after the command", "sandboxId", call.SandboxID, "err", err)
	}
}

// run runs the command through the provider and refreshes the record
// every Config.Heartbeat while it runs.
func (m *Manager) run(ctx context.Context, call *Call) (ExecResult, error) {
	if call.Request.LongLived() {
		// Its caller counts its use: a program kept running is no use.
		return m.cfg.Provider.Exec(ctx, call.SandboxID, call.Request)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-m.cfg.Clock.After(m.cfg.Heartbeat):
				if err := m.cfg.Store.Touch(ctx, m.instance(call.Scope, call.SandboxID), m.cfg.Now()); err != nil {
					m.log.Warn("sandbox record not refreshed during a long command", "sandboxId", call.SandboxID, "err", err)
				}
			}
		}
	})
	res, err := m.cfg.Provider.Exec(ctx, call.SandboxID, call.Request)
	close(done)
	wg.Wait()
	return res, err
}

// execWarm runs a command in a sandbox believed running. Beside it, the
// store is asked whether the chat was deleted: a command of a deleted chat
// is refused from then on, in whichever engine the deletion was asked,
// even while its sandbox still runs (the command may have run; its result
// is withheld). The record's refresh (S5) follows the command, in the
// background (refreshBehind). done is false when the sandbox turned out
// to be gone or stopped before the command started: the caller ensures
// it and runs the command then.
func (m *Manager) execWarm(ctx context.Context, call *Call) (res ExecResult, err error, done bool) {
	start := time.Now()
	now := m.cfg.Now()
	inst := m.instance(call.Scope, call.SandboxID)
	deleted := make(chan error, 1)
	go func() { deleted <- m.cfg.Store.Deleted(ctx, inst) }()
	long := call.Request.LongLived()
	if long {
		// Its use is its start: its end may be hours away.
		m.refreshBehind(ctx, inst, now)
	}
	res, err = m.run(ctx, call)
	switch derr := <-deleted; {
	case errors.Is(derr, ErrDeleted):
		m.warm.Delete(call.SandboxID)
		err = fmt.Errorf("sandbox %s: %w", call.SandboxID, derr)
		return failed(err, time.Since(start)), err, true
	case derr != nil && ctx.Err() == nil:
		m.log.Warn("could not look for a deletion of the sandbox's chat; its next command will", "sandboxId", call.SandboxID, "err", derr)
		m.warm.Delete(call.SandboxID)
	}
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotRunning):
		m.warm.Delete(call.SandboxID)
		return ExecResult{}, nil, false
	case err != nil:
		// The next command goes through the ensure, which repairs what
		// can be repaired.
		m.warm.Delete(call.SandboxID)
	case !long:
		m.refreshBehind(ctx, inst, now)
	}
	res, err = m.execResult(ctx, call, start, res, err)
	return res, err, true
}

// refreshBehind writes the command's use to the sandbox's record (S5,
// Store.Refresh) in the background, so that the command's result waits
// for no database write: on a small machine the write, done beside the
// command, slowed it by more than its own length. Only a warm sandbox's
// command does so: its record says it ran less than WarmWindow ago, so the
// stop scan cannot claim it before the write lands. A refused refresh (a
// claim, a record stopped or removed meanwhile) sends the next command
// through the ensure, which waits, refuses or starts the sandbox again.
// Close waits for the writes still running.
func (m *Manager) refreshBehind(ctx context.Context, inst Instance, now time.Time) {
	refresh := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
		defer cancel()
		switch err := m.cfg.Store.Refresh(ctx, inst, now); {
		case err == nil:
			m.warm.Store(inst.SandboxID, now)
		case errors.Is(err, ErrBusy) || errors.Is(err, ErrNotRunning) || errors.Is(err, ErrNotFound):
			m.warm.Delete(inst.SandboxID)
		default:
			m.warm.Delete(inst.SandboxID)
			m.log.Warn("sandbox record not refreshed after a command; the next command refreshes it", "sandboxId", inst.SandboxID, "err", err)
		}
	}
	m.background(refresh)
}

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

// refreshTimeout bounds a record refresh after a command.
const refreshTimeout = 10 * time.Second

// Close waits for the work still running after commands (record
// refreshes, warm pool tidy-ups); later work runs before its command
// returns. The store must stay open until Close returns.
func (m *Manager) Close() {
	m.behind.Lock()
	m.behind.closed = true
	m.behind.Unlock()
	m.behind.wg.Wait()
}

func (m *Manager) execResult(ctx context.Context, call *Call, start time.Time, res ExecResult, err error) (ExecResult, error) {
	if err != nil {
		if ctx.Err() != nil {
			return ExecResult{}, fmt.Errorf("exec in sandbox %s: %w", call.SandboxID, ctx.Err())
		}
		m.log.Error("sandbox exec failed", "sandboxId", call.SandboxID, "err", err)
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		err = fmt.Errorf("exec in sandbox %s: %w", call.SandboxID, err)
		return failed(err, time.Since(start)), err
	}
	return res, nil
}

// failed is the result the agent sees when its command could not run:
// the sandbox service is unavailable (N5), the chat was deleted, or a cap
// refused to start its sandbox.
func failed(err error, d time.Duration) ExecResult {
	msg := ErrUnavailable.Error()
	var limit *LimitError
	switch {
	case errors.As(err, &limit):
		msg = limit.Error()
	case errors.Is(err, ErrDeleted):
		msg = ErrDeleted.Error() + "; its sandbox no longer exists"
	case errors.Is(err, ErrBusy):
		msg += ": the sandbox is still being stopped"
	case err != nil && !errors.Is(err, ErrUnavailable):
		msg += ": " + err.Error()
	}
	return ExecResult{Stderr: msg, ExitCode: -1, Duration: d}
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
	if err := m.cfg.Provider.Delete(ctx, sandboxID); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", sandboxID, err)
	}
	if err := m.cfg.Store.Delete(ctx, m.cfg.Provider.Name(), sandboxID); err != nil {
		return fmt.Errorf("delete record of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

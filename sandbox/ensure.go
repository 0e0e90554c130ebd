package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowbox/flowbox/sandbox/egress"
)

// ensureTimeout bounds one ensure, waiting for a stop in progress
// included. The record is refreshed at its start, so a command starts at
// most this long after its record says it did (see IdleAfter).
const ensureTimeout = 2 * time.Minute

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

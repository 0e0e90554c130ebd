package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

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
	// Not while its files are restored (a program kept running ends
	// with the restore instead: it would hold it off for ever).
	if !call.Request.LongLived() {
		l := m.files(call.SandboxID)
		l.RLock()
		defer l.RUnlock()
	}
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
	if call.Request.Background {
		return m.startBackground(ctx, call)
	}
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

// refreshTimeout bounds a record refresh after a command.
const refreshTimeout = 10 * time.Second

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

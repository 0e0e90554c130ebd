package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"time"
)

// IdleStopper is the optional part of a Store that lets Caps.PerUser
// stop a user's least recently used idle sandbox instead of refusing a
// new one (T6). sandbox/mongostore implements it.
type IdleStopper interface {
	// RunningOf returns the running records of userID.
	RunningOf(ctx context.Context, provider, userID string) ([]Instance, error)
	// Claim and Release hold a sandbox while it is stopped, as the stop
	// scan does: commands wait for the claim's end (ErrBusy).
	Claim(ctx context.Context, provider string, ids []string, owner, reason string, now time.Time) ([]string, error)
	Release(ctx context.Context, provider string, ids []string, owner string) error
}

// ClaimCapStop is the reason of the claim under which a sandbox is
// stopped to make room under its user's cap.
const ClaimCapStop = "user-cap"

// maxCapStops bounds the sandboxes one admission stops (more than one
// only when the cap was lowered below a user's running sandboxes).
const maxCapStops = 8

// busy is the count of this process's commands in each sandbox; a
// sandbox with one is never stopped to make room (stopLeastRecent).
func (m *Manager) markBusy(id string) (done func()) {
	m.busyMu.Lock()
	m.busy[id]++
	m.busyMu.Unlock()
	return func() {
		m.busyMu.Lock()
		if m.busy[id]--; m.busy[id] <= 0 {
			delete(m.busy, id)
		}
		m.busyMu.Unlock()
	}
}

func (m *Manager) isBusy(id string) bool {
	m.busyMu.Lock()
	defer m.busyMu.Unlock()
	return m.busy[id] > 0
}

// admit refuses inst's start when a cap is reached, but at the user's
// own cap it first stops the user's least recently used idle sandbox, and
// counts again. The caller holds m.admission.
func (m *Manager) admit(ctx context.Context, inst Instance, included bool) error {
	for stops := 0; ; stops++ {
		refusal := m.count(ctx, inst, included)
		var limit *LimitError
		if refusal == nil || !errors.As(refusal, &limit) || limit.Cap != CapUser || stops >= maxCapStops {
			return refusal
		}
		stopped, err := m.stopLeastRecent(ctx, inst)
		if err != nil {
			m.log.Warn("could not stop an idle sandbox to make room under the user's cap", "userId", inst.UserID, "err", err)
		}
		if !stopped {
			return refusal
		}
	}
}

// stopLeastRecent stops inst's user's least recently used sandbox that
// runs no command of this process, under a claim (so that no command
// starts in it meanwhile), and reports whether it stopped one. Its files
// and shell state stay; its next command starts it again.
//
// Only this process's commands are known: in a deployment of several
// engine processes, a command another process runs in the sandbox at
// that moment is cut short (it fails as any command of a stopped sandbox
// does; the next one starts it again).
func (m *Manager) stopLeastRecent(ctx context.Context, inst Instance) (bool, error) {
	st, ok := m.cfg.Store.(IdleStopper)
	if !ok {
		return false, nil
	}
	running, err := st.RunningOf(ctx, inst.Provider, inst.UserID)
	if err != nil {
		return false, err
	}
	slices.SortFunc(running, func(a, b Instance) int { return a.LastActiveAt.Compare(b.LastActiveAt) })
	for _, r := range running {
		if r.SandboxID == inst.SandboxID || m.isBusy(r.SandboxID) {
			continue
		}
		stopped, err := m.stopIdle(ctx, st, r)
		if stopped || err != nil {
			if stopped {
				m.log.Info("stopped the user's least recently used idle sandbox to make room under their cap",
					"userId", inst.UserID, "stopped", r.SandboxID, "lastActiveAt", r.LastActiveAt, "for", inst.SandboxID)
			}
			return stopped, err
		}
	}
	return false, nil
}

// stopIdle claims r's sandbox and stops it if, under the claim, it still
// runs and this process runs no command in it.
func (m *Manager) stopIdle(ctx context.Context, st IdleStopper, r Instance) (bool, error) {
	got, err := st.Claim(ctx, r.Provider, []string{r.SandboxID}, m.owner, ClaimCapStop, m.cfg.Now())
	if err != nil || len(got) == 0 {
		return false, err // held by the stop scan or another engine
	}
	defer func() {
		if err := st.Release(context.WithoutCancel(ctx), r.Provider, got, m.owner); err != nil {
			m.log.Warn("claim not released after a stop under the user's cap; reconciliation will drop it", "sandboxId", r.SandboxID, "err", err)
		}
	}()
	// From here a command of this process takes the ensure, which waits
	// for the claim: forget the warm path first, then look for commands.
	m.warm.Delete(r.SandboxID)
	if m.isBusy(r.SandboxID) {
		return false, nil
	}
	cur, err := m.cfg.Store.Get(ctx, r.Provider, r.SandboxID)
	if errors.Is(err, ErrNotFound) || err == nil && cur.Status != StatusRunning {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := m.Stop(ctx, r.SandboxID); err != nil {
		return false, fmt.Errorf("stop sandbox %s to make room: %w", r.SandboxID, err)
	}
	return true, nil
}

// newOwner names this manager's claims.
func newOwner() string { return "engine-caps:" + rand.Text()[:12] }

package sandbox

import (
	"context"
	"fmt"
	"time"
)

// pick is the member a new chat's sandbox may adopt, looked for and
// claimed (pickMember) beside the record's write that says whether the
// sandbox is new, then adopted (adopt), or released (dropPick) when the
// sandbox is not new or the ensure failed.
type pick struct {
	ch   chan picked
	used bool
}

// picked is pickMember's answer: the claimed member, or why none was.
type picked struct {
	poolID string
	got    []string // the claim, to be released if not adopted
	miss   string   // PoolMiss*, when no member was claimed
}

// pickMember starts looking for a ready member of the pool's shape, and
// claims one, when the chat's sandbox may adopt it: spec (without its
// mounts) has the pool's shape, the provider has nothing under its id
// (a stopped or orphaned sandbox has), so that it is new, very likely,
// and the chat has no files a member's cannot take (PoolAdoptable).
// adopt or dropPick takes the answer. Every ensure of a pooled manager
// pays that one provider status read (beside the record's write); only
// a sandbox the provider does not have pays the files' look, the listing
// and the claim.
func (m *Manager) pickMember(ctx context.Context, spec Spec) *pick {
	p := m.pool
	shape := p.shape
	shape.Limits, shape.Network, shape.Egress = spec.Limits, spec.Network, spec.Egress
	pk := &pick{ch: make(chan picked, 1)}
	if shape.Key() != p.key {
		pk.ch <- picked{miss: PoolMissShape}
		return pk
	}
	go func() { pk.ch <- m.claimMember(ctx, spec.ID) }()
	return pk
}

// claimMember claims a ready member of the pool's shape for the sandbox
// id.
func (m *Manager) claimMember(ctx context.Context, id string) picked {
	p := m.pool
	// A resource left without its record (an orphan) keeps the chat's
	// name: adopting onto it would fail after the directories moved.
	if st, err := m.cfg.Provider.Status(ctx, id); err != nil || st != StatusMissing {
		return picked{miss: PoolMissFailed}
	}
	if a, ok := p.cfg.Workspace.(PoolAdoptable); ok && !a.Adoptable(id) {
		return picked{miss: PoolMissFiles}
	}
	provider := m.cfg.Provider.Name()
	members, err := p.cfg.Store.Members(ctx, provider)
	if err != nil {
		m.log.Warn("warm pool unreadable; creating the sandbox", "sandboxId", id, "err", err)
		return picked{miss: PoolMissFailed}
	}
	for _, mem := range members {
		if !mem.Ready || mem.Shape != p.key {
			continue
		}
		// A member adopted or removed since the listing was read is
		// claimed still (its claim is left as a tombstone, see adopt):
		// its claim fails here, and the next one is tried.
		got, err := p.cfg.Store.Claim(ctx, provider, []string{mem.PoolID}, p.cfg.Owner, PoolClaimAdopt, m.cfg.Now())
		if err != nil {
			m.log.Warn("claim of a warm pool member failed; creating the sandbox", "sandboxId", id, "err", err)
			return picked{miss: PoolMissFailed}
		}
		if len(got) > 0 {
			return picked{poolID: mem.PoolID, got: got}
		}
	}
	return picked{miss: PoolMissEmpty}
}

// dropPick releases the member pk claimed if no adoption took it. It
// waits for pickMember's answer: a member released later would be
// missing for the next chat. Only a sandbox that turned out not new, or
// an ensure that failed, waits for a claim this way.
func (m *Manager) dropPick(ctx context.Context, pk *pick) {
	if pk == nil || pk.used {
		return
	}
	pk.used = true
	r := <-pk.ch
	if len(r.got) == 0 {
		return
	}
	if err := m.pool.cfg.Store.Release(context.WithoutCancel(ctx), m.cfg.Provider.Name(), r.got, m.pool.cfg.Owner); err != nil {
		m.log.Warn("warm pool member's claim not released; reconciliation will drop it", "poolId", r.poolID, "err", err)
	}
}

// adopt gives the scope's new sandbox the member pk claimed, if it did.
// It reports whether it did; when it did not, the caller creates the
// sandbox. The record exists already; spec's mounts are the caller's to
// fill when adopt fails: a member's directories become the chat's first,
// then Config.MountsFor names them.
func (m *Manager) adopt(ctx context.Context, scope Scope, spec Spec, pk *pick) bool {
	p := m.pool
	var r picked
	select {
	case r = <-pk.ch:
		pk.used = true
	case <-ctx.Done():
		p.miss(PoolMissFailed)
		return false
	}
	if r.miss != "" {
		p.miss(r.miss)
		return false
	}
	provider := m.cfg.Provider.Name()
	ok := m.adoptMember(ctx, scope, spec, r.poolID)
	// The member's document goes once the first command has run
	// (afterAdoption), and its claim stays: a listing read before the
	// document went cannot have the member claimed again until
	// reconciliation drops the claim as stale (Config.StaleClaim of the
	// workers, minutes after any listing of an adoption's).
	tidy := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.cfg.Store.RemoveMember(dctx, provider, r.poolID); err != nil {
			m.log.Warn("warm pool member's document not removed; reconciliation will", "poolId", r.poolID, "err", err)
		}
	}
	if !ok {
		m.background(tidy)
		p.miss(PoolMissFailed)
		return false
	}
	p.claims.Add(1)
	// So does the refill: a member's creation beside the first command
	// would take the machine from it. A first command that runs long (a
	// program kept running, say) holds them back no more than
	// adoptionTidyWithin.
	m.adopted.Store(spec.ID, func() {
		tidy()
		if p.cfg.Refill != nil {
			p.cfg.Refill()
		}
	})
	time.AfterFunc(adoptionTidyWithin, func() { m.afterAdoption(spec.ID) })
	return true
}

// adoptMember moves the claimed member's directories to the chat and
// has the provider adopt it. A member that fails is removed.
func (m *Manager) adoptMember(ctx context.Context, scope Scope, spec Spec, poolID string) bool {
	p := m.pool
	err := func() error {
		if p.cfg.Workspace != nil {
			if err := p.cfg.Workspace.Adopt(ctx, scope, poolID); err != nil {
				return fmt.Errorf("move its directories to the chat: %w", err)
			}
		}
		var err error
		if spec.Mounts, err = m.mountsFor(ctx, scope); err != nil {
			return err
		}
		return p.adopter.Adopt(ctx, poolID, spec)
	}()
	if err == nil {
		m.log.Debug("sandbox adopted from the warm pool", "sandboxId", spec.ID, "poolId", poolID)
		return true
	}
	m.log.Warn("warm pool member not adopted; creating the sandbox", "sandboxId", spec.ID, "poolId", poolID, "err", err)
	m.discardMember(context.WithoutCancel(ctx), poolID)
	return false
}

// discardMember removes a member from the provider and its directories;
// its document is the caller's.
func (m *Manager) discardMember(ctx context.Context, poolID string) {
	if err := m.cfg.Provider.Delete(ctx, poolID); err != nil {
		m.log.Warn("warm pool member not deleted; reconciliation will", "poolId", poolID, "err", err)
	}
	if ws := m.pool.cfg.Workspace; ws != nil {
		if err := ws.Discard(ctx, poolID); err != nil {
			m.log.Warn("warm pool member's directories not removed", "poolId", poolID, "err", err)
		}
	}
}

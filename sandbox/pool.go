package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The warm pool (B2) keeps started sandboxes of one shape that no chat
// owns yet, so that a new chat's first command adopts one instead of
// waiting for a create. Its members live in the provider under pool ids
// (IDFor's shape, random) and in the database (PoolStore), which is the
// truth across engine processes: a member is taken by inserting its
// claim, exactly as the stop scan claims a sandbox, so two engines never
// adopt the same one. A worker task refills the pool (Manager.RefillPool);
// reconciliation removes members the database does not know, and
// documents whose member is gone. Members have no instance record, so
// the stop scan never sees them.
//
// Only sandboxes of the pool's shape are adopted: the manager's own
// limits, network and egress, on its provider (Pool.Shape). A chat whose
// app narrows them gets a sandbox created for it, counted as a miss.

// Reasons of the warm pool's claims (see PoolStore): a member's adoption
// and removal, and the refill's lease on the shape. The first two stay,
// once done, until reconciliation drops them as stale.
const (
	PoolClaimAdopt  = "pool"
	PoolClaimRemove = "pool-remove"
	PoolClaimRefill = "pool-refill"
)

// IsPoolClaim reports whether a claim's reason is one of the warm pool's.
func IsPoolClaim(reason string) bool {
	return reason == PoolClaimAdopt || reason == PoolClaimRemove || reason == PoolClaimRefill
}

// adoptionTidyWithin bounds how long an adopted member's document stays
// while the chat's first command runs.
const adoptionTidyWithin = 2 * time.Second

// Reasons a first command found no member (PoolStats.Misses).
const (
	PoolMissEmpty  = "empty"  // no ready member of the shape
	PoolMissShape  = "shape"  // the chat's sandbox has another shape
	PoolMissFailed = "failed" // a member was claimed but could not be adopted
	PoolMissFiles  = "files"  // the chat has files a member cannot take (PoolAdoptable)
)

// PoolAdoptable is a PoolWorkspace that can say a chat cannot take a
// member's directories (its files are checkpointed in a subvolume of
// their own, which a member's cannot be exchanged with): the chat's
// sandbox is then created, and no member is claimed for it.
type PoolAdoptable interface {
	Adoptable(sandboxID string) bool
}

// PoolMember is one member's document.
type PoolMember struct {
	Provider string `bson:"provider" json:"provider"`
	PoolID   string `bson:"poolId" json:"poolId"`
	// Shape is PoolShape.Key of the spec it was created with.
	Shape string `bson:"shape" json:"shape"`
	// Ready: created and started; until then it is being created.
	Ready     bool      `bson:"ready" json:"ready"`
	CreatedAt time.Time `bson:"createdAt" json:"createdAt"`
}

// PoolStore keeps the members' documents (sandbox/mongostore implements
// it). Claim and Release are the sandbox claims of the stop scan: a
// member's claim names its pool id. An adoption, or a removal, removes
// the member's document and leaves the claim, which the workers'
// reconciliation drops as stale minutes later: a pool id is never used
// again, and no one claims the member meanwhile from a listing read
// before its document went.
type PoolStore interface {
	AddMember(ctx context.Context, m PoolMember) error
	SetMemberReady(ctx context.Context, provider, poolID string) error
	// Members returns the provider's members, oldest first.
	Members(ctx context.Context, provider string) ([]PoolMember, error)
	// RemoveMember removes a member's document; a missing one is not an
	// error.
	RemoveMember(ctx context.Context, provider, poolID string) error
	Claim(ctx context.Context, provider string, ids []string, owner, reason string, now time.Time) ([]string, error)
	Release(ctx context.Context, provider string, ids []string, owner string) error
}

// PoolWorkspace gives members the chat's writable mounts before any chat
// owns them (package sandbox/workspace implements it).
type PoolWorkspace interface {
	// MemberMounts creates a member's own writable directories and
	// returns their mounts (the targets a chat's sandbox has).
	MemberMounts(ctx context.Context, poolID string) ([]Mount, error)
	// Adopt moves a member's directories into the chat's place, with the
	// files the chat has there already, and leaves a link at their old
	// path (see Adopter).
	Adopt(ctx context.Context, scope Scope, poolID string) error
	// Discard removes what MemberMounts made for a member that no chat
	// adopted.
	Discard(ctx context.Context, poolID string) error
	// Sweep removes what is left of members keep does not know (and the
	// links of adopted members whose chat is gone).
	Sweep(ctx context.Context, keep func(poolID string) bool) (int, error)
}

// PoolConfig configures the warm pool of a Manager.
type PoolConfig struct {
	// Size is how many ready members the pool keeps; 0 turns it off.
	Size int
	// Store keeps the members; required with Size > 0.
	Store PoolStore
	// Workspace gives members their writable mounts; required when the
	// manager has MountsFor. SharedMounts are the mounts every sandbox
	// has besides (the skills), passed to members as they are.
	Workspace    PoolWorkspace
	SharedMounts []Mount
	// Owner names this process in the members' claims.
	Owner string
	// Refill, when set, is called after a member was adopted, to have
	// the pool refilled soon (the composition root queues the refill
	// task). It must not block.
	Refill func()
}

// PoolShape is what makes a sandbox interchangeable with another: its
// provider, image, limits, network and egress.
type PoolShape struct {
	Provider string   `json:"provider"`
	Image    string   `json:"image,omitempty"`
	Limits   Limits   `json:"limits"`
	Network  bool     `json:"network"`
	Egress   []string `json:"egress,omitempty"`
}

// Key is the shape's short, stable name in the members' documents.
func (s PoolShape) Key() string {
	s.Egress = slices.Sorted(slices.Values(s.Egress))
	b, _ := json.Marshal(s) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// String describes the shape for people.
func (s PoolShape) String() string {
	var parts []string
	parts = append(parts, s.Provider)
	if s.Image != "" {
		parts = append(parts, s.Image)
	}
	lim := func(v any, unit string) string { return fmt.Sprint(v) + unit }
	if s.Limits.CPUCount > 0 {
		parts = append(parts, lim(s.Limits.CPUCount, " CPU"))
	}
	if s.Limits.MemoryMiB > 0 {
		parts = append(parts, lim(s.Limits.MemoryMiB, " MiB"))
	}
	if s.Limits.DiskGiB > 0 {
		parts = append(parts, lim(s.Limits.DiskGiB, " GiB disk"))
	}
	if s.Limits.Pids > 0 {
		parts = append(parts, lim(s.Limits.Pids, " pids"))
	}
	switch {
	case s.Network:
		parts = append(parts, "network on")
	case len(s.Egress) > 0:
		parts = append(parts, "egress "+strings.Join(s.Egress, ","))
	default:
		parts = append(parts, "network off")
	}
	return strings.Join(parts, " · ")
}

// Imager is a provider whose sandboxes run one image (and runtime); the
// pool's shape includes what Image returns.
type Imager interface{ Image() string }

// PoolStats are the pool's figures: its configuration, what the database
// holds now, and what this process did since it started.
type PoolStats struct {
	Size     int    `json:"size"`
	Shape    string `json:"shape"`
	Ready    int    `json:"ready"`
	Creating int    `json:"creating"`
	// Claims: first commands that adopted a member. Misses by reason
	// (PoolMiss*).
	Claims uint64            `json:"claims"`
	Misses map[string]uint64 `json:"misses"`
	// Refills: members this process created; RefillSeconds their
	// creation times, summed; LastRefill the latest one's.
	Refills       uint64        `json:"refills"`
	RefillSeconds float64       `json:"refillSeconds"`
	LastRefill    time.Duration `json:"lastRefillNanos"`
	// RefillErrors: members this process failed to create.
	RefillErrors uint64 `json:"refillErrors"`
}

// pool is the manager's side of the warm pool.
type pool struct {
	cfg     PoolConfig
	on      bool // Size > 0 and the provider adopts
	adopter Adopter
	shape   PoolShape
	key     string

	claims, refills, refillErrors atomic.Uint64
	refillNanos, lastRefill       atomic.Int64
	mu                            sync.Mutex
	misses                        map[string]uint64
	// refilling keeps one refill at a time in this process; the claim on
	// the shape keeps one across processes.
	refilling sync.Mutex
}

// newPool returns nil without a PoolConfig.Store; with one, a pool that
// is off (Size 0, or a provider that cannot adopt) still reconciles, so
// that turning it off removes its members.
func (m *Manager) newPool(cfg PoolConfig) (*pool, error) {
	if cfg.Store == nil {
		if cfg.Size > 0 {
			return nil, errors.New("sandbox manager: the warm pool needs PoolConfig.Store")
		}
		return nil, nil
	}
	ad, on := m.cfg.Provider.(Adopter)
	if !on && cfg.Size > 0 {
		m.log.Warn("warm pool is off: the provider cannot adopt pool members", "size", cfg.Size)
	}
	on = on && cfg.Size > 0
	if on && m.cfg.MountsFor != nil && cfg.Workspace == nil {
		return nil, errors.New("sandbox manager: the warm pool needs PoolConfig.Workspace when sandboxes have mounts (MountsFor)")
	}
	if cfg.Owner == "" {
		cfg.Owner = "engine-" + randomHex(4)
	}
	shape := PoolShape{Provider: m.cfg.Provider.Name(), Limits: m.cfg.Limits, Network: m.cfg.Network, Egress: m.cfg.Egress}
	if im, ok := m.cfg.Provider.(Imager); ok {
		shape.Image = im.Image()
	}
	return &pool{cfg: cfg, on: on, adopter: ad, shape: shape, key: shape.Key(), misses: map[string]uint64{}}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

func (p *pool) miss(reason string) {
	p.mu.Lock()
	p.misses[reason]++
	p.mu.Unlock()
}

// PoolStats returns the pool's figures; ok is false when the pool is off.
func (m *Manager) PoolStats(ctx context.Context) (stats PoolStats, ok bool, err error) {
	p := m.pool
	if p == nil || !p.on {
		return PoolStats{}, false, nil
	}
	stats = PoolStats{
		Size: p.cfg.Size, Shape: p.shape.String(),
		Claims: p.claims.Load(), Refills: p.refills.Load(), RefillErrors: p.refillErrors.Load(),
		RefillSeconds: time.Duration(p.refillNanos.Load()).Seconds(), LastRefill: time.Duration(p.lastRefill.Load()),
		Misses: map[string]uint64{PoolMissEmpty: 0, PoolMissShape: 0, PoolMissFailed: 0, PoolMissFiles: 0},
	}
	p.mu.Lock()
	for k, v := range p.misses {
		stats.Misses[k] = v
	}
	p.mu.Unlock()
	members, err := p.cfg.Store.Members(ctx, m.cfg.Provider.Name())
	if err != nil {
		return stats, true, fmt.Errorf("read the warm pool: %w", err)
	}
	for _, mem := range members {
		switch {
		case mem.Shape != p.key:
		case mem.Ready:
			stats.Ready++
		default:
			stats.Creating++
		}
	}
	return stats, true, nil
}

// RefillPool creates members until the pool holds PoolConfig.Size of its
// shape, ready or being created, and returns how many it created. One
// process refills at a time (a claim on the shape); another that finds
// the claim taken returns 0 at once.
func (m *Manager) RefillPool(ctx context.Context) (int, error) {
	p := m.pool
	if p == nil || !p.on {
		return 0, nil
	}
	if !p.refilling.TryLock() {
		return 0, nil
	}
	defer p.refilling.Unlock()
	provider := m.cfg.Provider.Name()
	lease := "pool-refill-" + p.key
	got, err := p.cfg.Store.Claim(ctx, provider, []string{lease}, p.cfg.Owner, PoolClaimRefill, m.cfg.Now())
	if err != nil || len(got) == 0 {
		return 0, err
	}
	defer func() {
		if err := p.cfg.Store.Release(context.WithoutCancel(ctx), provider, got, p.cfg.Owner); err != nil {
			m.log.Warn("warm pool refill's claim not released; reconciliation will drop it", "err", err)
		}
	}()
	members, err := p.cfg.Store.Members(ctx, provider)
	if err != nil {
		return 0, fmt.Errorf("refill the warm pool: %w", err)
	}
	have := 0
	for _, mem := range members {
		if mem.Shape == p.key {
			have++
		}
	}
	created := 0
	var errs []error
	for ; have < p.cfg.Size && ctx.Err() == nil; have++ {
		if err := m.createMember(ctx); err != nil {
			p.refillErrors.Add(1)
			errs = append(errs, err)
			if len(errs) >= 2 {
				break // the provider is failing: try again next period
			}
			continue
		}
		created++
	}
	return created, errors.Join(errs...)
}

// createMember creates and starts one member: its document first (so
// that reconciliation never takes it for an orphan), then its
// directories and the sandbox, then the document says ready.
func (m *Manager) createMember(ctx context.Context) error {
	p := m.pool
	start := time.Now()
	provider := m.cfg.Provider.Name()
	mem := PoolMember{Provider: provider, PoolID: randomHex(8), Shape: p.key, CreatedAt: m.cfg.Now().UTC()}
	if err := p.cfg.Store.AddMember(ctx, mem); err != nil {
		return fmt.Errorf("record a warm pool member: %w", err)
	}
	spec := Spec{
		ID: mem.PoolID, Pool: true, Limits: p.shape.Limits, Network: p.shape.Network, Egress: p.shape.Egress,
		Labels: map[string]string{"pool": p.key},
	}
	err := func() error {
		if p.cfg.Workspace != nil {
			mounts, err := p.cfg.Workspace.MemberMounts(ctx, mem.PoolID)
			if err != nil {
				return fmt.Errorf("prepare its directories: %w", err)
			}
			spec.Mounts = append(mounts, p.cfg.SharedMounts...)
		}
		if err := m.cfg.Provider.Ensure(ctx, spec); err != nil {
			return err
		}
		return p.cfg.Store.SetMemberReady(ctx, provider, mem.PoolID)
	}()
	if err != nil {
		ctx := context.WithoutCancel(ctx)
		m.discardMember(ctx, mem.PoolID)
		if rerr := p.cfg.Store.RemoveMember(ctx, provider, mem.PoolID); rerr != nil {
			m.log.Warn("warm pool member's document not removed; reconciliation will", "poolId", mem.PoolID, "err", rerr)
		}
		return fmt.Errorf("create warm pool member %s: %w", mem.PoolID, err)
	}
	d := time.Since(start)
	p.refills.Add(1)
	p.refillNanos.Add(int64(d))
	p.lastRefill.Store(int64(d))
	m.log.Debug("warm pool member ready", "poolId", mem.PoolID, "took", d)
	return nil
}

// ReconcilePool brings the provider's members and their documents into
// agreement, given the provider's resources as listed before the
// documents are read: a member without a document (its creator died), a
// document without a member, and a member of another shape than the
// pool's (or any, with the pool off) are removed, each under its claim,
// the first two only when older than old. It returns how many it
// removed.
func (m *Manager) ReconcilePool(ctx context.Context, listed []Resource, old time.Time) (int, error) {
	p := m.pool
	if p == nil {
		return 0, nil
	}
	provider := m.cfg.Provider.Name()
	members, err := p.cfg.Store.Members(ctx, provider)
	if err != nil {
		return 0, fmt.Errorf("reconcile the warm pool: %w", err)
	}
	documented := make(map[string]bool, len(members))
	for _, mem := range members {
		documented[mem.PoolID] = true
	}
	running := map[string]bool{}
	var drop []string
	for _, r := range listed {
		if !r.Pool {
			continue
		}
		running[r.ID] = true
		if !documented[r.ID] && r.CreatedAt.Before(old) {
			drop = append(drop, r.ID)
		}
	}
	for _, mem := range members {
		switch {
		case !running[mem.PoolID] && mem.CreatedAt.Before(old):
			drop = append(drop, mem.PoolID)
		case mem.Ready && (!p.on || mem.Shape != p.key):
			drop = append(drop, mem.PoolID)
		}
	}
	var sweepErr error
	if ws := p.cfg.Workspace; ws != nil {
		_, sweepErr = ws.Sweep(ctx, func(id string) bool { return documented[id] || running[id] })
	}
	removed, err := m.removeMembers(ctx, drop)
	return removed, errors.Join(sweepErr, err)
}

// DrainPool removes every member of the provider that nobody is adopting
// (for tests, and operators emptying the pool at once rather than at
// the next reconciliation).
func (m *Manager) DrainPool(ctx context.Context) (int, error) {
	p := m.pool
	if p == nil {
		return 0, nil
	}
	members, err := p.cfg.Store.Members(ctx, m.cfg.Provider.Name())
	if err != nil {
		return 0, err
	}
	ids := make([]string, len(members))
	for i, mem := range members {
		ids[i] = mem.PoolID
	}
	return m.removeMembers(ctx, ids)
}

// removeMembers removes members from the provider, their directories and
// their documents, each under its claim; one claimed by someone else is
// left alone.
func (m *Manager) removeMembers(ctx context.Context, ids []string) (int, error) {
	p := m.pool
	provider := m.cfg.Provider.Name()
	removed := 0
	var errs []error
	for _, id := range ids {
		got, err := p.cfg.Store.Claim(ctx, provider, []string{id}, p.cfg.Owner, PoolClaimRemove, m.cfg.Now())
		if err != nil || len(got) == 0 {
			errs = append(errs, err)
			continue
		}
		if err := m.cfg.Provider.Delete(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("remove warm pool member %s: %w", id, err))
			// Released, to be tried again.
			errs = append(errs, p.cfg.Store.Release(ctx, provider, got, p.cfg.Owner))
			continue
		}
		if ws := p.cfg.Workspace; ws != nil {
			errs = append(errs, ws.Discard(ctx, id))
		}
		errs = append(errs, p.cfg.Store.RemoveMember(ctx, provider, id))
		removed++
		// The claim stays, as an adoption's does (see adopt).
	}
	return removed, errors.Join(errs...)
}

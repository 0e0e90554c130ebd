package chat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// ErrRunLimit: a chat run was refused because a cap on the runs in
// progress is reached. The error is a *RunLimitError that says which.
var ErrRunLimit = errors.New("chat run limit reached")

// RunLimitError refuses a chat run past a cap of RunLimits. It matches
// ErrRunLimit.
type RunLimitError struct {
	Cap   string // sandbox.CapGlobal, sandbox.CapUser, sandbox.CapGroup or sandbox.CapOwner
	Group string // the group's user-id prefix, for sandbox.CapGroup
	Owner string // the owner's user id, for sandbox.CapOwner
	Limit int
	Use   int // the runs in progress it counts, before this one
	// RetryAfter is a hint: runs hold no promise of when they end.
	RetryAfter time.Duration
}

func (e *RunLimitError) Error() string {
	switch e.Cap {
	case sandbox.CapGlobal:
		return fmt.Sprintf("refused: the server already has %d chat runs in progress and its limit is %d; retry in a moment", e.Use, e.Limit)
	case sandbox.CapGroup:
		return fmt.Sprintf("refused: %s already has %d chat runs in progress and its limit is %d; wait for one to finish, then retry", sandbox.GroupName(e.Group), e.Use, e.Limit)
	case sandbox.CapOwner:
		return fmt.Sprintf("refused: %s already has %d chat runs in progress and the limit per owner is %d; wait for one to finish, then retry", sandbox.OwnerName(e.Owner), e.Use, e.Limit)
	}
	return fmt.Sprintf("refused: you already have %d chat runs in progress and the limit per user is %d; wait for one to finish, then retry", e.Use, e.Limit)
}

// Is makes errors.Is(err, ErrRunLimit) hold.
func (e *RunLimitError) Is(target error) bool { return target == ErrRunLimit }

// runRetryAfter is the Retry-After of a refused run.
const runRetryAfter = 5 * time.Second

// RunLimits caps the chat runs in progress at once (a run is one chat
// completion request running its app's workflow): in all, per user and
// per group of users (a share link's visitors, see sandbox.Caps.Group) and
// per owner (an account with its apps' key users and its share links'
// visitors, see sandbox.Owners). Zero caps nothing.
//
// The runs are counted in Redis, so the caps hold across engine
// processes: one sorted set of leases per user, per group and for all,
// each lease scored by when it expires. One Lua script drops the expired
// leases, checks every cap and adds the new lease to every set, so two
// runs, from any processes, can never both take the last place. A run
// renews its lease while it goes on and removes it when it ends; the
// lease of a run whose engine died expires within Lease, and its place
// with it.
//
// When Redis cannot be reached the run goes ahead uncounted and a warning
// is logged: the caps protect the machine, and a Redis outage must not
// stop every chat. Likewise a run whose owner cannot be read is not
// counted against PerOwner. A nil *RunLimits caps nothing.
type RunLimits struct {
	// Redis holds the leases (required).
	Redis redis.Cmdable
	// Namespace keeps two databases that share one Redis apart (the
	// database name).
	Namespace string
	// Global, PerUser and PerGroup are the caps; 0: none. PerApp caps
	// an app key's end users together (a group of sandbox.AppKeyGroup),
	// PerGroup any other group (a share link's visitors), PerOwner the
	// users of one owner together (Owner).
	Global, PerUser, PerGroup, PerApp, PerOwner int
	// Group returns the user-id prefix of userID's group, "" for none.
	// Default sandbox.UserGroup.
	Group func(userID string) string
	// Owner returns the owner userID counts against under PerOwner, ""
	// for none (sandbox.Owners.Owner). Default: every user is its own.
	Owner func(ctx context.Context, userID string) (string, error)
	// Lease is how long a run's place outlives its last renewal; it is
	// renewed every third of it. Default 1 minute.
	Lease time.Duration
	// Now dates the leases; default time.Now. Engines' clocks must agree
	// to well within Lease.
	Now func() time.Time
	// Log defaults to slog.Default().
	Log *slog.Logger
}

// acquireScript drops the expired leases of every set, refuses when one
// is at its cap (returning the set's index, from 1, and its count), and
// otherwise adds the lease to every set (returning {0, 0}).
// KEYS: the sets. ARGV: now and the lease's expiry (Unix ms), the lease,
// the sets' time to live (ms), then each set's cap (0: none).
var acquireScript = redis.NewScript(`
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
	redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
	local cap = tonumber(ARGV[4 + i])
	if cap > 0 then
		local n = redis.call('ZCARD', key)
		if n >= cap then
			return {i, n}
		end
	end
end
for _, key in ipairs(KEYS) do
	redis.call('ZADD', key, ARGV[2], ARGV[3])
	redis.call('PEXPIRE', key, ARGV[4])
end
return {0, 0}
`)

// renewScript moves a lease's expiry on in every set (adding it again
// where an expiry removed it: the run still goes on).
// KEYS: the sets. ARGV: the expiry (Unix ms), the lease, the sets' time to
// live (ms).
var renewScript = redis.NewScript(`
for _, key in ipairs(KEYS) do
	redis.call('ZADD', key, ARGV[1], ARGV[2])
	redis.call('PEXPIRE', key, ARGV[3])
end
return 0
`)

func (l *RunLimits) lease() time.Duration {
	if l.Lease > 0 {
		return l.Lease
	}
	return time.Minute
}

func (l *RunLimits) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *RunLimits) log() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}

func (l *RunLimits) group(userID string) string {
	if l.Group != nil {
		return l.Group(userID)
	}
	return sandbox.UserGroup(userID)
}

func (l *RunLimits) owner(ctx context.Context, userID string) (string, error) {
	if l.Owner != nil {
		return l.Owner(ctx, userID)
	}
	return userID, nil
}

// groupCap is the cap on the runs of group: PerApp for an app's end
// users, PerGroup for any other group.
func (l *RunLimits) groupCap(group string) int {
	return sandbox.Caps{PerGroup: l.PerGroup, PerApp: l.PerApp}.GroupLimit(group)
}

// The keys share one hash tag, so that a Redis Cluster keeps them in one
// slot, as a script's keys must be.
func (l *RunLimits) prefix() string { return "flowbox:runs:{" + l.Namespace + "}:" }
func (l *RunLimits) allKey() string { return l.prefix() + "all" }

func unixMS(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Acquire takes a place for one run of userID, or refuses it with a
// *RunLimitError. release gives the place back; it must be called once
// the run has ended, and may be called more than once.
func (l *RunLimits) Acquire(ctx context.Context, userID string) (release func(), err error) {
	if l == nil || l.Redis == nil {
		return func() {}, nil
	}
	keys := []string{l.prefix() + "user:" + userID}
	caps := []any{l.PerUser}
	kinds := []string{sandbox.CapUser}
	group := l.group(userID)
	if group != "" {
		keys, caps, kinds = append(keys, l.prefix()+"group:"+group), append(caps, l.groupCap(group)), append(kinds, sandbox.CapGroup)
	}
	var owner string
	if l.PerOwner > 0 {
		o, err := l.owner(ctx, userID)
		switch {
		case err != nil:
			l.log().Warn("chat run not counted against the owner's run cap: its owner could not be read", "userId", userID, "err", err)
		case o != "":
			owner = o
			keys, caps, kinds = append(keys, l.prefix()+"owner:"+owner), append(caps, l.PerOwner), append(kinds, sandbox.CapOwner)
		}
	}
	keys, caps, kinds = append(keys, l.allKey()), append(caps, l.Global), append(kinds, sandbox.CapGlobal)

	var b [8]byte
	_, _ = rand.Read(b[:])
	member := hex.EncodeToString(b[:]) + ":" + userID
	lease, now := l.lease(), l.now()
	ttl := strconv.FormatInt((2 * lease).Milliseconds(), 10)
	args := append([]any{unixMS(now), unixMS(now.Add(lease)), member, ttl}, caps...)
	got, err := acquireScript.Run(ctx, l.Redis, keys, args...).Int64Slice()
	if err != nil || len(got) != 2 {
		if ctx.Err() == nil {
			l.log().Warn("chat run not counted against the run caps: Redis did not answer", "userId", userID, "err", err)
		}
		return func() {}, nil
	}
	if i := got[0]; i > 0 {
		e := &RunLimitError{Cap: kinds[i-1], Limit: caps[i-1].(int), Use: int(got[1]), RetryAfter: runRetryAfter}
		switch e.Cap {
		case sandbox.CapGroup:
			e.Group = group
		case sandbox.CapOwner:
			e.Owner = owner
		}
		return nil, e
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rctx, cancel := context.WithTimeout(context.Background(), lease/3)
				err := renewScript.Run(rctx, l.Redis, keys, unixMS(l.now().Add(lease)), member, ttl).Err()
				cancel()
				if err != nil {
					l.log().Warn("chat run's place not renewed; it may be taken by another run", "userId", userID, "err", err)
				}
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := l.Redis.Pipelined(rctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.ZRem(rctx, k, member)
				}
				return nil
			})
			if err != nil {
				l.log().Warn("chat run's place not given back; it frees when its lease expires", "userId", userID, "lease", lease, "err", err)
			}
		})
	}, nil
}

// RunUse is the runs in progress, for the admin page.
type RunUse struct {
	Total int
	// Users, Groups and Owners count the runs of each user, group (by
	// user-id prefix) and owner that has one.
	Users, Groups, Owners map[string]int
}

// Use counts the runs in progress now, by user, group and owner. A user
// whose owner cannot be read counts for none.
func (l *RunLimits) Use(ctx context.Context) (RunUse, error) {
	use := RunUse{Users: map[string]int{}, Groups: map[string]int{}, Owners: map[string]int{}}
	if l == nil || l.Redis == nil {
		return use, nil
	}
	members, err := l.Redis.ZRangeByScore(ctx, l.allKey(), &redis.ZRangeBy{Min: "(" + unixMS(l.now()), Max: "+inf"}).Result()
	if err != nil {
		return use, fmt.Errorf("count the chat runs in progress: %w", err)
	}
	for _, m := range members {
		_, user, ok := strings.Cut(m, ":")
		if !ok {
			continue
		}
		use.Total++
		use.Users[user]++
		if g := l.group(user); g != "" {
			use.Groups[g]++
		}
	}
	for user, n := range use.Users {
		if o, err := l.owner(ctx, user); err == nil && o != "" {
			use.Owners[o] += n
		}
	}
	return use, nil
}

// runRefused answers a run that Acquire refused: 429 with Retry-After
// and the refusal's words.
func runRefused(c *gin.Context, err error) {
	wait := runRetryAfter
	var e *RunLimitError
	if errors.As(err, &e) && e.RetryAfter > 0 {
		wait = e.RetryAfter
	}
	c.Header("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	api.Error(c, http.StatusTooManyRequests, err.Error())
}

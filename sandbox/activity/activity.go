// Package activity keeps in Redis when each running sandbox was last used:
// one sorted set per database and provider, each member a sandboxId scored
// by its lastActiveAt in Unix milliseconds, and beside it a hash of each
// member's user. It answers the stop scan's question, which sandboxes have
// been unused since a time, in O(log n + k), and the caps' question, whose
// sandboxes run, in one round trip, where the records' own indexes cannot
// be used: FerretDB 1.x, the embedded database, decodes every record for
// any filter but {_id: <scalar>}.
//
// It is a cache and must never be taken for the truth, which is the
// records in MongoDB: the caps let a start in on its count (which only
// stale entries make larger than the truth) but count the records again
// before refusing one. An entry may be missing (Redis lost it, or a write
// to it failed) or stale (the sandbox stopped or went since): the records'
// owner fills the set again from the records when Redis lost it (Filled
// is false), reconciliation refreshes it from the records, and the stop
// scan re-reads each candidate's record under its claim before acting.
// Scores only ever move forward (ZADD GT), so a refresh from records read
// a moment ago never hides a newer use.
package activity

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// fillChunk bounds the members one ZADD of Fill carries.
const fillChunk = 1000

// Entry is one sandbox and when it was last used.
type Entry struct {
	SandboxID    string
	LastActiveAt time.Time
	// UserID is the user the sandbox runs for; "" when the index does not
	// know it (an entry only Active wrote, or a hash Redis evicted).
	UserID string
}

// Index is the activity of one database's sandboxes, per provider.
type Index struct {
	rdb    redis.Cmdable
	prefix string
}

// New returns the index of the database named namespace (two databases on
// one Redis must not share entries) on rdb.
func New(rdb redis.Cmdable, namespace string) *Index {
	return &Index{rdb: rdb, prefix: "flowbox:sandbox:activity:" + namespace + ":"}
}

func (x *Index) key(provider string) string { return x.prefix + provider }

// filledKey exists while the set holds every running sandbox of the
// provider: Fill sets it, and Redis loses it together with the set.
func (x *Index) filledKey(provider string) string { return x.prefix + provider + ":filled" }

// usersKey is the hash of the set's members' users; a member leaves both
// in one transaction.
func (x *Index) usersKey(provider string) string { return x.prefix + provider + ":users" }

func score(t time.Time) float64 { return float64(t.UnixMilli()) }

// Active records that the sandbox was used at at; an earlier time than the
// one recorded changes nothing.
func (x *Index) Active(ctx context.Context, provider, sandboxID string, at time.Time) error {
	err := x.rdb.ZAddArgs(ctx, x.key(provider), redis.ZAddArgs{GT: true, Members: []redis.Z{{Score: score(at), Member: sandboxID}}}).Err()
	if err != nil {
		return fmt.Errorf("record the activity of sandbox %s/%s: %w", provider, sandboxID, err)
	}
	return nil
}

// Started records that e.SandboxID runs for e.UserID, used at
// e.LastActiveAt (never moving its time back), in one transaction.
func (x *Index) Started(ctx context.Context, provider string, e Entry) error {
	_, err := x.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddArgs(ctx, x.key(provider), redis.ZAddArgs{GT: true, Members: []redis.Z{{Score: score(e.LastActiveAt), Member: e.SandboxID}}})
		p.HSet(ctx, x.usersKey(provider), e.SandboxID, e.UserID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the start of sandbox %s/%s: %w", provider, e.SandboxID, err)
	}
	return nil
}

// Forget removes sandboxes that are no longer running.
func (x *Index) Forget(ctx context.Context, provider string, sandboxIDs ...string) error {
	if len(sandboxIDs) == 0 {
		return nil
	}
	_, err := x.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(sandboxIDs))
		for i, id := range sandboxIDs {
			members[i] = id
		}
		p.ZRem(ctx, x.key(provider), members...)
		p.HDel(ctx, x.usersKey(provider), sandboxIDs...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget the activity of %d sandboxes of %s: %w", len(sandboxIDs), provider, err)
	}
	return nil
}

// Before returns up to limit sandboxes of provider last used before
// before, least recently used first; limit <= 0 means all. filled is false
// when the set has not been filled since Redis lost it (or ever): the
// entries are then incomplete, and the caller should Fill the set from
// the records.
func (x *Index) Before(ctx context.Context, provider string, before time.Time, limit int) (entries []Entry, filled bool, err error) {
	var (
		exists *redis.IntCmd
		rng    *redis.ZSliceCmd
	)
	_, err = x.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, x.filledKey(provider))
		rng = p.ZRangeByScoreWithScores(ctx, x.key(provider), &redis.ZRangeBy{
			Min:   "-inf",
			Max:   "(" + strconv.FormatFloat(score(before), 'f', -1, 64),
			Count: int64(max(limit, 0)),
		})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("find sandboxes of %s unused since %s: %w", provider, before.Format(time.RFC3339), err)
	}
	return entriesOf(rng.Val()), exists.Val() == 1, nil
}

func entriesOf(zs []redis.Z) []Entry {
	entries := make([]Entry, 0, len(zs))
	for _, z := range zs {
		id, ok := z.Member.(string)
		if !ok || math.IsNaN(z.Score) {
			continue
		}
		entries = append(entries, Entry{SandboxID: id, LastActiveAt: time.UnixMilli(int64(z.Score)).UTC()})
	}
	return entries
}

// Running returns every sandbox of provider in the set, with its user
// where the set knows it, in one round trip; filled is as for Before.
func (x *Index) Running(ctx context.Context, provider string) (entries []Entry, filled bool, err error) {
	var (
		exists *redis.IntCmd
		rng    *redis.ZSliceCmd
		users  *redis.MapStringStringCmd
	)
	_, err = x.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, x.filledKey(provider))
		rng = p.ZRangeWithScores(ctx, x.key(provider), 0, -1)
		users = p.HGetAll(ctx, x.usersKey(provider))
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("find the running sandboxes of %s: %w", provider, err)
	}
	entries = entriesOf(rng.Val())
	for i := range entries {
		entries[i].UserID = users.Val()[entries[i].SandboxID]
	}
	return entries, exists.Val() == 1, nil
}

// Fill adds entries, read from the records, to provider's set, never
// moving a sandbox's time back, with the users they name, and then marks
// the set filled. entries should hold every running sandbox of the
// provider. It returns how many of them the set was missing.
func (x *Index) Fill(ctx context.Context, provider string, entries []Entry) (added int, err error) {
	for chunk := range slices.Chunk(entries, fillChunk) {
		members := make([]redis.Z, len(chunk))
		var users []any
		for i, e := range chunk {
			members[i] = redis.Z{Score: score(e.LastActiveAt), Member: e.SandboxID}
			if e.UserID != "" {
				users = append(users, e.SandboxID, e.UserID)
			}
		}
		var zadd *redis.IntCmd
		_, err := x.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			zadd = p.ZAddArgs(ctx, x.key(provider), redis.ZAddArgs{GT: true, Members: members})
			if len(users) > 0 {
				p.HSet(ctx, x.usersKey(provider), users...)
			}
			return nil
		})
		if err != nil {
			return added, fmt.Errorf("fill the activity of %s: %w", provider, err)
		}
		added += int(zadd.Val())
	}
	if err := x.rdb.Set(ctx, x.filledKey(provider), "1", 0).Err(); err != nil {
		return added, fmt.Errorf("fill the activity of %s: %w", provider, err)
	}
	return added, nil
}

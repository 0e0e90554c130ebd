package mongostore

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/flowbox/flowbox/sandbox"
)

// The queries below serve the workers. Each is hinted to the index that
// answers it on MongoDB; FerretDB ignores hints and decodes the whole
// collection for every one of them.

// ByChats returns the records of the chats, of every provider. The chats
// are of one app; a chat without a user stands for that chat id of every
// user (an intent recorded before chat ids were scoped).
func (s *Store) ByChats(ctx context.Context, appID string, chats []sandbox.Scope) ([]sandbox.Instance, error) {
	ids := make([]string, len(chats))
	want := map[sandbox.Scope]bool{}
	for i, c := range chats {
		ids[i] = c.ChatID
		want[c] = true
	}
	filter := bson.D{
		{Key: "appId", Value: appID},
		{Key: "chatId", Value: bson.D{{Key: "$in", Value: ids}}},
	}
	found, err := s.find(ctx, filter, options.Find().SetHint(IndexChat))
	if err != nil {
		return nil, fmt.Errorf("find sandbox records of %d chats of app %s: %w", len(chats), appID, err)
	}
	out := found[:0]
	for _, inst := range found {
		if want[inst.Scope()] || want[sandbox.Scope{AppID: inst.AppID, ChatID: inst.ChatID}] {
			out = append(out, inst)
		}
	}
	return out, nil
}

// ByApp returns up to limit records of appID, of every provider; limit
// <= 0 means all.
func (s *Store) ByApp(ctx context.Context, appID string, limit int) ([]sandbox.Instance, error) {
	opts := options.Find().SetHint(IndexChat)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	out, err := s.find(ctx, bson.D{{Key: "appId", Value: appID}}, opts)
	if err != nil {
		return nil, fmt.Errorf("find sandbox records of app %s: %w", appID, err)
	}
	return out, nil
}

// ByProvider returns every record of provider, for reconciliation.
func (s *Store) ByProvider(ctx context.Context, provider string) ([]sandbox.Instance, error) {
	out, err := s.find(ctx, bson.D{{Key: "provider", Value: provider}}, options.Find().SetHint(IndexSandbox))
	if err != nil {
		return nil, fmt.Errorf("find sandbox records of %s: %w", provider, err)
	}
	return out, nil
}

func (s *Store) find(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder) ([]sandbox.Instance, error) {
	cur, err := s.coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Instance
	if err := cur.All(ctx, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ForgetActivity takes sandboxes out of the activity index (a no-op
// without one): the stop scan's stale candidates, whose records are gone
// or no longer running. Failures are only logged: a stale entry costs the
// next scan one more look at the record.
func (s *Store) ForgetActivity(ctx context.Context, provider string, sandboxIDs ...string) {
	s.forget(ctx, provider, sandboxIDs...)
}

var _ sandbox.RunningCounter = (*Store)(nil)

// runningReads bounds the record reads RunningUsers makes at once.
const runningReads = 8

// RunningUsers returns the userId of every running record of provider,
// for the manager's caps.
//
// Without an activity index the records are queried, hinted to the
// {status, lastActiveAt} index: MongoDB reads only the running ones. With
// one (FerretDB, which would decode every record for that query), the
// candidates are the index's sandboxes, with the users it keeps for them:
// one round trip whatever the number running. Exact or not, an entry whose
// user the index does not know is checked by reading its record by _id,
// the lookup FerretDB answers from SQLite's index; exact, every entry is.
// The index may hold stale entries (a sandbox stopped, its entry's removal
// failed: counted unless exact) or, after a failed Redis write, miss a
// running sandbox until reconciliation refreshes it; when Redis has lost
// it, it is filled again from the records first, as for Idle.
func (s *Store) RunningUsers(ctx context.Context, provider string, exact bool) ([]string, error) {
	if s.activity == nil {
		filter := bson.D{{Key: "status", Value: sandbox.StatusRunning}, {Key: "provider", Value: provider}}
		opts := options.Find().SetHint(IndexIdle).SetProjection(bson.D{{Key: "userId", Value: 1}})
		out, err := s.find(ctx, filter, opts)
		if err != nil {
			return nil, fmt.Errorf("find running sandbox records of %s: %w", provider, err)
		}
		users := make([]string, len(out))
		for i, r := range out {
			users[i] = r.UserID
		}
		return users, nil
	}
	entries, filled, err := s.activity.Running(ctx, provider)
	if err == nil && !filled {
		if _, err = s.FillActivity(ctx, provider); err == nil {
			entries, _, err = s.activity.Running(ctx, provider)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("find running sandboxes of %s: %w", provider, err)
	}
	users, running := make([]string, len(entries)), make([]bool, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runningReads)
	for i, e := range entries {
		if e.UserID != "" && !exact {
			users[i], running[i] = e.UserID, true
			continue
		}
		g.Go(func() error {
			var r sandbox.Instance
			err := s.coll.FindOne(gctx, key(provider, e.SandboxID), options.FindOne().SetProjection(bson.D{{Key: "userId", Value: 1}, {Key: "status", Value: 1}})).Decode(&r)
			switch {
			case errors.Is(err, mongo.ErrNoDocuments):
				return nil
			case err != nil:
				return fmt.Errorf("read sandbox record %s/%s: %w", provider, e.SandboxID, err)
			}
			users[i], running[i] = r.UserID, r.Status == sandbox.StatusRunning
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("find running sandboxes of %s: %w", provider, err)
	}
	out := users[:0]
	for i, u := range users {
		if running[i] {
			out = append(out, u)
		}
	}
	return out, nil
}

// RunningOf returns the running records of one user, for the manager's
// per-user cap (sandbox.IdleStopper): the user's least recently used idle
// sandbox is stopped to make room. It is asked only at the cap, so a
// query on the records (no index on userId) is cheap enough.
func (s *Store) RunningOf(ctx context.Context, provider, userID string) ([]sandbox.Instance, error) {
	filter := bson.D{{Key: "provider", Value: provider}, {Key: "userId", Value: userID}, {Key: "status", Value: sandbox.StatusRunning}}
	out, err := s.find(ctx, filter, options.Find())
	if err != nil {
		return nil, fmt.Errorf("find the running sandboxes of %s: %w", userID, err)
	}
	return out, nil
}

var _ sandbox.IdleStopper = (*Store)(nil)

package mongostore

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
)

// idleQuery is Idle's filter, sort and index, shared with its explain.
func idleQuery(provider string, before time.Time) (filter, sort bson.D) {
	filter = bson.D{
		{Key: "status", Value: sandbox.StatusRunning},
		{Key: "lastActiveAt", Value: bson.D{{Key: "$lt", Value: before.UTC()}}},
		{Key: "provider", Value: provider},
	}
	sort = bson.D{{Key: "lastActiveAt", Value: 1}}
	return filter, sort
}

// Idle returns up to limit running records of provider whose lastActiveAt
// is before before, least recently active first (S7's stop scan). limit <= 0
// means no limit.
//
// Without an activity index the records are queried, hinted to the
// {status, lastActiveAt} index so that MongoDB never picks the {provider,
// sandboxId} one, which would read every record of the provider. FerretDB
// ignores hints and decodes every record.
//
// With one (WithActivity) the candidates come from it, and only their
// Provider, SandboxID, Status (running) and LastActiveAt are set. They
// may be stale: a caller acts on one only after reading its record again
// (the stop scan does, under its claim). When Redis has lost the index, it
// is filled again from the records first, which costs one full query.
func (s *Store) Idle(ctx context.Context, provider string, before time.Time, limit int) ([]sandbox.Instance, error) {
	if s.activity == nil {
		return s.idleRecords(ctx, provider, before, limit)
	}
	entries, filled, err := s.activity.Before(ctx, provider, before, limit)
	if err == nil && !filled {
		s.log.Info("sandbox store: filling the activity index from the records", "provider", provider)
		if _, err = s.FillActivity(ctx, provider); err == nil {
			entries, _, err = s.activity.Before(ctx, provider, before, limit)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("find idle sandboxes of %s: %w", provider, err)
	}
	out := make([]sandbox.Instance, len(entries))
	for i, e := range entries {
		out[i] = sandbox.Instance{Provider: provider, SandboxID: e.SandboxID, Status: sandbox.StatusRunning, LastActiveAt: e.LastActiveAt}
	}
	return out, nil
}

func (s *Store) idleRecords(ctx context.Context, provider string, before time.Time, limit int) ([]sandbox.Instance, error) {
	filter, sort := idleQuery(provider, before)
	opts := options.Find().SetSort(sort).SetHint(IndexIdle)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("find idle sandbox records of %s: %w", provider, err)
	}
	var out []sandbox.Instance
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("find idle sandbox records of %s: %w", provider, err)
	}
	return out, nil
}

// FillActivity puts every running record of provider into the activity
// index (a no-op without one) and returns how many it was missing. Idle
// calls it when Redis has lost the index.
func (s *Store) FillActivity(ctx context.Context, provider string) (int, error) {
	if s.activity == nil {
		return 0, nil
	}
	running, err := s.find(ctx, bson.D{{Key: "provider", Value: provider}, {Key: "status", Value: sandbox.StatusRunning}}, options.Find().SetHint(IndexIdle))
	if err != nil {
		return 0, fmt.Errorf("fill the activity index of %s: %w", provider, err)
	}
	return s.RefreshActivity(ctx, provider, running)
}

// RefreshActivity puts the running ones of records, read a moment ago,
// into the activity index (a no-op without one) and returns how many it
// was missing: reconciliation's repair of entries that Touch could not
// write. A sandbox used since keeps its later time.
func (s *Store) RefreshActivity(ctx context.Context, provider string, records []sandbox.Instance) (int, error) {
	if s.activity == nil {
		return 0, nil
	}
	var entries []activity.Entry
	for _, r := range records {
		if r.Provider == provider && r.Status == sandbox.StatusRunning {
			entries = append(entries, activity.Entry{SandboxID: r.SandboxID, LastActiveAt: r.LastActiveAt, UserID: r.UserID})
		}
	}
	return s.activity.Fill(ctx, provider, entries)
}

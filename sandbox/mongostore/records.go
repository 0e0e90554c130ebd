package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
)

// The queries below serve the workers. Each is hinted to the index that
// answers it on MongoDB; FerretDB ignores hints and decodes the whole
// collection for every one of them.

// ByChats returns the records of the chats of appID, of every provider.
func (s *Store) ByChats(ctx context.Context, appID string, chatIDs []string) ([]sandbox.Instance, error) {
	filter := bson.D{
		{Key: "appId", Value: appID},
		{Key: "chatId", Value: bson.D{{Key: "$in", Value: chatIDs}}},
	}
	out, err := s.find(ctx, filter, options.Find().SetHint(IndexChat))
	if err != nil {
		return nil, fmt.Errorf("find sandbox records of %d chats of app %s: %w", len(chatIDs), appID, err)
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

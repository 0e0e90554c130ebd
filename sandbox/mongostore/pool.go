package mongostore

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
)

// PoolCollection holds one document per warm pool member (sandbox.PoolMember),
// _id "<provider>/<poolId>". A member is taken by claiming its pool id in
// sandbox_claims, never by updating its document: FerretDB's updates are
// not atomic.
const PoolCollection = "sandbox_pool"

// IndexPool serves Members.
const IndexPool = "provider_createdAt"

var _ sandbox.PoolStore = (*Store)(nil)

type poolDoc struct {
	ID                 string `bson:"_id"`
	sandbox.PoolMember `bson:",inline"`
}

// AddMember records a member being created.
func (s *Store) AddMember(ctx context.Context, m sandbox.PoolMember) error {
	doc := poolDoc{ID: recordID(m.Provider, m.PoolID), PoolMember: m}
	doc.CreatedAt = doc.CreatedAt.UTC()
	if err := write(ctx, func() error { _, err := s.pool.InsertOne(ctx, doc); return err }); err != nil {
		return fmt.Errorf("record warm pool member %s: %w", m.PoolID, err)
	}
	return nil
}

// SetMemberReady marks a member created and started.
func (s *Store) SetMemberReady(ctx context.Context, provider, poolID string) error {
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "ready", Value: true}}}}
	err := write(ctx, func() error {
		res, err := s.pool.UpdateOne(ctx, bson.D{{Key: "_id", Value: recordID(provider, poolID)}}, update)
		if err == nil && res.MatchedCount == 0 {
			return fmt.Errorf("%w: no document", sandbox.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("mark warm pool member %s ready: %w", poolID, err)
	}
	return nil
}

// Members returns the provider's members, oldest first.
func (s *Store) Members(ctx context.Context, provider string) ([]sandbox.PoolMember, error) {
	cur, err := s.pool.Find(ctx, bson.D{{Key: "provider", Value: provider}},
		options.Find().SetSort(bson.D{{Key: "createdAt", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("read the warm pool: %w", err)
	}
	var docs []poolDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read the warm pool: %w", err)
	}
	out := make([]sandbox.PoolMember, len(docs))
	for i, d := range docs {
		out[i] = d.PoolMember
	}
	return out, nil
}

// RemoveMember removes a member's document; a missing one is not an error.
func (s *Store) RemoveMember(ctx context.Context, provider, poolID string) error {
	filter := bson.D{{Key: "_id", Value: recordID(provider, poolID)}}
	if err := write(ctx, func() error { _, err := s.pool.DeleteOne(ctx, filter); return err }); err != nil {
		return fmt.Errorf("remove warm pool member %s: %w", poolID, err)
	}
	return nil
}

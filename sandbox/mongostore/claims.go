package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ClaimsCollection holds one document per sandbox that the stop scan or
// reconciliation is working on. It stays small: claims live for the few
// seconds of a provider call, but for the warm pool's, which stay until
// reconciliation drops them as stale (one per member adopted in the last
// minutes; see sandbox.PoolStore).
const ClaimsCollection = "sandbox_claims"

// IndexClaimedAt serves the search for stale claims.
const IndexClaimedAt = "claimedAt"

// Claim is one document of sandbox_claims. Its _id is the record's,
// "<provider>/<sandboxId>", so that inserting it is the claim: the unique
// _id lets one holder in, on MongoDB and on FerretDB alike.
type Claim struct {
	ID        string    `bson:"_id"`
	Provider  string    `bson:"provider"`
	SandboxID string    `bson:"sandboxId"`
	Owner     string    `bson:"owner"`  // the worker process, for operators
	Reason    string    `bson:"reason"` // "stop", "orphan", "vanished", ...
	ClaimedAt time.Time `bson:"claimedAt"`
}

// codeDuplicateKey is the server's duplicate key error.
const codeDuplicateKey = 11000

// Claim claims the sandboxes ids of provider for owner, in one insert,
// and returns those it got: a sandbox already claimed (by anyone, owner
// included) is left out. Commands wait while a sandbox is claimed
// (sandbox.ErrBusy), so a holder re-reads the record after claiming and
// releases the claim soon.
func (s *Store) Claim(ctx context.Context, provider string, ids []string, owner, reason string, now time.Time) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var got []string
	err := write(ctx, func() (err error) {
		got, err = s.claim(ctx, provider, ids, owner, reason, now)
		return err
	})
	return got, err
}

// claim is one attempt of Claim; on failure it has released whatever it
// inserted.
func (s *Store) claim(ctx context.Context, provider string, ids []string, owner, reason string, now time.Time) ([]string, error) {
	docs := make([]any, len(ids))
	for i, id := range ids {
		docs[i] = Claim{ID: recordID(provider, id), Provider: provider, SandboxID: id, Owner: owner, Reason: reason, ClaimedAt: now.UTC()}
	}
	_, err := s.claims.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return ids, nil
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		// Some may have been inserted; give them back.
		return nil, errors.Join(fmt.Errorf("claim %d sandboxes of %s: %w", len(ids), provider, err), s.Release(ctx, provider, ids, owner))
	}
	taken := make(map[int]bool, len(bwe.WriteErrors))
	var others []error
	for _, we := range bwe.WriteErrors {
		if we.Code == codeDuplicateKey {
			taken[we.Index] = true
		} else {
			others = append(others, we)
		}
	}
	if len(others) > 0 {
		return nil, errors.Join(fmt.Errorf("claim %d sandboxes of %s: %w", len(ids), provider, errors.Join(others...)), s.Release(ctx, provider, ids, owner))
	}
	got := make([]string, 0, len(ids)-len(taken))
	for i, id := range ids {
		if !taken[i] {
			got = append(got, id)
		}
	}
	return got, nil
}

// Release gives back owner's claims on the sandboxes ids of provider.
// Claims of other owners are left alone, so a holder whose claim was
// taken for stale never releases its successor's.
func (s *Store) Release(ctx context.Context, provider string, ids []string, owner string) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = recordID(provider, id)
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: "owner", Value: owner}}
	if err := write(ctx, func() error { _, err := s.claims.DeleteMany(ctx, filter); return err }); err != nil {
		return fmt.Errorf("release %d claims on sandboxes of %s: %w", len(ids), provider, err)
	}
	return nil
}

// StaleClaims returns the claims taken before before: their holder died
// or hangs.
func (s *Store) StaleClaims(ctx context.Context, before time.Time) ([]Claim, error) {
	cur, err := s.claims.Find(ctx, bson.D{{Key: "claimedAt", Value: bson.D{{Key: "$lt", Value: before.UTC()}}}},
		options.Find().SetHint(IndexClaimedAt))
	if err != nil {
		return nil, fmt.Errorf("find stale claims: %w", err)
	}
	var out []Claim
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("find stale claims: %w", err)
	}
	return out, nil
}

// DropClaim removes exactly c (same holder, same time), so that a claim
// taken again in the meantime stays.
func (s *Store) DropClaim(ctx context.Context, c Claim) error {
	filter := bson.D{{Key: "_id", Value: c.ID}, {Key: "owner", Value: c.Owner}, {Key: "claimedAt", Value: c.ClaimedAt}}
	if err := write(ctx, func() error { _, err := s.claims.DeleteOne(ctx, filter); return err }); err != nil {
		return fmt.Errorf("drop the claim on %s: %w", c.ID, err)
	}
	return nil
}

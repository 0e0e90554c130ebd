package history

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ByUser returns every chat of a user, in every app, without their recent
// messages: what goes when the user's account is deleted.
func (s *Store) ByUser(ctx context.Context, userID string) ([]Chat, error) {
	cur, err := s.chats.Find(ctx, bson.D{{Key: "userId", Value: userID}}, options.Find().SetProjection(bson.D{{Key: "recent", Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("list chats of user %s: %w", userID, err)
	}
	var out []Chat
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list chats of user %s: %w", userID, err)
	}
	return out, nil
}

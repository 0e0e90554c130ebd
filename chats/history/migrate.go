package history

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/sandbox"
)

// Migrate moves the chats written before chat ids were scoped per app and
// user (keyed by their chat id alone, with no chatId field) to their
// keys, items first, and reports how many it moved. It runs before the
// engine serves. A migration cut short is finished by the next: a moved
// document is written again as it was (duplicates are skipped), and the
// old ones go last.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	cur, err := s.chats.Find(ctx, bson.D{{Key: "chatId", Value: bson.D{{Key: "$exists", Value: false}}}})
	if err != nil {
		return 0, fmt.Errorf("find chats to migrate: %w", err)
	}
	var old []bson.M
	if err := cur.All(ctx, &old); err != nil {
		return 0, fmt.Errorf("find chats to migrate: %w", err)
	}
	for i, doc := range old {
		if err := s.migrate(ctx, doc); err != nil {
			return i, err
		}
	}
	return len(old), nil
}

// migrate moves one chat document of the old shape and its items.
func (s *Store) migrate(ctx context.Context, doc bson.M) error {
	chatID, _ := doc["_id"].(string)
	appID, _ := doc["appId"].(string)
	userID, _ := doc["userId"].(string)
	if chatID == "" || appID == "" {
		return fmt.Errorf("migrate chat %v: it names no app", doc["_id"])
	}
	key := sandbox.Scope{AppID: appID, UserID: userID, ChatID: chatID}.ChatKey()
	if key == chatID {
		// An old chat id that spells its own key ("a/u/c" of app a and
		// user u): already where it belongs.
		_, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: key}}, bson.D{{Key: "$set", Value: bson.D{{Key: "chatId", Value: chatID}}}})
		if err != nil {
			return fmt.Errorf("migrate chat %s: %w", chatID, err)
		}
		return nil
	}
	count := 0
	if n, ok := doc["items"].(int32); ok {
		count = int(n)
	} else if n, ok := doc["items"].(int64); ok {
		count = int(n)
	}
	// The items: each is copied under the chat's key, then the old ones
	// deleted, after the chat document is in place.
	var moved []string
	for seq := 0; ; {
		var item bson.M
		err := s.items.FindOne(ctx, bson.D{{Key: "_id", Value: itemID(chatID, seq)}}).Decode(&item)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if seq >= count {
				break
			}
			seq++
			continue
		}
		if err != nil {
			return fmt.Errorf("migrate chat %s: read item %d: %w", chatID, seq, err)
		}
		moved = append(moved, itemID(chatID, seq))
		item["_id"], item["chatId"] = itemID(key, seq), key
		if _, err := s.items.InsertOne(ctx, item); err != nil && !mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("migrate chat %s: write item %d: %w", chatID, seq, err)
		}
		if _, answer := item["answer"]; answer {
			seq += 2
		} else {
			seq++
		}
	}
	doc["_id"], doc["chatId"] = key, chatID
	if _, err := s.chats.InsertOne(ctx, doc); err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("migrate chat %s: write it: %w", chatID, err)
	}
	if len(moved) > 0 {
		if _, err := s.items.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: moved}}}}); err != nil {
			return fmt.Errorf("migrate chat %s: delete its old items: %w", chatID, err)
		}
	}
	if _, err := s.chats.DeleteOne(ctx, bson.D{{Key: "_id", Value: chatID}}); err != nil {
		return fmt.Errorf("migrate chat %s: delete its old document: %w", chatID, err)
	}
	return nil
}

package mongostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// GenerationCollection holds one document, the deletions' generation: a
// random token that every request of a deletion replaces once the intent
// is recorded. An engine that found a chat not deleted under one token
// knows, reading the same token later, that no deletion was requested
// since, by any engine, and skips the two lookups of the chat's and its
// app's intents. A token is never written twice, so, whatever order
// concurrent requests land in, a reader never finds an old token again
// after a change. A deletion intent written to the database by other
// means than RequestDeletions is seen by engines once the generation
// next changes.
const GenerationCollection = "sandbox_deletion_generation"

// generationID is the _id of the one document of GenerationCollection.
const generationID = "deletions"

// generationAttempts bounds the retries of the token's first upsert,
// which two first requests can both try to insert.
const generationAttempts = 3

// readGeneration returns the current token; empty when no deletion was
// ever requested.
func (s *Store) readGeneration(ctx context.Context) (string, error) {
	var doc struct {
		Token string `bson:"token"`
	}
	err := s.generation.FindOne(ctx, bson.D{{Key: "_id", Value: generationID}}).Decode(&doc)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the deletions' generation: %w", err)
	}
	return doc.Token, nil
}

// nextGeneration replaces the token with a new one.
func (s *Store) nextGeneration(ctx context.Context, now time.Time) error {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails
	update := bson.D{{Key: "$set", Value: bson.D{
		{Key: "token", Value: hex.EncodeToString(b)},
		{Key: "changedAt", Value: now.UTC()},
	}}}
	var err error
	for range generationAttempts {
		err = write(ctx, func() error {
			_, err := s.generation.UpdateOne(ctx, bson.D{{Key: "_id", Value: generationID}}, update, options.UpdateOne().SetUpsert(true))
			return err
		})
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("change the deletions' generation: %w", err)
	}
	return nil
}

// clearedChats remembers, per chat deletion key, the generation under
// which the chat was last found not deleted. It holds at most
// clearedMax chats and forgets them all when full: a chat forgotten costs
// its next command the two lookups.
type clearedChats struct {
	mu sync.Mutex
	m  map[string]string
}

const clearedMax = 8192

// under reports whether chat was found not deleted under generation gen.
func (c *clearedChats) under(chat, gen string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[chat]
	return ok && got == gen
}

// remember records that chat was found not deleted under generation gen.
func (c *clearedChats) remember(chat, gen string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= clearedMax {
		c.m = make(map[string]string)
	}
	c.m[chat] = gen
}

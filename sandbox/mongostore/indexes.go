package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/mongodb"
)

// fallbackOnce keeps the partial-index warning to one per process, however
// many stores are opened (one per test database, say).
var fallbackOnce sync.Once

func (s *Store) createIndexes(ctx context.Context, logger *slog.Logger) error {
	// One createIndexes command per index: FerretDB 1.24 drops the
	// connection when a single command names more than one index that
	// already exists, which is every start but the first. A server that
	// refuses the partial index also fails only its own command.
	for _, m := range []mongo.IndexModel{
		{Keys: sandboxKeys, Options: options.Index().SetName(IndexSandbox).SetUnique(true)},
		{Keys: idleKeys, Options: options.Index().SetName(IndexIdle)},
	} {
		if _, err := s.coll.Indexes().CreateOne(ctx, m); err != nil {
			return err
		}
	}
	// Chat ids are scoped per app and user: two users' chats "c1" of one
	// app are two chats with a sandbox each, which the old index refused.
	if err := s.coll.Indexes().DropOne(ctx, indexChatUnscoped); err != nil && !hasCode(err, codeIndexNotFound, codeNamespaceNotFound) {
		return fmt.Errorf("drop the index %s of one sandbox per app and chat id: %w", indexChatUnscoped, err)
	}

	_, err := s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    chatKeys,
		Options: options.Index().SetName(IndexChat).SetUnique(true).SetPartialFilterExpression(chatFilter),
	})
	var why string
	switch {
	case err == nil:
		// A server could accept the option and drop it; look.
		idx, err := s.indexes(ctx)
		if err != nil {
			return err
		}
		if idx[IndexChat].PartialFilterExpression != nil {
			return nil
		}
		why = "the server accepted partialFilterExpression but did not keep it"
	case hasCode(err, codeNotImplemented):
		why = "the server does not implement partial indexes: " + err.Error()
	case hasCode(err, codeIndexOptionsConflict, codeIndexKeySpecsConflict):
		// Typically data moved from the embedded database to MongoDB,
		// with the fallback index still in place.
		return fmt.Errorf("index %s exists with other options; drop it so that it can be recreated: %w", IndexChat, err)
	default:
		return err
	}

	// Closest equivalent: a plain unique index. It differs only on records
	// lacking appId, userId or chatId, and Touch refuses to write those.
	_, err = s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    chatKeys,
		Options: options.Index().SetName(IndexChat).SetUnique(true),
	})
	if err != nil {
		return err
	}
	fallbackOnce.Do(func() {
		// The embedded database never has partial indexes, and the plain
		// index is sound: nothing is wrong, so nothing is said above
		// debug. Another server without them is worth a line.
		msg := "sandbox store: %s has no partial indexes; one sandbox per chat is enforced by a plain unique index on {appId, userId, chatId}, sound because every record this store writes has all three"
		if ferret, err := mongodb.IsFerretDB(ctx, s.coll.Database().Client()); err == nil && ferret {
			logger.Debug(fmt.Sprintf(msg, "FerretDB"), "collection", Collection, "index", IndexChat)
			return
		}
		logger.Info(fmt.Sprintf(msg, "this server"), "collection", Collection, "index", IndexChat, "reason", why)
	})
	return nil
}

func hasCode(err error, codes ...int) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range codes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

// index is one entry of listIndexes, as much of it as the store checks.
type index struct {
	Name                    string   `bson:"name"`
	Key                     bson.D   `bson:"key"`
	Unique                  bool     `bson:"unique"`
	PartialFilterExpression bson.Raw `bson:"partialFilterExpression,omitempty"`
}

// indexes lists the collection's indexes by name.
func (s *Store) indexes(ctx context.Context) (map[string]index, error) {
	cur, err := s.coll.Indexes().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	var all []index
	if err := cur.All(ctx, &all); err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	out := make(map[string]index, len(all))
	for _, idx := range all {
		out[idx.Name] = idx
	}
	return out, nil
}

package mongostore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
)

// DeletionsCollection holds the deletion intents of chats and apps: pending
// until their sandboxes and records are gone, then done, kept as
// tombstones so that a late command cannot bring a deleted chat's sandbox
// back, and purged after a while.
const DeletionsCollection = "sandbox_deletions"

// IndexDeletionState serves the search for pending deletions.
const IndexDeletionState = "state_requestedAt"

// Deletion states.
const (
	DeletionPending = "pending"
	DeletionDone    = "done"
)

// Deletion is one document of sandbox_deletions: the intent to delete the
// sandboxes of one chat (ChatID set) or of a whole app.
type Deletion struct {
	// ID is ChatDeletionKey or AppDeletionKey: one intent per chat or app.
	ID    string `bson:"_id"`
	AppID string `bson:"appId"`
	// UserID is the chat's user; empty in intents recorded before chat
	// ids were scoped per app and user, which stand for the chat id of
	// every user of the app.
	UserID      string    `bson:"userId,omitempty"`
	ChatID      string    `bson:"chatId,omitempty"`
	State       string    `bson:"state"`
	RequestedAt time.Time `bson:"requestedAt"`
	// TaskID names the queue task that carries the deletion out, so that
	// reconciliation can tell a lost task from a waiting or failed one.
	TaskID string    `bson:"taskId,omitempty"`
	DoneAt time.Time `bson:"doneAt,omitempty"`
}

// ChatDeletionKey is the _id of a chat's deletion intent: its app, user
// and chat id, escaped (sandbox.Scope.ChatKey), so that no chat can spell
// another's key. A scope without a user gives the key of an intent
// recorded before chat ids were scoped: app and chat only, one part
// fewer, so it never equals a scoped one.
func ChatDeletionKey(chat sandbox.Scope) string {
	if chat.UserID == "" {
		return "chat/" + url.PathEscape(chat.AppID) + "/" + url.PathEscape(chat.ChatID)
	}
	return "chat/" + chat.ChatKey()
}

// AppDeletionKey is the _id of an app's deletion intent.
func AppDeletionKey(appID string) string { return "app/" + url.PathEscape(appID) }

// ChatDeletion is a pending intent to delete a chat's sandbox.
func ChatDeletion(chat sandbox.Scope, taskID string, now time.Time) Deletion {
	return Deletion{ID: ChatDeletionKey(chat), AppID: chat.AppID, UserID: chat.UserID, ChatID: chat.ChatID, State: DeletionPending,
		RequestedAt: now.UTC(), TaskID: taskID}
}

// Chat is the chat of a chat's intent (UserID empty in an old one).
func (d Deletion) Chat() sandbox.Scope {
	return sandbox.Scope{AppID: d.AppID, UserID: d.UserID, ChatID: d.ChatID}
}

// AppDeletion is a pending intent to delete every sandbox of an app.
func AppDeletion(appID, taskID string, now time.Time) Deletion {
	return Deletion{ID: AppDeletionKey(appID), AppID: appID, State: DeletionPending, RequestedAt: now.UTC(), TaskID: taskID}
}

func (d Deletion) describe() string {
	if d.ChatID != "" && d.UserID != "" {
		return fmt.Sprintf("chat %s of user %s in app %s", d.ChatID, d.UserID, d.AppID)
	}
	if d.ChatID != "" {
		return fmt.Sprintf("chat %s of app %s", d.ChatID, d.AppID)
	}
	return "app " + d.AppID
}

// RequestDeletions records the intents, durably, as pending, then changes
// the deletions' generation (see GenerationCollection). An intent
// already recorded, pending or done, becomes pending again with the new
// task: deleting twice is harmless and finds what a first deletion may
// have missed.
func (s *Store) RequestDeletions(ctx context.Context, ds []Deletion) error {
	if len(ds) == 0 {
		return nil
	}
	// Trying again is safe: what the first try inserted is then updated.
	if err := write(ctx, func() error { return s.requestDeletions(ctx, ds) }); err != nil {
		return err
	}
	// After the intents: an engine that reads the new generation finds
	// them (Deleted).
	if err := s.nextGeneration(ctx, time.Now()); err != nil {
		return fmt.Errorf("record %d deletion intents: recorded, but engines that ran the chats' commands lately may not see them; request the deletion again: %w", len(ds), err)
	}
	return nil
}

func (s *Store) requestDeletions(ctx context.Context, ds []Deletion) error {
	docs := make([]any, len(ds))
	for i, d := range ds {
		docs[i] = d
	}
	// One insert for all: on FerretDB a batch costs about what a single
	// document does.
	_, err := s.deletions.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err == nil {
		return nil
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return fmt.Errorf("record %d deletion intents: %w", len(ds), err)
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != codeDuplicateKey {
			return fmt.Errorf("record %d deletion intents: %w", len(ds), we)
		}
		d := ds[we.Index]
		_, err := s.deletions.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, bson.D{
			{Key: "$set", Value: bson.D{{Key: "state", Value: DeletionPending}, {Key: "taskId", Value: d.TaskID}}},
			{Key: "$unset", Value: bson.D{{Key: "doneAt", Value: ""}}},
		})
		if err != nil {
			return fmt.Errorf("record the deletion of %s again: %w", d.describe(), err)
		}
	}
	return nil
}

// PendingDeletions returns up to limit pending intents recorded before
// before, oldest first; limit <= 0 means all.
func (s *Store) PendingDeletions(ctx context.Context, before time.Time, limit int) ([]Deletion, error) {
	opts := options.Find().SetHint(IndexDeletionState).SetSort(bson.D{{Key: "requestedAt", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.deletions.Find(ctx, bson.D{
		{Key: "state", Value: DeletionPending},
		{Key: "requestedAt", Value: bson.D{{Key: "$lt", Value: before.UTC()}}},
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("find pending deletions: %w", err)
	}
	var out []Deletion
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("find pending deletions: %w", err)
	}
	return out, nil
}

// GetDeletion returns the intent with the given key, or an error wrapping
// mongo.ErrNoDocuments.
func (s *Store) GetDeletion(ctx context.Context, id string) (Deletion, error) {
	var d Deletion
	if err := s.deletions.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d); err != nil {
		return Deletion{}, fmt.Errorf("get deletion %s: %w", id, err)
	}
	return d, nil
}

// SetDeletionTask records which task now carries the pending intents ids.
func (s *Store) SetDeletionTask(ctx context.Context, ids []string, taskID string) error {
	if len(ids) == 0 {
		return nil
	}
	err := write(ctx, func() error {
		_, err := s.deletions.UpdateMany(ctx,
			bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "state", Value: DeletionPending}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "taskId", Value: taskID}}}})
		return err
	})
	if err != nil {
		return fmt.Errorf("record task %s for %d deletions: %w", taskID, len(ids), err)
	}
	return nil
}

// FinishDeletions marks the pending intents ids done at now; they stay as
// tombstones until PurgeDeletions.
func (s *Store) FinishDeletions(ctx context.Context, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := write(ctx, func() error {
		_, err := s.deletions.UpdateMany(ctx,
			bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "state", Value: DeletionPending}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "state", Value: DeletionDone}, {Key: "doneAt", Value: now.UTC()}}}})
		return err
	})
	if err != nil {
		return fmt.Errorf("mark %d deletions done: %w", len(ids), err)
	}
	return nil
}

// PurgeDeletions removes the tombstones of deletions done before before
// and returns how many it removed.
func (s *Store) PurgeDeletions(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := write(ctx, func() error {
		res, err := s.deletions.DeleteMany(ctx, bson.D{
			{Key: "state", Value: DeletionDone},
			{Key: "doneAt", Value: bson.D{{Key: "$lt", Value: before.UTC()}}},
		})
		if err == nil {
			n = res.DeletedCount
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge deletions done before %s: %w", before.Format(time.RFC3339), err)
	}
	return n, nil
}

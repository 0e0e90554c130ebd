// Package history keeps chats and their items in MongoDB so that a chat
// can be reloaded and continued: each question and answer, with the tool
// calls (arguments, result, duration) and the nodes' responses of the run.
//
// Every read and write goes through _id: the embedded database (FerretDB
// on SQLite) answers only _id lookups from an index and scans the whole
// collection for anything else. A chat document carries the recent
// messages a model needs; items are keyed "<chatId>/<seq>".
//
// FerretDB applies updates as read-modify-write without a lock, so two
// concurrent updates of one document can lose one; only inserts under a
// unique _id are atomic there. Items therefore claim their seq by
// inserting under it (retrying on a duplicate), and readers walk seqs
// until the first gap; the chat's item count is a hint, and two turns of
// one chat finishing at the same instant may leave one of them out of the
// recent messages (never out of the items). It must never decide who may read a chat: callers
// check ownership (Chat.AppID, Chat.UserID) before they use it.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/internal/llm"
)

// Collections.
const (
	ChatsCollection = "chats"
	ItemsCollection = "chat_items"
)

var (
	// ErrNotFound: no such chat or item.
	ErrNotFound = errors.New("chat not found")
	// ErrNotOwner: the chat exists but belongs to another app or user.
	ErrNotOwner = errors.New("chat belongs to another app or user")
)

// recentKeep is how many messages a chat keeps for models; the array is
// cut back to it when it grows past twice that.
const recentKeep = 100

// Chat is a chat's document.
type Chat struct {
	ID        string        `bson:"_id" json:"chatId"`
	AppID     string        `bson:"appId" json:"appId"`
	UserID    string        `bson:"userId" json:"userId"`
	Title     string        `bson:"title" json:"title"`
	Items     int           `bson:"items" json:"items"`
	CreatedAt time.Time     `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time     `bson:"updatedAt" json:"updatedAt"`
	Recent    []llm.Message `bson:"recent" json:"-"`
}

// Item is one message of a chat. ToolCalls and Responses are JSON as the
// engine produced it; they are stored as JSON text, because their shapes
// are open and the embedded database refuses some (nested arrays).
type Item struct {
	ID         string          `json:"dataId"`
	ChatID     string          `json:"chatId"`
	Seq        int             `json:"seq"`
	Role       string          `json:"role"` // user | assistant
	Text       string          `json:"text"`
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty"`
	Responses  json.RawMessage `json:"responses,omitempty"`
	DurationMs int64           `json:"durationMs,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// itemDoc is an Item as stored.
type itemDoc struct {
	ID         string    `bson:"_id"`
	ChatID     string    `bson:"chatId"`
	Seq        int       `bson:"seq"`
	Role       string    `bson:"role"`
	Text       string    `bson:"text"`
	ToolCalls  string    `bson:"toolCalls,omitempty"`
	Responses  string    `bson:"responses,omitempty"`
	DurationMs int64     `bson:"durationMs,omitempty"`
	CreatedAt  time.Time `bson:"createdAt"`
}

func (it Item) doc() itemDoc {
	return itemDoc{ID: it.ID, ChatID: it.ChatID, Seq: it.Seq, Role: it.Role, Text: it.Text,
		ToolCalls: string(it.ToolCalls), Responses: string(it.Responses), DurationMs: it.DurationMs, CreatedAt: it.CreatedAt}
}

func (d itemDoc) item() Item {
	it := Item{ID: d.ID, ChatID: d.ChatID, Seq: d.Seq, Role: d.Role, Text: d.Text, DurationMs: d.DurationMs, CreatedAt: d.CreatedAt}
	if d.ToolCalls != "" {
		it.ToolCalls = json.RawMessage(d.ToolCalls)
	}
	if d.Responses != "" {
		it.Responses = json.RawMessage(d.Responses)
	}
	return it
}

// Store is the MongoDB history store.
type Store struct {
	chats, items *mongo.Collection
}

// New returns a store over db; it needs no index beyond _id.
func New(db *mongo.Database) *Store {
	return &Store{chats: db.Collection(ChatsCollection), items: db.Collection(ItemsCollection)}
}

func itemID(chatID string, seq int) string { return fmt.Sprintf("%s/%08d", chatID, seq) }

// Get returns a chat; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, chatID string) (Chat, error) {
	var c Chat
	err := s.chats.FindOne(ctx, bson.D{{Key: "_id", Value: chatID}}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Chat{}, fmt.Errorf("chat %s: %w", chatID, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("read chat %s: %w", chatID, err)
	}
	return c, nil
}

// Owned returns the chat if it belongs to appID and userID, an empty chat
// (ID set) if it does not exist yet, or ErrNotOwner.
func (s *Store) Owned(ctx context.Context, chatID, appID, userID string) (Chat, error) {
	c, err := s.Get(ctx, chatID)
	if errors.Is(err, ErrNotFound) {
		return Chat{ID: chatID, AppID: appID, UserID: userID}, nil
	}
	if err != nil {
		return Chat{}, err
	}
	if c.AppID != appID || c.UserID != userID {
		return Chat{}, fmt.Errorf("chat %s: %w", chatID, ErrNotOwner)
	}
	return c, nil
}

// History returns the last n messages of a chat for a model, oldest first.
func (c Chat) History(n int) []llm.Message {
	if n <= 0 || len(c.Recent) == 0 {
		return nil
	}
	return c.Recent[max(0, len(c.Recent)-n):]
}

// AppendTurn records a question and its answer. The chat is created on
// its first turn, titled after the question. The caller has checked
// ownership with Owned.
func (s *Store) AppendTurn(ctx context.Context, chat Chat, question, answer Item, now time.Time) (Chat, error) {
	now = now.UTC()
	update := bson.D{
		{Key: "$setOnInsert", Value: bson.D{
			{Key: "appId", Value: chat.AppID}, {Key: "userId", Value: chat.UserID},
			{Key: "title", Value: title(question.Text)}, {Key: "createdAt", Value: now},
		}},
		{Key: "$set", Value: bson.D{{Key: "updatedAt", Value: now}}},
		{Key: "$inc", Value: bson.D{{Key: "items", Value: 2}}},
		{Key: "$push", Value: bson.D{{Key: "recent", Value: bson.D{{Key: "$each", Value: []llm.Message{
			{Role: llm.RoleUser, Content: question.Text}, {Role: llm.RoleAssistant, Content: answer.Text},
		}}}}}},
	}
	var after Chat
	var err error
	for range 5 {
		// Concurrent first turns both insert; the loser's retry updates.
		err = s.chats.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: chat.ID}}, update,
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&after)
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return Chat{}, fmt.Errorf("record turn of chat %s: %w", chat.ID, err)
	}
	// $slice is not honoured everywhere: trim here, rarely.
	if len(after.Recent) > 2*recentKeep {
		after.Recent = after.Recent[len(after.Recent)-recentKeep:]
		if _, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: chat.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "recent", Value: after.Recent}}}}); err != nil {
			return Chat{}, fmt.Errorf("trim chat %s: %w", chat.ID, err)
		}
	}
	seq := max(0, chat.Items)
	for _, it := range []Item{question, answer} {
		it.ChatID, it.CreatedAt = chat.ID, now
		for attempt := 0; ; attempt++ {
			it.Seq, it.ID = seq, itemID(chat.ID, seq)
			_, err := s.items.InsertOne(ctx, it.doc())
			if err == nil {
				break
			}
			if !mongo.IsDuplicateKeyError(err) || attempt > 10000 {
				return Chat{}, fmt.Errorf("record item %d of chat %s: %w", seq, chat.ID, err)
			}
			seq++ // another turn took it
		}
		seq++
	}
	return after, nil
}

// Items returns up to limit items of a chat from seq from on.
func (s *Store) Items(ctx context.Context, chat Chat, from, limit int) ([]Item, error) {
	var out []Item
	for seq := max(0, from); len(out) < limit; seq++ {
		var d itemDoc
		err := s.items.FindOne(ctx, bson.D{{Key: "_id", Value: itemID(chat.ID, seq)}}).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if seq < chat.Items {
				continue // a turn whose item was not written (crash between writes)
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read chat %s item %d: %w", chat.ID, seq, err)
		}
		out = append(out, d.item())
	}
	return out, nil
}

// Delete removes a chat and its items; a missing chat is not an error.
func (s *Store) Delete(ctx context.Context, chatID string) error {
	c, err := s.Get(ctx, chatID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for seq := 0; ; seq++ {
		res, err := s.items.DeleteOne(ctx, bson.D{{Key: "_id", Value: itemID(chatID, seq)}})
		if err != nil {
			return fmt.Errorf("delete chat %s item %d: %w", chatID, seq, err)
		}
		if res.DeletedCount == 0 && seq >= c.Items {
			break
		}
	}
	if _, err := s.chats.DeleteOne(ctx, bson.D{{Key: "_id", Value: chatID}}); err != nil {
		return fmt.Errorf("delete chat %s: %w", chatID, err)
	}
	return nil
}

// title is the first line of the question, at most 60 characters.
func title(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if utf8.RuneCountInString(q) > 60 {
		q = string([]rune(q)[:60]) + "…"
	}
	return q
}

// Rename sets a chat's title.
func (s *Store) Rename(ctx context.Context, chatID, title string) error {
	res, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: chatID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "title", Value: title}}}})
	if err != nil {
		return fmt.Errorf("rename chat %s: %w", chatID, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("chat %s: %w", chatID, ErrNotFound)
	}
	return nil
}

// List returns an app's chats, most recent first: all of them, or only
// userID's when it is not empty.
func (s *Store) List(ctx context.Context, appID, userID string, limit int) ([]Chat, error) {
	filter := bson.D{{Key: "appId", Value: appID}}
	if userID != "" {
		filter = append(filter, bson.E{Key: "userId", Value: userID})
	}
	opts := options.Find().SetSort(bson.D{{Key: "updatedAt", Value: -1}}).SetProjection(bson.D{{Key: "recent", Value: 0}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := s.chats.Find(ctx, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("list chats of app %s: %w", appID, err)
	}
	var out []Chat
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("list chats of app %s: %w", appID, err)
	}
	return out, nil
}

// Package history keeps chats and their items in MongoDB so that a chat
// can be reloaded and continued: each question and answer, with the tool
// calls (arguments, result, duration) and the nodes' responses of the run.
//
// A chat is named by its app, its user and its chat id together (T5):
// chat ids are the client's, scoped per app and user, so nobody can take
// or pre-empt another user's chat id. Its key is sandbox.Scope.ChatKey.
//
// A chat is two kinds of document. The chat document (collection chats,
// _id the chat's key) names the owner and carries the title, a count of
// items and the recent messages a model needs, bounded. Each turn is one
// document in chat_items keyed "<key>/<seq>", holding the question (item
// seq) and the answer (item seq+1). Chats written before turns were kept
// whole have one document per item under the same keys; both load.
// Chats written before chat ids were scoped were keyed by their chat id
// alone; Migrate moves them.
//
// A turn reads and writes by _id only, the only key the embedded
// database (FerretDB v1.24 on SQLite) can serve from an index, and only
// with the expression index that internal/mongodb adds to its tables
// (FerretDB 1.24 creates one SQLite does not use): until then, a lookup by
// _id scans the table up to the match, and an update, a delete or a miss
// scans all of it. A turn costs one read of the chat document and one
// insert of the turn, plus, for a chat that exists, one update of its
// bounded chat document; nothing grows in place.
//
// FerretDB applies updates as read-modify-write without a lock, so two
// concurrent updates of one document can lose one; only inserts under a
// unique _id are atomic there. Turns therefore claim their seq by
// inserting under it (retrying on a duplicate), and readers go on past
// the chat's item count while turns follow; the count is a hint, and two
// turns of one chat finishing at the same instant may leave one of them
// out of the recent messages (never out of the items). It must never
// decide who may read a chat: callers check ownership (Chat.AppID,
// Chat.UserID) before they use it.
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
	"github.com/flowbox/flowbox/sandbox"
)

// Collections.
const (
	ChatsCollection = "chats"
	ItemsCollection = "chat_items"
)

// ErrNotFound: no such chat or item.
var ErrNotFound = errors.New("chat not found")

// RecentKeep is how many messages a chat document keeps for models, the
// newest; History never returns more.
const RecentKeep = 50

// Chat is a chat's document. ID is the chat id as its client knows it,
// unique only with AppID and UserID; Key is the three together.
type Chat struct {
	Key       string        `bson:"_id" json:"-"`
	ID        string        `bson:"chatId" json:"chatId"`
	AppID     string        `bson:"appId" json:"appId"`
	UserID    string        `bson:"userId" json:"userId"`
	Title     string        `bson:"title" json:"title"`
	Items     int           `bson:"items" json:"items"`
	CreatedAt time.Time     `bson:"createdAt" json:"createdAt"`
	UpdatedAt time.Time     `bson:"updatedAt" json:"updatedAt"`
	Recent    []llm.Message `bson:"recent" json:"-"`
	// Redo is the turns a rewind set aside, which Redo puts back; nil
	// when there are none (see rewind.go).
	Redo *Redo `bson:"redo,omitempty" json:"redo,omitempty"`
	// RewindFloor is the first turn a rewind may go back to: the
	// checkpoints of the turns before it were dropped (rewind.go).
	RewindFloor int `bson:"rewindFloor,omitempty" json:"rewindFloor,omitempty"`
}

// Item is one message of a chat. ToolCalls and Responses are JSON as the
// engine produced it; they are stored as JSON text, because their shapes
// are open and the embedded database refuses some (nested arrays).
type Item struct {
	ID     string `json:"dataId"`
	ChatID string `json:"chatId"`
	Seq    int    `json:"seq"`
	Role   string `json:"role"` // user | assistant
	// ResponseChatItemID is an answer's id as the chat API's client chose
	// it (FastGPT's responseChatItemId) or the API made it; empty for
	// questions and for answers recorded before it was kept. dataId stays
	// the stored key: the client's id is not known to be unique.
	ResponseChatItemID string `json:"responseChatItemId,omitempty"`
	// VersionID names the app's version that produced an answer; empty
	// when the app's draft did, and for questions.
	VersionID  string          `json:"versionId,omitempty"`
	Text       string          `json:"text"`
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty"`
	Responses  json.RawMessage `json:"responses,omitempty"`
	DurationMs int64           `json:"durationMs,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
}

// itemDoc is a document of chat_items: a whole turn (Answer set: the
// question is item Seq, the answer Seq+1) or, as chats were written
// before, a single item (Role and Text set).
type itemDoc struct {
	ID         string    `bson:"_id"`
	ChatID     string    `bson:"chatId"`
	Seq        int       `bson:"seq"`
	Role       string    `bson:"role,omitempty"`
	Text       string    `bson:"text,omitempty"`
	Answer     *turnDoc  `bson:"answer,omitempty"`
	ToolCalls  string    `bson:"toolCalls,omitempty"`
	Responses  string    `bson:"responses,omitempty"`
	DurationMs int64     `bson:"durationMs,omitempty"`
	CreatedAt  time.Time `bson:"createdAt"`
}

// turnDoc is the answer half of a turn document.
type turnDoc struct {
	Role               string `bson:"role"`
	ResponseChatItemID string `bson:"responseChatItemId,omitempty"`
	VersionID          string `bson:"versionId,omitempty"`
	Text               string `bson:"text"`
	ToolCalls          string `bson:"toolCalls,omitempty"`
	Responses          string `bson:"responses,omitempty"`
	DurationMs         int64  `bson:"durationMs,omitempty"`
}

func turn(key string, seq int, question, answer Item, now time.Time) itemDoc {
	return itemDoc{ID: itemID(key, seq), ChatID: key, Seq: seq, Role: question.Role, Text: question.Text,
		ToolCalls: string(question.ToolCalls), Responses: string(question.Responses), DurationMs: question.DurationMs, CreatedAt: now,
		Answer: &turnDoc{Role: answer.Role, ResponseChatItemID: answer.ResponseChatItemID, VersionID: answer.VersionID, Text: answer.Text, ToolCalls: string(answer.ToolCalls),
			Responses: string(answer.Responses), DurationMs: answer.DurationMs}}
}

// items returns the one or two items a document holds, as items of the
// chat whose client id is chatID.
func (d itemDoc) items(chatID string) []Item {
	q := Item{ID: itemID(chatID, d.Seq), ChatID: chatID, Seq: d.Seq, Role: d.Role, Text: d.Text, ToolCalls: raw(d.ToolCalls),
		Responses: raw(d.Responses), DurationMs: d.DurationMs, CreatedAt: d.CreatedAt}
	if d.Answer == nil {
		return []Item{q}
	}
	a := d.Answer
	return []Item{q, {ID: itemID(chatID, d.Seq+1), ChatID: chatID, Seq: d.Seq + 1, Role: a.Role, ResponseChatItemID: a.ResponseChatItemID, VersionID: a.VersionID, Text: a.Text,
		ToolCalls: raw(a.ToolCalls), Responses: raw(a.Responses), DurationMs: a.DurationMs, CreatedAt: d.CreatedAt}}
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// Store is the MongoDB history store.
type Store struct {
	chats, items *mongo.Collection
}

// New returns a store over db; it needs no index beyond _id.
func New(db *mongo.Database) *Store {
	return &Store{chats: db.Collection(ChatsCollection), items: db.Collection(ItemsCollection)}
}

func itemID(key string, seq int) string { return fmt.Sprintf("%s/%08d", key, seq) }

// Of is the chat of a sandbox scope, as it is before its first turn.
func Of(scope sandbox.Scope) Chat {
	return Chat{Key: scope.ChatKey(), ID: scope.ChatID, AppID: scope.AppID, UserID: scope.UserID}
}

// Scope is the chat's app, user and chat id: what names its sandbox.
func (c Chat) Scope() sandbox.Scope {
	return sandbox.Scope{AppID: c.AppID, UserID: c.UserID, ChatID: c.ID}
}

// key is the chat's key, also of a Chat its caller filled in by hand.
func (c Chat) key() string {
	if c.Key != "" {
		return c.Key
	}
	return c.Scope().ChatKey()
}

// Get returns a chat; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, scope sandbox.Scope) (Chat, error) {
	var c Chat
	err := s.chats.FindOne(ctx, bson.D{{Key: "_id", Value: scope.ChatKey()}}).Decode(&c)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return Chat{}, fmt.Errorf("chat %s: %w", scope.ChatID, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("read chat %s: %w", scope.ChatID, err)
	}
	return c, nil
}

// Open returns the chat, or the chat as it is before its first turn
// (CreatedAt zero) when it does not exist yet.
func (s *Store) Open(ctx context.Context, scope sandbox.Scope) (Chat, error) {
	c, err := s.Get(ctx, scope)
	if errors.Is(err, ErrNotFound) {
		return Of(scope), nil
	}
	return c, err
}

// History returns the last n messages of a chat for a model (at most
// RecentKeep), oldest first.
func (c Chat) History(n int) []llm.Message {
	if n <= 0 || len(c.Recent) == 0 {
		return nil
	}
	return c.Recent[max(0, len(c.Recent)-n):]
}

// Create records a chat before its first turn (a user attached files to
// it first), titled title, and returns it; an existing chat is returned
// as it is.
func (s *Store) Create(ctx context.Context, chat Chat, title string, now time.Time) (Chat, error) {
	existing, err := s.Open(ctx, chat.Scope())
	if err != nil || !existing.CreatedAt.IsZero() {
		return existing, err
	}
	now = now.UTC()
	chat = Chat{Key: chat.key(), ID: chat.ID, AppID: chat.AppID, UserID: chat.UserID, Title: title, CreatedAt: now, UpdatedAt: now}
	if _, err := s.chats.InsertOne(ctx, chat); mongo.IsDuplicateKeyError(err) {
		return s.Open(ctx, chat.Scope()) // created meanwhile
	} else if err != nil {
		return Chat{}, fmt.Errorf("record chat %s: %w", chat.ID, err)
	}
	return chat, nil
}

// AppendTurn records a question and its answer. The chat is created on
// its first turn (chat.CreatedAt zero, as Open returns a new chat),
// titled after the question.
func (s *Store) AppendTurn(ctx context.Context, chat Chat, question, answer Item, now time.Time) (Chat, error) {
	now = now.UTC()
	chat.Key = chat.key()
	after := chat
	after.UpdatedAt = now
	recent := func(before []llm.Message) []llm.Message {
		r := append(append(make([]llm.Message, 0, len(before)+2), before...),
			llm.Message{Role: llm.RoleUser, Content: question.Text}, llm.Message{Role: llm.RoleAssistant, Content: answer.Text})
		return r[max(0, len(r)-RecentKeep):]
	}
	after.Recent = recent(chat.Recent)

	// The turn first: it claims its seq, and the chat document then
	// counts past it.
	seq := max(0, chat.Items)
	for attempt := 0; ; attempt++ {
		_, err := s.items.InsertOne(ctx, turn(chat.Key, seq, question, answer, now))
		if err == nil {
			break
		}
		if !mongo.IsDuplicateKeyError(err) || attempt > 10000 {
			return Chat{}, fmt.Errorf("record turn %d of chat %s: %w", seq, chat.ID, err)
		}
		seq += 2 // another turn took it
	}
	after.Items = seq + 2

	if chat.CreatedAt.IsZero() {
		after.Title, after.CreatedAt = title(question.Text), now
		_, err := s.chats.InsertOne(ctx, after)
		if err == nil {
			return after, nil
		}
		if !mongo.IsDuplicateKeyError(err) {
			return Chat{}, fmt.Errorf("record chat %s: %w", chat.ID, err)
		}
		// Another first turn of the chat created it.
		existing, err := s.Get(ctx, chat.Scope())
		if err != nil {
			_, _ = s.items.DeleteOne(ctx, bson.D{{Key: "_id", Value: itemID(chat.Key, seq)}})
			return Chat{}, err
		}
		after.Title, after.CreatedAt = existing.Title, existing.CreatedAt
		after.Items = max(after.Items, existing.Items)
		after.Recent = recent(existing.Recent)
	}
	// A bounded set, not a $push: nothing grows in place.
	set := bson.D{{Key: "updatedAt", Value: now}, {Key: "items", Value: after.Items}, {Key: "recent", Value: after.Recent}}
	update := bson.D{{Key: "$set", Value: set}}
	if chat.Redo != nil {
		// The chat moved on from a rewind: what it set aside goes.
		if err := s.purge(ctx, chat); err != nil {
			return Chat{}, err
		}
		after.Redo = nil
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "redo", Value: ""}}})
	}
	if seq == 0 && !chat.CreatedAt.IsZero() {
		// The first turn of a chat created for its files: named after
		// the question, like any other chat.
		after.Title = title(question.Text)
		set = append(set, bson.E{Key: "title", Value: after.Title})
		update[0].Value = set
	}
	_, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: chat.Key}}, update)
	if err != nil {
		return Chat{}, fmt.Errorf("record turn of chat %s: %w", chat.ID, err)
	}
	return after, nil
}

// Items returns up to limit items of a chat from seq from on. It reads by
// _id, one turn at a time (see the package comment), and goes on past the
// chat's item count while turns follow.
func (s *Store) Items(ctx context.Context, chat Chat, from, limit int) ([]Item, error) {
	from = max(0, from)
	var out []Item
	seq := from
	if from > 0 {
		seq = from - 1 // item from may be the answer of a turn
	}
	for len(out) < limit {
		d, err := s.item(ctx, chat.key(), seq)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if seq < chat.Items || seq < from {
				seq++ // inside a turn, or a turn not written (crash)
				continue
			}
			break
		}
		if err != nil {
			return nil, err
		}
		items := d.items(chat.ID)
		for _, it := range items {
			if it.Seq >= from && len(out) < limit {
				out = append(out, it)
			}
		}
		seq += len(items)
	}
	return out, nil
}

// Exists says whether a chat is recorded.
func (s *Store) Exists(ctx context.Context, scope sandbox.Scope) (bool, error) {
	_, err := s.Get(ctx, scope)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// StoredToolCalls is the tool calls of a chat's stored items, each as the
// tool-call node recorded them (JSON); none for a chat not stored.
func (s *Store) StoredToolCalls(ctx context.Context, scope sandbox.Scope) ([]json.RawMessage, error) {
	chat, err := s.Get(ctx, scope)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	items, err := s.Items(ctx, chat, 0, 1<<20)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, it := range items {
		if len(it.ToolCalls) > 0 {
			out = append(out, it.ToolCalls)
		}
	}
	return out, nil
}

func (s *Store) item(ctx context.Context, key string, seq int) (itemDoc, error) {
	var d itemDoc
	err := s.items.FindOne(ctx, bson.D{{Key: "_id", Value: itemID(key, seq)}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return itemDoc{}, fmt.Errorf("read chat item %s: %w", itemID(key, seq), err)
	}
	return d, err
}

// Delete removes a chat and its items; a missing chat is not an error.
func (s *Store) Delete(ctx context.Context, scope sandbox.Scope) error {
	c, err := s.Get(ctx, scope)
	if errors.Is(err, ErrNotFound) {
		c = Of(scope)
	} else if err != nil {
		return err
	}
	if err := s.purge(ctx, c); err != nil {
		return err
	}
	return s.deleteDocs(ctx, scope.ChatKey(), c.Items)
}

// deleteDocs removes the chat document key and its items, counted items
// at least. The items go first, by _id as Items reads them, so that a
// failure leaves a chat that can be deleted again.
func (s *Store) deleteDocs(ctx context.Context, key string, count int) error {
	for seq := 0; ; {
		var d itemDoc
		err := s.items.FindOneAndDelete(ctx, bson.D{{Key: "_id", Value: itemID(key, seq)}}).Decode(&d)
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			if seq >= count {
				if _, err := s.chats.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}}); err != nil {
					return fmt.Errorf("delete chat %s: %w", key, err)
				}
				return nil
			}
			seq++
		case err != nil:
			return fmt.Errorf("delete chat item %s: %w", itemID(key, seq), err)
		default:
			seq += len(d.items(""))
		}
	}
}

// title is the first line of the question, at most 40 characters, so a
// phone's chat list shows it on a line or two.
func title(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if utf8.RuneCountInString(q) > 40 {
		q = strings.TrimSpace(string([]rune(q)[:40])) + "…"
	}
	return q
}

// Rename sets a chat's title.
func (s *Store) Rename(ctx context.Context, scope sandbox.Scope, title string) error {
	res, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: scope.ChatKey()}}, bson.D{{Key: "$set", Value: bson.D{{Key: "title", Value: title}}}})
	if err != nil {
		return fmt.Errorf("rename chat %s: %w", scope.ChatID, err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("chat %s: %w", scope.ChatID, ErrNotFound)
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

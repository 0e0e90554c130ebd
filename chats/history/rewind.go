package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/flowbox/flowbox/internal/llm"
)

// Rewinding (R2). A rewind sets a chat back to before one of its turns:
// that turn and the ones after it move from "<key>/<seq>" to
// "<key>~redo/<seq>", out of the chat's reading, and the chat document
// counts the items before them and says where they are (Chat.Redo).
// Redo moves them back. The next turn recorded after a rewind deletes
// them: the chat moved on. Like every write here, a turn moves by _id.

// Redo is the turns a rewind set aside.
type Redo struct {
	// From is the seq of the first; Items how many items they hold.
	From  int `bson:"from" json:"from"`
	Items int `bson:"items" json:"items"`
}

func redoID(key string, seq int) string { return fmt.Sprintf("%s~redo/%08d", key, seq) }

// ErrNoRedo: the chat has no turns set aside.
var ErrNoRedo = errors.New("nothing to redo")

// TurnOf returns the seq of the turn that holds item seq (its question's
// seq); ErrNotFound when the chat has no such item.
func (s *Store) TurnOf(ctx context.Context, chat Chat, seq int) (int, error) {
	if seq < 0 || seq >= chat.Items+2 {
		return 0, fmt.Errorf("item %d of chat %s: %w", seq, chat.ID, ErrNotFound)
	}
	for _, start := range []int{seq, seq - 1} {
		if start < 0 {
			continue
		}
		d, err := s.item(ctx, chat.key(), start)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if start == seq || d.Answer != nil {
			return start, nil
		}
	}
	return 0, fmt.Errorf("item %d of chat %s: %w", seq, chat.ID, ErrNotFound)
}

// Rewind sets the chat back to before the turn at seq (TurnOf): that turn
// and the later ones are set aside for Redo, replacing what an earlier
// rewind set aside. It returns the chat as it is then.
func (s *Store) Rewind(ctx context.Context, chat Chat, seq int, now time.Time) (Chat, error) {
	key := chat.key()
	if err := s.purge(ctx, chat); err != nil {
		return Chat{}, err
	}
	end := seq
	for cur := seq; ; {
		d, err := s.item(ctx, key, cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			if cur < chat.Items {
				cur++
				continue
			}
			break
		}
		if err != nil {
			return Chat{}, err
		}
		n := len(d.items(""))
		if err := s.move(ctx, itemID(key, cur), redoID(key, cur), d); err != nil {
			return Chat{}, err
		}
		cur += n
		end = cur
	}
	chat.Redo = nil
	if end > seq {
		chat.Redo = &Redo{From: seq, Items: end - seq}
	}
	return s.settle(ctx, chat, seq, now)
}

// Redo puts back the turns the last rewind set aside.
func (s *Store) Redo(ctx context.Context, chat Chat, now time.Time) (Chat, error) {
	if chat.Redo == nil {
		return Chat{}, fmt.Errorf("chat %s: %w", chat.ID, ErrNoRedo)
	}
	key := chat.key()
	r := *chat.Redo
	for cur := r.From; cur < r.From+r.Items; {
		var d itemDoc
		err := s.items.FindOne(ctx, bson.D{{Key: "_id", Value: redoID(key, cur)}}).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			cur++
			continue
		}
		if err != nil {
			return Chat{}, fmt.Errorf("read chat item %s: %w", redoID(key, cur), err)
		}
		if err := s.move(ctx, redoID(key, cur), itemID(key, cur), d); err != nil {
			return Chat{}, err
		}
		cur += len(d.items(""))
	}
	chat.Redo = nil
	return s.settle(ctx, chat, r.From+r.Items, now)
}

// move puts document d (read at from) at to: the copy first, so that a
// failure leaves it twice rather than not at all.
func (s *Store) move(ctx context.Context, from, to string, d itemDoc) error {
	d.ID = to
	if _, err := s.items.InsertOne(ctx, d); err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("move chat item %s: %w", from, err)
	}
	if _, err := s.items.DeleteOne(ctx, bson.D{{Key: "_id", Value: from}}); err != nil {
		return fmt.Errorf("move chat item %s: %w", from, err)
	}
	return nil
}

// purge deletes the turns an earlier rewind set aside.
func (s *Store) purge(ctx context.Context, chat Chat) error {
	if chat.Redo == nil {
		return nil
	}
	key := chat.key()
	for cur := chat.Redo.From; cur < chat.Redo.From+chat.Redo.Items; cur++ {
		if _, err := s.items.DeleteOne(ctx, bson.D{{Key: "_id", Value: redoID(key, cur)}}); err != nil {
			return fmt.Errorf("delete chat item %s: %w", redoID(key, cur), err)
		}
	}
	return nil
}

// settle writes the chat document of a chat of items items: its count,
// its recent messages read again, its redo.
func (s *Store) settle(ctx context.Context, chat Chat, items int, now time.Time) (Chat, error) {
	chat.Items = items
	chat.UpdatedAt = now.UTC()
	from := max(0, items-RecentKeep-1)
	list, err := s.Items(ctx, chat, from, items-from)
	if err != nil {
		return Chat{}, err
	}
	chat.Recent = nil
	for _, it := range list {
		role := llm.RoleUser
		if it.Role == "assistant" {
			role = llm.RoleAssistant
		}
		chat.Recent = append(chat.Recent, llm.Message{Role: role, Content: it.Text})
	}
	chat.Recent = chat.Recent[max(0, len(chat.Recent)-RecentKeep):]
	set := bson.D{{Key: "items", Value: chat.Items}, {Key: "recent", Value: chat.Recent}, {Key: "updatedAt", Value: chat.UpdatedAt}}
	update := bson.D{{Key: "$set", Value: set}}
	if chat.Redo != nil {
		set = append(set, bson.E{Key: "redo", Value: chat.Redo})
		update = bson.D{{Key: "$set", Value: set}}
	} else {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "redo", Value: ""}}})
	}
	if _, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: chat.key()}}, update); err != nil {
		return Chat{}, fmt.Errorf("rewind chat %s: %w", chat.ID, err)
	}
	return chat, nil
}

// Fork records a new chat to, titled title, whose items are from's up to
// item through (the end of its turn), and returns it.
func (s *Store) Fork(ctx context.Context, from Chat, through int, to Chat, title string, now time.Time) (Chat, error) {
	now = now.UTC()
	to = Chat{Key: to.key(), ID: to.ID, AppID: to.AppID, UserID: to.UserID, Title: title, CreatedAt: now, UpdatedAt: now}
	if _, err := s.chats.InsertOne(ctx, to); mongo.IsDuplicateKeyError(err) {
		return Chat{}, fmt.Errorf("chat %s exists already", to.ID)
	} else if err != nil {
		return Chat{}, fmt.Errorf("record chat %s: %w", to.ID, err)
	}
	end := 0
	for cur := 0; cur <= through; {
		d, err := s.item(ctx, from.key(), cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			cur++
			continue
		}
		if err != nil {
			return Chat{}, err
		}
		d.ID, d.ChatID = itemID(to.Key, cur), to.Key
		if _, err := s.items.InsertOne(ctx, d); err != nil {
			return Chat{}, fmt.Errorf("copy chat item %d into chat %s: %w", cur, to.ID, err)
		}
		cur += len(d.items(""))
		end = cur
	}
	return s.settle(ctx, to, end, now)
}

// SetRewindFloor records that the chat rewinds to turn seq at the
// earliest (Chat.RewindFloor).
func (s *Store) SetRewindFloor(ctx context.Context, chat Chat, seq int) error {
	if _, err := s.chats.UpdateOne(ctx, bson.D{{Key: "_id", Value: chat.key()}}, bson.D{{Key: "$set", Value: bson.D{{Key: "rewindFloor", Value: seq}}}}); err != nil {
		return fmt.Errorf("record chat %s's rewind floor: %w", chat.ID, err)
	}
	return nil
}

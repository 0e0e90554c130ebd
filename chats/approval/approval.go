// Package approval keeps the runs that wait for a person in MongoDB, so
// that any engine process resumes them: runs waiting for a command's
// approval (P10), and runs paused at an interactive node (userSelect,
// formInput). It keeps the paused run, who may answer, until when, and
// the answer. It also keeps the commands a person approved for a whole
// chat.
//
// An approval is answered at most once. The embedded database (FerretDB)
// has no transactions and applies updates without a lock, so the answer
// is claimed by inserting it under the approval's id: of two answers
// racing, exactly one insert succeeds. It must never decide who may
// answer: callers check the chat's owner first.
package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
)

// Collections.
const (
	ApprovalsCollection = "approvals"
	AnswersCollection   = "approval_answers"
	ChatCommands        = "approved_commands"
)

var (
	// ErrNotFound: no such approval.
	ErrNotFound = errors.New("approval not found")
	// ErrAnswered: the approval was answered (or expired) already.
	ErrAnswered = errors.New("approval already answered")
)

// Expired is the decision recorded for an approval nobody answered in
// time, and Superseded for one whose chat went on with a new message;
// both count as rejections. Answered is the decision of an interactive
// node's question that a person answered (Answer.Value).
const (
	Expired    = "expired"
	Superseded = "superseded"
	Answered   = "answered"
)

// Approval is a paused run waiting for an answer.
type Approval struct {
	ID     string
	ChatID string
	AppID  string
	UserID string // the chat's owner: who may answer
	// Kind is the question's (nodes.Request.Kind): empty for a command
	// approval, as approvals stored before interactive nodes have it.
	Kind string
	// Command is as shown to the person (redacted); Rule and
	// Justification are the policy's reasons.
	Command, Rule, Justification string
	ToolCallID                   string
	CreatedAt, ExpiresAt         time.Time
	Paused                       nodes.Paused
	// VersionID is the app's version the paused run runs, which it
	// resumes in; empty: the app's draft.
	VersionID string
}

// Answer is how an approval was answered.
type Answer struct {
	Decision string `bson:"decision" json:"decision"` // nodes.Answers, Expired or Superseded
	Command  string `bson:"command,omitempty" json:"command,omitempty"`
	Reason   string `bson:"reason,omitempty" json:"reason,omitempty"`
	// Value is an interactive node's answer as JSON (nodes.Answer).
	Value string    `bson:"value,omitempty" json:"value,omitempty"`
	By    string    `bson:"by,omitempty" json:"by,omitempty"`
	At    time.Time `bson:"at" json:"at"`
}

// doc is an approval's document. The paused run is JSON text: its shape
// is open and the embedded database refuses nested arrays.
type doc struct {
	ID            string    `bson:"_id"`
	ChatID        string    `bson:"chatId"`
	AppID         string    `bson:"appId"`
	UserID        string    `bson:"userId"`
	Kind          string    `bson:"kind,omitempty"`
	ToolCallID    string    `bson:"toolCallId"`
	Command       string    `bson:"command"`
	Rule          string    `bson:"rule,omitempty"`
	Justification string    `bson:"justification,omitempty"`
	CreatedAt     time.Time `bson:"createdAt"`
	ExpiresAt     time.Time `bson:"expiresAt"`
	Paused        string    `bson:"paused"`
	VersionID     string    `bson:"versionId,omitempty"`
	// Settled is set once the approval has an answer, so that the expiry
	// sweep skips it without reading the answers.
	Settled bool `bson:"settled,omitempty"`
}

type answerDoc struct {
	ID     string `bson:"_id"`
	Answer `bson:",inline"`
}

// pendingDoc names the approval a chat waits for, if any.
type pendingDoc struct {
	ID       string `bson:"_id"` // "pending:" + chat id
	Approval string `bson:"approval"`
}

// Store is the MongoDB approval store. Every read and write of one
// approval is by _id; the expiry sweep and the deletion of chats query
// by expiry and by chat.
type Store struct {
	approvals, answers, commands *mongo.Collection
}

// New returns a store over db.
func New(db *mongo.Database) *Store {
	return &Store{approvals: db.Collection(ApprovalsCollection), answers: db.Collection(AnswersCollection),
		commands: db.Collection(ChatCommands)}
}

// Put records a paused run and makes it the chat's pending approval.
func (s *Store) Put(ctx context.Context, a Approval) error {
	paused, err := json.Marshal(a.Paused)
	if err != nil {
		return fmt.Errorf("record approval %s: %w", a.ID, err)
	}
	_, err = s.approvals.InsertOne(ctx, doc{ID: a.ID, ChatID: a.ChatID, AppID: a.AppID, UserID: a.UserID, Kind: a.Kind, ToolCallID: a.ToolCallID,
		Command: a.Command, Rule: a.Rule, Justification: a.Justification, CreatedAt: a.CreatedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(),
		Paused: string(paused), VersionID: a.VersionID})
	if err != nil {
		return fmt.Errorf("record approval %s: %w", a.ID, err)
	}
	key := pendingKey(a.Scope())
	_, err = s.approvals.ReplaceOne(ctx, bson.D{{Key: "_id", Value: key}},
		pendingDoc{ID: key, Approval: a.ID}, options.Replace().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("record approval %s: %w", a.ID, err)
	}
	return nil
}

// IsCommand reports whether the approval asks about a command (not an
// interactive node's question).
func (a Approval) IsCommand() bool { return a.Kind == nodes.KindApproval }

// Scope is the approval's chat.
func (a Approval) Scope() sandbox.Scope {
	return sandbox.Scope{AppID: a.AppID, UserID: a.UserID, ChatID: a.ChatID}
}

// pendingKey is the _id of a chat's pending mark. Chat ids are scoped per
// app and user, so it names all three.
func pendingKey(chat sandbox.Scope) string { return "pending:" + chat.ChatKey() }

// Get returns an approval and its answer (nil while it waits).
func (s *Store) Get(ctx context.Context, id string) (Approval, *Answer, error) {
	var d doc
	err := s.approvals.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && d.ChatID == "") {
		return Approval{}, nil, fmt.Errorf("approval %s: %w", id, ErrNotFound)
	} else if err != nil {
		return Approval{}, nil, fmt.Errorf("read approval %s: %w", id, err)
	}
	a := Approval{ID: d.ID, ChatID: d.ChatID, AppID: d.AppID, UserID: d.UserID, Kind: d.Kind, ToolCallID: d.ToolCallID, Command: d.Command,
		Rule: d.Rule, Justification: d.Justification, CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt, VersionID: d.VersionID}
	if err := json.Unmarshal([]byte(d.Paused), &a.Paused); err != nil {
		return Approval{}, nil, fmt.Errorf("read approval %s: the paused run: %w", id, err)
	}
	var ans answerDoc
	err = s.answers.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&ans)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return a, nil, nil
	} else if err != nil {
		return Approval{}, nil, fmt.Errorf("read the answer to approval %s: %w", id, err)
	}
	return a, &ans.Answer, nil
}

// Pending is the approval the chat waits for: its id, or "" when it
// waits for none (answered ones included).
func (s *Store) Pending(ctx context.Context, chat sandbox.Scope) (string, error) {
	var p pendingDoc
	err := s.approvals.FindOne(ctx, bson.D{{Key: "_id", Value: pendingKey(chat)}}).Decode(&p)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read chat %s's pending approval: %w", chat.ChatID, err)
	}
	if p.Approval == "" {
		return "", nil
	}
	n, err := s.answers.CountDocuments(ctx, bson.D{{Key: "_id", Value: p.Approval}})
	if err != nil {
		return "", fmt.Errorf("read chat %s's pending approval: %w", chat.ChatID, err)
	}
	if n > 0 {
		return "", nil
	}
	return p.Approval, nil
}

// Claim records the answer; ErrAnswered when the approval has one
// already (the answer is unchanged then).
func (s *Store) Claim(ctx context.Context, id string, a Answer) error {
	a.At = a.At.UTC()
	_, err := s.answers.InsertOne(ctx, answerDoc{ID: id, Answer: a})
	if mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("approval %s: %w", id, ErrAnswered)
	} else if err != nil {
		return fmt.Errorf("record the answer to approval %s: %w", id, err)
	}
	// Only a hint for the sweep: the answer above is the truth.
	_, _ = s.approvals.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "settled", Value: true}}}})
	return nil
}

// Lapsed returns up to limit approvals that expired at or before now and
// have no answer yet, oldest first, for the expiry sweep; their paused
// runs are not read.
func (s *Store) Lapsed(ctx context.Context, now time.Time, limit int) ([]Approval, error) {
	filter := bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now.UTC()}}}, {Key: "settled", Value: bson.D{{Key: "$ne", Value: true}}}}
	cur, err := s.approvals.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "expiresAt", Value: 1}}).SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "paused", Value: 0}}))
	if err != nil {
		return nil, fmt.Errorf("find expired approvals: %w", err)
	}
	var docs []doc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("find expired approvals: %w", err)
	}
	out := make([]Approval, len(docs))
	for i, d := range docs {
		out[i] = Approval{ID: d.ID, ChatID: d.ChatID, AppID: d.AppID, UserID: d.UserID, Kind: d.Kind, ToolCallID: d.ToolCallID, Command: d.Command,
			Rule: d.Rule, Justification: d.Justification, CreatedAt: d.CreatedAt, ExpiresAt: d.ExpiresAt, VersionID: d.VersionID}
	}
	return out, nil
}

// Expire settles the approvals that expired at or before now and that
// nobody answered: each is answered Expired (a rejection) and, when it
// asked about a command, audited through record. It returns how many it settled. An approval answered
// meanwhile is left as it was answered. Several processes expiring at
// once settle each approval once: the answer is claimed.
func (s *Store) Expire(ctx context.Context, now time.Time, record func(audit.Record)) (int, error) {
	const batch = 100
	n := 0
	for {
		lapsed, err := s.Lapsed(ctx, now, batch)
		if err != nil {
			return n, err
		}
		for _, a := range lapsed {
			err := s.Claim(ctx, a.ID, Answer{Decision: Expired, At: now})
			switch {
			case errors.Is(err, ErrAnswered):
				if err := s.Settle(ctx, a.ID); err != nil {
					return n, err
				}
			case err != nil:
				return n, err
			default:
				n++
				if record != nil && a.IsCommand() {
					record(RejectionRecord(a, "", Expired, now))
				}
			}
		}
		if len(lapsed) < batch {
			return n, nil
		}
	}
}

// Settle marks an approval answered for the sweep, when its answer was
// recorded by an earlier Claim that could not mark it.
func (s *Store) Settle(ctx context.Context, id string) error {
	if _, err := s.approvals.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "settled", Value: true}}}}); err != nil {
		return fmt.Errorf("settle approval %s: %w", id, err)
	}
	return nil
}

// DeleteChats removes what the chats left here: their approvals, the
// answers, the pending marks and the commands approved for them. A chat
// with no UserID stands for that chat id of every user of its app (a
// deletion recorded before chat ids were scoped). Deleting twice is
// harmless.
func (s *Store) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	if len(chats) == 0 {
		return nil
	}
	or := make(bson.A, 0, len(chats))
	for _, c := range chats {
		f := bson.D{{Key: "appId", Value: c.AppID}, {Key: "chatId", Value: c.ChatID}}
		if c.UserID != "" {
			f = append(f, bson.E{Key: "userId", Value: c.UserID})
		}
		or = append(or, f)
	}
	return s.deleteWhere(ctx, bson.D{{Key: "$or", Value: or}}, chats)
}

// DeleteApp removes what every chat of app left here.
func (s *Store) DeleteApp(ctx context.Context, appID string) error {
	return s.deleteWhere(ctx, bson.D{{Key: "appId", Value: appID}}, nil)
}

// deleteWhere deletes the approvals filter selects, their answers and
// their chats' pending marks and approved commands (of chats too, when
// given). The answers go first: an approval left without its answer
// would look pending again.
func (s *Store) deleteWhere(ctx context.Context, filter bson.D, chats []sandbox.Scope) error {
	cur, err := s.approvals.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "appId", Value: 1}, {Key: "userId", Value: 1}, {Key: "chatId", Value: 1}}))
	if err != nil {
		return fmt.Errorf("find approvals to delete: %w", err)
	}
	var docs []struct {
		ID     string `bson:"_id"`
		AppID  string `bson:"appId"`
		UserID string `bson:"userId"`
		ChatID string `bson:"chatId"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return fmt.Errorf("find approvals to delete: %w", err)
	}
	ids := make([]string, 0, len(docs))
	keys := map[string]bool{}
	for _, c := range chats {
		if c.UserID != "" {
			keys[c.ChatKey()] = true
		}
	}
	for _, d := range docs {
		ids = append(ids, d.ID)
		keys[sandbox.Scope{AppID: d.AppID, UserID: d.UserID, ChatID: d.ChatID}.ChatKey()] = true
	}
	pending := make([]string, 0, len(keys))
	chatKeys := make([]string, 0, len(keys))
	for k := range keys {
		pending = append(pending, "pending:"+k)
		chatKeys = append(chatKeys, k)
	}
	if len(ids) > 0 {
		if _, err := s.answers.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}); err != nil {
			return fmt.Errorf("delete approval answers: %w", err)
		}
	}
	if len(chatKeys) > 0 {
		if _, err := s.commands.DeleteMany(ctx, bson.D{{Key: "chatId", Value: bson.D{{Key: "$in", Value: chatKeys}}}}); err != nil {
			return fmt.Errorf("delete approved commands: %w", err)
		}
		if _, err := s.approvals.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: pending}}}}); err != nil {
			return fmt.Errorf("delete pending approvals: %w", err)
		}
	}
	if len(ids) > 0 {
		if _, err := s.approvals.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}); err != nil {
			return fmt.Errorf("delete approvals: %w", err)
		}
	}
	return nil
}

// RejectionRecord is the audit record of a command that did not run
// because a person rejected it or nobody answered in time (reason): the
// sandbox chain never saw that end, so whoever settles the approval
// records it.
func RejectionRecord(a Approval, by, reason string, at time.Time) audit.Record {
	scope := sandbox.Scope{AppID: a.AppID, UserID: a.UserID, ChatID: a.ChatID}
	return audit.Record{
		Time: at, Instance: audit.DefaultInstance(), Kind: audit.KindCommand,
		ActorID: by, ActorKind: string(sandbox.ActorAgent), ToolCallID: a.ToolCallID,
		AppID: a.AppID, ChatID: a.ChatID, UserID: a.UserID, SandboxID: scope.SandboxID(),
		Tool: registry.ShellModelName, Command: a.Command,
		Decision: audit.Rejected, Rule: a.Rule, Reason: reason, Status: audit.StatusRejected, ExitCode: -1,
	}
}

// commandKey is the key of a command approved for a chat.
func commandKey(chat sandbox.Scope, command string) string {
	sum := sha256.Sum256([]byte(command))
	return chat.ChatKey() + "/" + hex.EncodeToString(sum[:])
}

// ApprovedInChat reports whether a person approved this exact command
// line for the whole chat.
func (s *Store) ApprovedInChat(ctx context.Context, chat sandbox.Scope, command string) (bool, error) {
	n, err := s.commands.CountDocuments(ctx, bson.D{{Key: "_id", Value: commandKey(chat, command)}})
	if err != nil {
		return false, fmt.Errorf("read chat %s's approved commands: %w", chat.ChatID, err)
	}
	return n > 0, nil
}

// ApproveInChat remembers that identical command lines of the chat run
// without asking.
func (s *Store) ApproveInChat(ctx context.Context, chat sandbox.Scope, command string) error {
	_, err := s.commands.InsertOne(ctx, bson.D{{Key: "_id", Value: commandKey(chat, command)}, {Key: "chatId", Value: chat.ChatKey()},
		{Key: "at", Value: time.Now().UTC()}})
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("remember chat %s's approved command: %w", chat.ChatID, err)
	}
	return nil
}

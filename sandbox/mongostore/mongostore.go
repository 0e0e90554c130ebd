// Package mongostore keeps the sandbox instance records (spec S4) in the
// MongoDB collection sandbox_instances, with the two small collections the
// stop scan, the deletions and reconciliation coordinate through:
// sandbox_claims (who holds a sandbox while stopping or repairing it) and
// sandbox_deletions (deletion intents, kept as tombstones once done),
// and one document that changes with every deletion requested
// (sandbox_deletion_generation, read beside each warm command). It
// implements sandbox.Store and serves both real MongoDB and the embedded
// FerretDB.
//
// It must never write a record without its owner (appId, userId and
// chatId: chat ids are scoped per app and user): the
// uniqueness of one sandbox per chat rests on that, above all on FerretDB,
// where the per-chat index cannot be partial. It must never rely on a
// conditional update being atomic: FerretDB 1.x reads, changes and writes
// back whole documents, so two updates of one document can both match.
// Mutual exclusion rests on inserts into unique _ids (claims, intents)
// and on each side writing before it reads the other's mark. It knows
// nothing of how providers run sandboxes, nor of HTTP or tasks.
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
)

// Collection is the name of the collection the records live in.
const Collection = "sandbox_instances"

// Index names are explicit so that they stay the same whatever the server
// would derive from the keys, and so that Idle can name its index.
const (
	IndexSandbox = "provider_sandboxId"
	IndexChat    = "appId_userId_chatId"
	// indexChatUnscoped is the index of one sandbox per app and chat id,
	// from before chat ids were scoped per app and user; New drops it.
	indexChatUnscoped = "appId_chatId"
	IndexIdle         = "status_lastActiveAt"
)

// touchAttempts bounds Touch's retries after a duplicate-key error. One
// retry is enough when a concurrent first Touch won the insert; more only
// covers a record deleted and recreated in between.
const touchAttempts = 5

// Store is the MongoDB sandbox.Store.
type Store struct {
	coll      *mongo.Collection // sandbox_instances
	claims    *mongo.Collection // sandbox_claims
	deletions *mongo.Collection // sandbox_deletions
	// generation holds the deletions' generation (see Deleted).
	generation *mongo.Collection
	pool       *mongo.Collection // sandbox_pool
	activity   *activity.Index   // nil: Idle asks the records' index
	log        *slog.Logger
	// cleared remembers, per chat, the deletions' generation under which
	// Deleted last found neither the chat's deletion nor its app's.
	cleared clearedChats
}

var _ sandbox.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithActivity makes the store keep idx beside the records and answer
// Idle from it: for a database that cannot use the {status,
// lastActiveAt} index, such as FerretDB 1.x (see Idle). The records stay
// the truth; idx is filled again from them when Redis loses it.
func WithActivity(idx *activity.Index) Option {
	return func(s *Store) { s.activity = idx }
}

// New returns a store over db's sandbox_instances collection and creates
// its indexes, which is idempotent. logger receives the one warning about
// a server without partial indexes, and failures to update the activity
// index; nil means slog.Default().
func New(ctx context.Context, db *mongo.Database, logger *slog.Logger, opts ...Option) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Store{
		coll:       db.Collection(Collection),
		claims:     db.Collection(ClaimsCollection),
		deletions:  db.Collection(DeletionsCollection),
		generation: db.Collection(GenerationCollection),
		pool:       db.Collection(PoolCollection),
		log:        logger,
	}
	for _, o := range opts {
		o(s)
	}
	if err := s.createIndexes(ctx, logger); err != nil {
		return nil, fmt.Errorf("create indexes of %s: %w", Collection, err)
	}
	for _, m := range []struct {
		coll  *mongo.Collection
		model mongo.IndexModel
	}{
		{s.claims, mongo.IndexModel{Keys: bson.D{{Key: "claimedAt", Value: 1}}, Options: options.Index().SetName(IndexClaimedAt)}},
		{s.deletions, mongo.IndexModel{Keys: bson.D{{Key: "state", Value: 1}, {Key: "requestedAt", Value: 1}}, Options: options.Index().SetName(IndexDeletionState)}},
		{s.pool, mongo.IndexModel{Keys: bson.D{{Key: "provider", Value: 1}, {Key: "createdAt", Value: 1}}, Options: options.Index().SetName(IndexPool)}},
	} {
		if _, err := m.coll.Indexes().CreateOne(ctx, m.model); err != nil {
			return nil, fmt.Errorf("create indexes of %s: %w", m.coll.Name(), err)
		}
	}
	return s, nil
}

var (
	sandboxKeys = bson.D{{Key: "provider", Value: 1}, {Key: "sandboxId", Value: 1}}
	chatKeys    = bson.D{{Key: "appId", Value: 1}, {Key: "userId", Value: 1}, {Key: "chatId", Value: 1}}
	idleKeys    = bson.D{{Key: "status", Value: 1}, {Key: "lastActiveAt", Value: 1}}
	// Where both exist: records of other origins may lack an owner.
	chatFilter = bson.D{
		{Key: "appId", Value: bson.D{{Key: "$exists", Value: true}}},
		{Key: "userId", Value: bson.D{{Key: "$exists", Value: true}}},
		{Key: "chatId", Value: bson.D{{Key: "$exists", Value: true}}},
	}
)

// Server error codes the store tells apart. FerretDB returns
// NotImplemented for the index options it lacks.
const (
	codeIndexOptionsConflict  = 85
	codeIndexKeySpecsConflict = 86
	codeNotImplemented        = 238
	codeNamespaceNotFound     = 26
	codeIndexNotFound         = 27
)

// key selects a record by its _id, "<provider>/<sandboxId>". Every lookup
// on the exec path goes through it: FerretDB's SQLite backend passes only
// a filter on _id alone down to SQLite, so a filter on {provider,
// sandboxId} would decode the whole collection. The embedded database
// gives SQLite an index for that filter (mongodb.Embedded.IndexIDs), so
// these lookups take about half a millisecond whatever the collection's
// size. The unique {provider, sandboxId} index still guards the pair on
// MongoDB.
func key(provider, sandboxID string) bson.D {
	return bson.D{{Key: "_id", Value: recordID(provider, sandboxID)}}
}

func recordID(provider, sandboxID string) string { return provider + "/" + sandboxID }

// Touch upserts the record with status running and lastActiveAt now (S5);
// the owner, createdAt and limit are written only on insert. Times are
// stored as BSON dates, to the millisecond.
//
// Before and after writing it looks for a deletion intent of the chat or
// the app (sandbox.ErrDeleted) and for a claim on the sandbox
// (sandbox.ErrBusy), each read by _id. Found before, nothing is written.
// Found after, the write raced the other side, which wrote its mark before
// reading the record: a record this call inserted for a deleted chat is
// removed again, and a claim holder overwrites the status written here.
func (s *Store) Touch(ctx context.Context, inst sandbox.Instance, now time.Time) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	if err := s.admit(ctx, inst); err != nil {
		return fmt.Errorf("touch sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	update := touchUpdate(inst, now)
	opts := options.UpdateOne().SetUpsert(true)
	var (
		res *mongo.UpdateResult
		err error
	)
	for range touchAttempts {
		// Two first Touches can both find no record and both insert; the
		// unique index refuses the second, whose retry then matches the
		// first's record (MongoDB documents this race for upserts; FerretDB
		// shows it too, see TestTouchConcurrent). A clash
		// on {appId, userId, chatId} fails every attempt and is returned.
		err = write(ctx, func() (err error) {
			res, err = s.coll.UpdateOne(ctx, key(inst.Provider, inst.SandboxID), update, opts)
			return err
		})
		if !mongo.IsDuplicateKeyError(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("touch sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	if err := s.admit(ctx, inst); err != nil {
		if errors.Is(err, sandbox.ErrDeleted) && res.UpsertedCount > 0 {
			err = s.takeBack(ctx, inst, err)
		}
		return fmt.Errorf("touch sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	s.active(ctx, inst, now, true)
	return nil
}

func checkInstance(inst sandbox.Instance) error {
	switch {
	case inst.Provider == "" || inst.SandboxID == "":
		return fmt.Errorf("touch sandbox record: provider %q and sandboxId %q must both be set", inst.Provider, inst.SandboxID)
	case inst.AppID == "" || inst.UserID == "" || inst.ChatID == "":
		return fmt.Errorf("touch sandbox record %s/%s: appId %q, userId %q and chatId %q must all be set", inst.Provider, inst.SandboxID, inst.AppID, inst.UserID, inst.ChatID)
	}
	return nil
}

// Refresh writes a command's use after it (see sandbox.Store): the
// record's lastActiveAt by its _id first, whatever its status, then, for
// a running record, the lookup of a claim. A write that neither inserts a
// record nor changes a status needs no look before it (two round trips
// instead of Touch's seven).
func (s *Store) Refresh(ctx context.Context, inst sandbox.Instance, now time.Time) error {
	if err := checkInstance(inst); err != nil {
		return err
	}
	status, err := s.refresh(ctx, inst, now)
	switch {
	case err != nil:
		return fmt.Errorf("refresh sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	case status == "":
		return fmt.Errorf("refresh sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, sandbox.ErrNotFound)
	case status != sandbox.StatusRunning:
		return fmt.Errorf("refresh sandbox record %s/%s: it is %s: %w", inst.Provider, inst.SandboxID, status, sandbox.ErrNotRunning)
	}
	if err := s.claimed(ctx, inst); err != nil {
		return fmt.Errorf("refresh sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	s.active(ctx, inst, now, false)
	return nil
}

// Create inserts a new record (see sandbox.Store): one insert and the
// three lookups after it, where Touch makes seven round trips.
func (s *Store) Create(ctx context.Context, inst sandbox.Instance, now time.Time) (bool, error) {
	if err := checkInstance(inst); err != nil {
		return false, err
	}
	doc := append(bson.D{{Key: "_id", Value: recordID(inst.Provider, inst.SandboxID)}}, runningFields(now)...)
	doc = append(doc, identityFields(inst, now)...)
	err := write(ctx, func() error { _, err := s.coll.InsertOne(ctx, doc); return err })
	switch {
	case mongo.IsDuplicateKeyError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("create sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	if err := s.admit(ctx, inst); err != nil {
		if errors.Is(err, sandbox.ErrDeleted) {
			err = s.takeBack(ctx, inst, err)
			return false, fmt.Errorf("create sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
		}
		return true, fmt.Errorf("create sandbox record %s/%s: %w", inst.Provider, inst.SandboxID, err)
	}
	s.active(ctx, inst, now, true)
	return true, nil
}

// takeBack removes the record this call inserted for a chat whose
// deletion it found after the insert (the deletion may already have
// looked for the chat's records), and returns refusal with what failed of
// that.
func (s *Store) takeBack(ctx context.Context, inst sandbox.Instance, refusal error) error {
	if err := write(ctx, func() error { _, err := s.coll.DeleteOne(ctx, key(inst.Provider, inst.SandboxID)); return err }); err != nil {
		return errors.Join(refusal, fmt.Errorf("remove the record written after the deletion: %w", err))
	}
	return refusal
}

// refresh sets the record's lastActiveAt and returns its status; empty
// when there is no record. The filter is the _id alone: FerretDB's SQLite
// backend looks a document up only for a filter of exactly {_id}, and
// reads the whole collection for any other (with {_id, status}, a warm
// command cost a scan of every record).
func (s *Store) refresh(ctx context.Context, inst sandbox.Instance, now time.Time) (sandbox.Status, error) {
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "lastActiveAt", Value: now.UTC()}}}}
	var before struct {
		Status sandbox.Status `bson:"status"`
	}
	// No projection: FerretDB's findAndModify has none.
	err := write(ctx, func() error {
		return s.coll.FindOneAndUpdate(ctx, key(inst.Provider, inst.SandboxID), update).Decode(&before)
	})
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return before.Status, nil
}

// active records the sandbox's use in the activity index, and its user
// when started says its record was just written as running (the caps
// count the index's users). The record is written, which is what counts:
// a sandbox missing from the index is put back by reconciliation. So a
// Redis that is slow or down holds up no command for long.
func (s *Store) active(ctx context.Context, inst sandbox.Instance, now time.Time, started bool) {
	if s.activity == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, activityTimeout)
	defer cancel()
	var err error
	if started {
		err = s.activity.Started(ctx, inst.Provider, activity.Entry{SandboxID: inst.SandboxID, LastActiveAt: now, UserID: inst.UserID})
	} else {
		err = s.activity.Active(ctx, inst.Provider, inst.SandboxID, now)
	}
	if err != nil {
		s.log.Warn("sandbox store: activity index not updated; reconciliation will repair it", "err", err)
	}
}

// activityTimeout bounds a write to the activity index beside a record's.
const activityTimeout = time.Second

// forget takes sandboxes that no longer run out of the activity index.
func (s *Store) forget(ctx context.Context, provider string, sandboxIDs ...string) {
	if s.activity == nil {
		return
	}
	// A stale entry only costs the stop scan a look at the record.
	ctx, cancel := context.WithTimeout(ctx, activityTimeout)
	defer cancel()
	if err := s.activity.Forget(ctx, provider, sandboxIDs...); err != nil {
		s.log.Warn("sandbox store: activity index not updated", "err", err)
	}
}

// touchUpdate sets status running and lastActiveAt now, and the identity
// fields on insert only.
func touchUpdate(inst sandbox.Instance, now time.Time) bson.D {
	return bson.D{
		{Key: "$set", Value: runningFields(now)},
		{Key: "$setOnInsert", Value: identityFields(inst, now)},
	}
}

// runningFields are what every Touch writes: status running, used now.
func runningFields(now time.Time) bson.D {
	return bson.D{
		{Key: "status", Value: sandbox.StatusRunning},
		{Key: "lastActiveAt", Value: now.UTC()},
	}
}

// identityFields are what a new record gets besides: whose sandbox it
// is, since when, and its limits.
func identityFields(inst sandbox.Instance, now time.Time) bson.D {
	return bson.D{
		{Key: "provider", Value: inst.Provider},
		{Key: "sandboxId", Value: inst.SandboxID},
		{Key: "appId", Value: inst.AppID},
		{Key: "userId", Value: inst.UserID},
		{Key: "chatId", Value: inst.ChatID},
		{Key: "createdAt", Value: now.UTC()},
		{Key: "limit", Value: inst.Limit},
	}
}

// admit looks for what forbids a command to use the sandbox: a deletion
// intent of its chat or app, pending or done, then a claim on it. The
// lookups go one after the other: sent at once they were slower on the
// embedded database, which serves them on the same cores. They stay three
// lookups by _id: one query with $in over both deletion keys is a scan of
// the whole collection on FerretDB's SQLite backend (690 ms with 3000
// deletions recorded, against 1.5 ms a lookup).
func (s *Store) admit(ctx context.Context, inst sandbox.Instance) error {
	if err := s.deleted(ctx, inst); err != nil {
		return err
	}
	return s.claimed(ctx, inst)
}

// Deleted reports a deletion requested of the sandbox's chat or app,
// pending or done (an error wrapping sandbox.ErrDeleted); nil when there
// is none. It is asked beside every warm command, so it reads one
// document where it can: the deletions' generation, which every request
// of a deletion changes after recording it (RequestDeletions). A chat
// found not deleted under the generation read now, by this store, was
// not deleted since; otherwise the chat's and the app's intents are
// looked up, and the answer remembered under that generation.
func (s *Store) Deleted(ctx context.Context, inst sandbox.Instance) error {
	gen, err := s.readGeneration(ctx)
	if err != nil {
		return fmt.Errorf("look for a deletion of the chat: %w", err)
	}
	chat := ChatDeletionKey(inst.Scope())
	if s.cleared.under(chat, gen) {
		return nil
	}
	if err := s.deleted(ctx, inst); err != nil {
		return err
	}
	s.cleared.remember(chat, gen)
	return nil
}

// deleted looks up the intents to delete the sandbox's chat (also one
// recorded before chat ids were scoped, which names no user) and its app.
func (s *Store) deleted(ctx context.Context, inst sandbox.Instance) error {
	unscoped := inst.Scope()
	unscoped.UserID = ""
	for _, id := range []string{ChatDeletionKey(inst.Scope()), ChatDeletionKey(unscoped), AppDeletionKey(inst.AppID)} {
		var d Deletion
		err := s.deletions.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
		switch {
		case err == nil:
			return fmt.Errorf("%w (deletion of %s requested at %s)", sandbox.ErrDeleted, d.describe(), d.RequestedAt.Format(time.RFC3339))
		case !errors.Is(err, mongo.ErrNoDocuments):
			return fmt.Errorf("look for a deletion of the chat: %w", err)
		}
	}
	return nil
}

// claimed reports a claim on the sandbox (an error wrapping
// sandbox.ErrBusy); nil when there is none.
func (s *Store) claimed(ctx context.Context, inst sandbox.Instance) error {
	var c Claim
	err := s.claims.FindOne(ctx, bson.D{{Key: "_id", Value: recordID(inst.Provider, inst.SandboxID)}}).Decode(&c)
	switch {
	case err == nil:
		return fmt.Errorf("%w (%s since %s)", sandbox.ErrBusy, c.Reason, c.ClaimedAt.Format(time.RFC3339))
	case !errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("look for a claim on the sandbox: %w", err)
	}
	return nil
}

// Get returns the record, or an error wrapping sandbox.ErrNotFound.
func (s *Store) Get(ctx context.Context, provider, sandboxID string) (sandbox.Instance, error) {
	var inst sandbox.Instance
	err := s.coll.FindOne(ctx, key(provider, sandboxID)).Decode(&inst)
	if errors.Is(err, mongo.ErrNoDocuments) {
		err = sandbox.ErrNotFound
	}
	if err != nil {
		return sandbox.Instance{}, fmt.Errorf("get sandbox record %s/%s: %w", provider, sandboxID, err)
	}
	return inst, nil
}

// recordStates are the statuses a record may hold.
var recordStates = []sandbox.Status{sandbox.StatusRunning, sandbox.StatusStopped, sandbox.StatusStopping, sandbox.StatusDeleting}

// SetStatus sets the status of an existing record; an error wrapping
// sandbox.ErrNotFound when there is none. Only the record states (running,
// stoped, stopping, deleting) are stored.
func (s *Store) SetStatus(ctx context.Context, provider, sandboxID string, status sandbox.Status) error {
	if !slices.Contains(recordStates, status) {
		return fmt.Errorf("set status of sandbox record %s/%s: status %q is not stored", provider, sandboxID, status)
	}
	var res *mongo.UpdateResult
	err := write(ctx, func() (err error) {
		res, err = s.coll.UpdateOne(ctx, key(provider, sandboxID), bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: status}}}})
		return err
	})
	if err == nil && res.MatchedCount == 0 {
		err = sandbox.ErrNotFound
		s.forget(ctx, provider, sandboxID)
	}
	if err != nil {
		return fmt.Errorf("set status of sandbox record %s/%s: %w", provider, sandboxID, err)
	}
	// Stopping and running records stay: a stop that fails puts the
	// record back to running, with its lastActiveAt unchanged.
	if status == sandbox.StatusStopped || status == sandbox.StatusDeleting {
		s.forget(ctx, provider, sandboxID)
	}
	return nil
}

// Delete removes the record; a missing record is not an error.
func (s *Store) Delete(ctx context.Context, provider, sandboxID string) error {
	if err := write(ctx, func() error { _, err := s.coll.DeleteOne(ctx, key(provider, sandboxID)); return err }); err != nil {
		return fmt.Errorf("delete sandbox record %s/%s: %w", provider, sandboxID, err)
	}
	s.forget(ctx, provider, sandboxID)
	return nil
}

package audit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Collection is where the records are kept.
const Collection = "audit"

// Index names. The indexes are plain compound ones, which FerretDB
// accepts; FerretDB 1.24 (SQLite) creates them but answers every query
// but {_id} by reading the whole collection, so on the embedded database
// the retention (Prune) is what bounds a query's cost.
const (
	IndexTime = "time_id"
	IndexUser = "userId_time"
	IndexApp  = "appId_time"
	IndexChat = "chatId_time"
)

// MaxLimit bounds the records of one page.
const MaxLimit = 500

// DefaultLimit is a page's size when the query names none.
const DefaultLimit = 50

// ErrBadCursor: a cursor that this package did not make.
var ErrBadCursor = errors.New("invalid audit cursor")

// Store keeps the records.
type Store struct {
	coll *mongo.Collection
}

// New returns the store of db's audit collection, creating its indexes.
func New(ctx context.Context, db *mongo.Database) (*Store, error) {
	s := &Store{coll: db.Collection(Collection)}
	// One createIndexes command per index: FerretDB 1.24 drops the
	// connection when one command names several existing indexes.
	for _, ix := range []struct {
		name string
		keys bson.D
	}{
		{IndexTime, bson.D{{Key: "time", Value: -1}, {Key: "_id", Value: -1}}},
		{IndexUser, bson.D{{Key: "userId", Value: 1}, {Key: "time", Value: -1}}},
		{IndexApp, bson.D{{Key: "appId", Value: 1}, {Key: "time", Value: -1}}},
		{IndexChat, bson.D{{Key: "chatId", Value: 1}, {Key: "time", Value: -1}}},
	} {
		m := mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name)}
		if _, err := s.coll.Indexes().CreateOne(ctx, m); err != nil {
			return nil, fmt.Errorf("create index %s of %s: %w", ix.name, Collection, err)
		}
	}
	return s, nil
}

// Insert writes records. A record without an ID gets one.
func (s *Store) Insert(ctx context.Context, recs ...Record) error {
	if len(recs) == 0 {
		return nil
	}
	docs := make([]any, len(recs))
	for i := range recs {
		if recs[i].ID.IsZero() {
			recs[i].ID = bson.NewObjectID()
		}
		recs[i].Time = recs[i].Time.UTC().Truncate(time.Millisecond)
		docs[i] = recs[i]
	}
	// Unordered: one bad record does not keep the others out.
	_, err := s.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	if err != nil && !onlyDuplicates(err) {
		return fmt.Errorf("write %d audit records: %w", len(recs), err)
	}
	return nil
}

// onlyDuplicates reports whether every write of a failed insert failed on
// a duplicate _id: a retry of records that the first attempt wrote.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

// Filter selects records; empty fields select everything.
type Filter struct {
	UserID, ActorID, AppID, ChatID string
	Decision                       Decision
	Status                         Status
	Kind                           Kind
	// OOMKilled and PidsLimited, when set, select the commands that met
	// their sandbox's memory or process limit.
	OOMKilled, PidsLimited bool
	// Since and Until bound the records' time: Since <= time < Until.
	Since, Until time.Time
}

func (f Filter) query() bson.D {
	q := bson.D{}
	eq := func(key, v string) {
		if v != "" {
			q = append(q, bson.E{Key: key, Value: v})
		}
	}
	eq("userId", f.UserID)
	eq("actorId", f.ActorID)
	eq("appId", f.AppID)
	eq("chatId", f.ChatID)
	eq("decision", string(f.Decision))
	eq("status", string(f.Status))
	eq("kind", string(f.Kind))
	if f.OOMKilled {
		q = append(q, bson.E{Key: "oomKilled", Value: true})
	}
	if f.PidsLimited {
		q = append(q, bson.E{Key: "pidsLimited", Value: true})
	}
	var t bson.D
	if !f.Since.IsZero() {
		t = append(t, bson.E{Key: "$gte", Value: f.Since.UTC()})
	}
	if !f.Until.IsZero() {
		t = append(t, bson.E{Key: "$lt", Value: f.Until.UTC()})
	}
	if len(t) > 0 {
		q = append(q, bson.E{Key: "time", Value: t})
	}
	return q
}

// newest is the order of every answer: newest first, ties by _id.
var newest = bson.D{{Key: "time", Value: -1}, {Key: "_id", Value: -1}}

// Page is one page of a query.
type Page struct {
	Records []Record
	// Next is the cursor of the next page; empty on the last one.
	Next string
}

// Query returns up to limit records (DefaultLimit when <= 0, at most
// MaxLimit) that match f, newest first, after cursor (empty: from the
// newest). The cursor is the position of the last record returned, in
// (time, _id) order, so pages neither repeat nor skip records when others
// are inserted meanwhile: newer ones are before the first page, and a
// record older than the cursor is only ever written by a call that was
// still running when the page was read.
func (s *Store) Query(ctx context.Context, f Filter, cursor string, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	q := f.query()
	if cursor != "" {
		t, id, err := decodeCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		q = append(q, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "time", Value: bson.D{{Key: "$lt", Value: t}}}},
			bson.D{{Key: "time", Value: t}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: id}}}},
		}})
	}
	// One more than asked says whether there is a next page.
	cur, err := s.coll.Find(ctx, q, options.Find().SetSort(newest).SetLimit(int64(limit+1)))
	if err != nil {
		return Page{}, fmt.Errorf("query the audit records: %w", err)
	}
	var recs []Record
	if err := cur.All(ctx, &recs); err != nil {
		return Page{}, fmt.Errorf("read the audit records: %w", err)
	}
	p := Page{Records: recs}
	if len(recs) > limit {
		p.Records = recs[:limit]
		last := p.Records[limit-1]
		p.Next = encodeCursor(last.Time, last.ID)
	}
	if p.Records == nil {
		p.Records = []Record{}
	}
	return p, nil
}

// Each calls fn with every record that matches f, newest first, reading
// them from the database a batch at a time: an export of any size holds
// one batch in memory. It stops at fn's first error and returns it.
func (s *Store) Each(ctx context.Context, f Filter, fn func(Record) error) error {
	cur, err := s.coll.Find(ctx, f.query(), options.Find().SetSort(newest).SetBatchSize(500))
	if err != nil {
		return fmt.Errorf("query the audit records: %w", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		var r Record
		if err := cur.Decode(&r); err != nil {
			return fmt.Errorf("read an audit record: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read the audit records: %w", err)
	}
	return nil
}

// Prune deletes the records older than before and returns how many.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.coll.DeleteMany(ctx, bson.D{{Key: "time", Value: bson.D{{Key: "$lt", Value: before.UTC()}}}})
	if err != nil {
		return 0, fmt.Errorf("prune the audit records before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return res.DeletedCount, nil
}

// A cursor is "<unix milliseconds>.<ObjectID hex>", base64url: opaque to
// clients, checked when read back.
func encodeCursor(t time.Time, id bson.ObjectID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t.UnixMilli(), 10) + "." + id.Hex()))
}

func decodeCursor(s string) (time.Time, bson.ObjectID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, bson.ObjectID{}, ErrBadCursor
	}
	ms, hex, ok := strings.Cut(string(raw), ".")
	if !ok {
		return time.Time{}, bson.ObjectID{}, ErrBadCursor
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}, bson.ObjectID{}, ErrBadCursor
	}
	id, err := bson.ObjectIDFromHex(hex)
	if err != nil {
		return time.Time{}, bson.ObjectID{}, ErrBadCursor
	}
	return time.UnixMilli(n).UTC(), id, nil
}

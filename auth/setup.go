package auth

// One-time set-password links: an admin creates an account with a link
// instead of a password, or resets a password by issuing one, and the
// person chooses their password on the link's page. Like sessions and
// keys, a link's token is stored only as its hash.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// PasswordLinks is the collection of pending set-password links.
const PasswordLinks = "password_links"

// PasswordLinkTTL is how long a set-password link works.
const PasswordLinkTTL = 72 * time.Hour

// passwordLinkPrefix starts every link's token, to tell it from keys
// ("fbk_") and sessions ("fbs_").
const passwordLinkPrefix = "fbp_"

var (
	// ErrLinkInvalid: no such link: never issued, used already, replaced
	// by a newer one, or its account deleted.
	ErrLinkInvalid = errors.New("this set-password link is not valid: it was used already, replaced by a newer one, or mistyped")
	// ErrLinkExpired: the link is past its expiry (and is now deleted).
	ErrLinkExpired = errors.New("this set-password link has expired")
	// ErrDisabled: the account is disabled; its link waits until it is
	// enabled again.
	ErrDisabled = errors.New("the account is disabled")
)

// passwordLink is a pending link. Its _id is the user's id, so a user has
// at most one and issuing another replaces it in one write: the database
// (FerretDB in tests) has no transactions to make "delete the old, insert
// the new" atomic.
type passwordLink struct {
	ID   string `bson:"_id"`  // the user's id
	Hash string `bson:"hash"` // SHA-256 of the token
	// UserCreatedAt ties the link to this account: a later account of the
	// same name (and so the same id) is not set by it.
	UserCreatedAt time.Time `bson:"userCreatedAt"`
	CreatedAt     time.Time `bson:"createdAt"`
	ExpiresAt     time.Time `bson:"expiresAt"`
}

// PasswordLink is a link as issued; Token is returned this once and
// stored only as its hash.
type PasswordLink struct {
	Token     string
	UserID    string
	ExpiresAt time.Time
}

func (s *Store) passwordLinks() *mongo.Collection {
	return s.users.Database().Collection(PasswordLinks)
}

// CreateInvitedUser adds an account whose password is a random secret
// that is never shown, so no one can sign in as it until the person sets
// their password with the returned link.
func (s *Store) CreateInvitedUser(ctx context.Context, name string, role Role) (User, PasswordLink, error) {
	u, err := s.CreateUser(ctx, name, secret(""), role)
	if err != nil {
		return User{}, PasswordLink{}, err
	}
	link, err := s.IssuePasswordLink(ctx, u.ID)
	if err != nil {
		if derr := s.DeleteUser(ctx, u.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the half-made account: %w", derr))
		}
		return User{}, PasswordLink{}, err
	}
	return u, link, nil
}

// IssuePasswordLink makes a set-password link for a user, valid for
// PasswordLinkTTL; any earlier link of theirs stops working. The user's
// password and sessions stay as they are until the link is used.
func (s *Store) IssuePasswordLink(ctx context.Context, id string) (PasswordLink, error) {
	u, err := s.existing(ctx, id)
	if err != nil {
		return PasswordLink{}, err
	}
	token := secret(passwordLinkPrefix)
	now := s.Now().UTC()
	l := passwordLink{ID: u.ID, Hash: hash(token), UserCreatedAt: u.CreatedAt,
		CreatedAt: now.Truncate(time.Millisecond), ExpiresAt: now.Add(PasswordLinkTTL).Truncate(time.Millisecond)}
	coll := s.passwordLinks()
	upsert := options.Replace().SetUpsert(true)
	_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: u.ID}}, l, upsert)
	if mongo.IsDuplicateKeyError(err) {
		// Two links issued at once both inserted; the second write wins.
		_, err = coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: u.ID}}, l, upsert)
	}
	if err != nil {
		return PasswordLink{}, fmt.Errorf("issue a set-password link for %s: %w", id, err)
	}
	// Expired links are deleted when they are read; this catches the ones
	// no one opened. The database has no TTL indexes to do it.
	_, _ = coll.DeleteMany(ctx, bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now}}}})
	return PasswordLink{Token: token, UserID: u.ID, ExpiresAt: l.ExpiresAt}, nil
}

// PasswordLinkUser returns the account a link sets the password of and
// when the link expires, without using it: ErrLinkInvalid, ErrLinkExpired
// or ErrDisabled when it cannot be used.
func (s *Store) PasswordLinkUser(ctx context.Context, token string) (User, time.Time, error) {
	l, u, err := s.findPasswordLink(ctx, token)
	return u, l.ExpiresAt, err
}

// UsePasswordLink sets the password of the link's account and ends all
// its sessions; the link works once. A password that breaks the rules is
// ErrInvalid and leaves the link unused; an expired link is deleted.
func (s *Store) UsePasswordLink(ctx context.Context, token, password string) (User, error) {
	l, u, err := s.findPasswordLink(ctx, token)
	if errors.Is(err, ErrLinkExpired) {
		_, _ = s.passwordLinks().DeleteOne(ctx, bson.D{{Key: "_id", Value: l.ID}, {Key: "hash", Value: l.Hash}})
	}
	if err != nil {
		return User{}, err
	}
	if err := checkPassword(password); err != nil {
		return User{}, err
	}
	// Consumed before the password is set: of two uses at once, only the
	// one whose delete removed the link goes on.
	coll := s.passwordLinks()
	res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: l.ID}, {Key: "hash", Value: l.Hash}})
	if err != nil {
		return User{}, fmt.Errorf("use the set-password link of %s: %w", u.ID, err)
	}
	if res.DeletedCount != 1 {
		return User{}, ErrLinkInvalid
	}
	if err := s.setPassword(ctx, u.ID, password, ""); err != nil {
		// Give the link back, unless a newer one took its place.
		if _, ierr := coll.InsertOne(ctx, l); ierr != nil && !mongo.IsDuplicateKeyError(ierr) {
			err = errors.Join(err, fmt.Errorf("restore the set-password link: %w", ierr))
		}
		return User{}, err
	}
	return u, nil
}

// findPasswordLink looks a token up and checks that it may be used.
func (s *Store) findPasswordLink(ctx context.Context, token string) (passwordLink, User, error) {
	if !strings.HasPrefix(token, passwordLinkPrefix) {
		return passwordLink{}, User{}, ErrLinkInvalid
	}
	coll := s.passwordLinks()
	var l passwordLink
	err := coll.FindOne(ctx, bson.D{{Key: "hash", Value: hash(token)}}).Decode(&l)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return passwordLink{}, User{}, ErrLinkInvalid
	}
	if err != nil {
		return passwordLink{}, User{}, fmt.Errorf("look up a set-password link: %w", err)
	}
	if !s.Now().Before(l.ExpiresAt) {
		return l, User{}, ErrLinkExpired
	}
	u, err := s.User(ctx, l.ID)
	if errors.Is(err, ErrBadCredentials) || (err == nil && !u.CreatedAt.Equal(l.UserCreatedAt)) {
		// The account was deleted (and maybe made again): the link is void.
		_, _ = coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: l.ID}, {Key: "hash", Value: l.Hash}})
		return passwordLink{}, User{}, ErrLinkInvalid
	}
	if err != nil {
		return passwordLink{}, User{}, fmt.Errorf("look up the account of a set-password link: %w", err)
	}
	if u.Disabled {
		return l, u, ErrDisabled
	}
	return l, u, nil
}

// cancelPasswordLink voids the user's pending link, if any: a password
// set another way wins over it.
func (s *Store) cancelPasswordLink(ctx context.Context, id string) error {
	if _, err := s.passwordLinks().DeleteOne(ctx, bson.D{{Key: "_id", Value: id}}); err != nil {
		return fmt.Errorf("cancel the set-password link of %s: %w", id, err)
	}
	return nil
}

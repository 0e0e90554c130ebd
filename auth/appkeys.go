package auth

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// App keys (FastGPT's model): a key that belongs to one app rather than
// to a user. Its calls act as the app's programs: they reach that app's
// chat API, the chats of its end users (named in customUid) and of its
// share links' visitors, and their sandbox files. A key works while the
// account that made it is enabled; it goes with the app, and moves to a
// new owner only when the app is transferred with its keys
// (TransferAppKeys).

// AppKeyUser is the user id an app key's calls carry: no account has it
// (account ids start with "u:").
func AppKeyUser(appID string) string { return "app:" + appID }

// ServicePrefix starts the user ids of the service key's end users whose
// customUid holds a ':'.
const ServicePrefix = "svc:"

// ServiceUser is the user id of the service key's (FLOWBOX_API_KEY) end
// user customUid. Every other caller's id holds a ':' ("u:<name>",
// "app:<appId>:<uid>", "share:<linkId>:<uid>"), so a customUid without
// one stays as it is (the chats programs made before keep their user) and
// one with a ':' is put under ServicePrefix: the service key can never
// name an account, an app key's user or a visitor, and two customUids
// never share a user (the ids without ':' and those under the prefix are
// apart, and the prefix is added to all of the latter).
func ServiceUser(customUID string) string {
	if strings.Contains(customUID, ":") {
		return ServicePrefix + customUID
	}
	return customUID
}

// CreateAppKey makes a key bound to appID; createdBy is the user who made
// it (the app's owner or an admin). The secret is returned once.
func (s *Store) CreateAppKey(ctx context.Context, appID, createdBy string, spec KeySpec) (string, KeyInfo, error) {
	if appID == "" {
		return "", KeyInfo{}, fmt.Errorf("%w: an app key needs an app", ErrInvalid)
	}
	return s.insertKey(ctx, apiKey{AppID: appID, CreatedBy: createdBy}, spec)
}

// AppKeys lists an app's keys, newest first, without their secrets.
func (s *Store) AppKeys(ctx context.Context, appID string) ([]KeyInfo, error) {
	cur, err := s.keys.Find(ctx, bson.D{{Key: "appId", Value: appID}})
	if err != nil {
		return nil, fmt.Errorf("list the app's keys: %w", err)
	}
	var keys []apiKey
	if err := cur.All(ctx, &keys); err != nil {
		return nil, fmt.Errorf("list the app's keys: %w", err)
	}
	return keyInfos(keys), nil
}

// RevokeAppKey deletes one of the app's keys; ErrNotFound when the app
// has no such key.
func (s *Store) RevokeAppKey(ctx context.Context, appID, keyID string) error {
	res, err := s.keys.DeleteOne(ctx, bson.D{{Key: "_id", Value: keyID}, {Key: "appId", Value: appID}})
	if err != nil {
		return fmt.Errorf("revoke the app key: %w", err)
	}
	if res.DeletedCount == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteAppKeys deletes every key of an app (the app is being deleted).
func (s *Store) DeleteAppKeys(ctx context.Context, appID string) error {
	if appID == "" {
		return nil
	}
	if _, err := s.keys.DeleteMany(ctx, bson.D{{Key: "appId", Value: appID}}); err != nil {
		return fmt.Errorf("delete the app's keys: %w", err)
	}
	return nil
}

// Active reports whether id names an enabled account: nil, or
// ErrBadCredentials (for a deleted, disabled or unknown one, including
// ""). What a user made for others (app keys, share links) works only
// while it holds.
func (s *Store) Active(ctx context.Context, id string) error {
	if id == "" {
		return ErrBadCredentials
	}
	u, err := s.User(ctx, id)
	if err != nil {
		return err
	}
	if u.Disabled {
		return ErrBadCredentials
	}
	return nil
}

// TransferAppKeys makes to the creator of every key of appID: the app
// changes hands with its keys, which then live by to's account.
func (s *Store) TransferAppKeys(ctx context.Context, appID, to string) error {
	if appID == "" || to == "" {
		return fmt.Errorf("%w: transferring an app's keys needs the app and the new owner", ErrInvalid)
	}
	if _, err := s.keys.UpdateMany(ctx, bson.D{{Key: "appId", Value: appID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "createdBy", Value: to}}}}); err != nil {
		return fmt.Errorf("transfer the app's keys: %w", err)
	}
	return nil
}

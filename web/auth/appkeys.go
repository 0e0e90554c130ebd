package auth

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// App keys (FastGPT's model): a key that belongs to one app rather than
// to a user. Its calls act as the app's programs: they reach that app's
// chat API, its chats and their sandbox files, and name their end users
// in customUid. They survive a change of the app's owner and go with the
// app.

// AppKeyUser is the user id an app key's calls carry: no account has it
// (account ids start with "u:").
func AppKeyUser(appID string) string { return "app:" + appID }

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

package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
)

// A chat's sandbox ID (S1) is the first 16 hex characters of
// sha256("appId-userId-chatId"), but that string does not always name one
// chat: user "a" with chat "b-c" and user "a-b" with chat "c" spell the
// same one, and would share a sandbox, its files and its shell. The
// string is unambiguous exactly when appId and userId hold no '-' (the
// first two dashes are then the separators), so S1's formula is kept for
// those chats, and every other chat gets an ID derived from its parts with
// their lengths (idV2), which no two chats can share.
//
// Chats whose parts hold a '-' had S1 IDs before. Their records and
// workspace directories keep working through the legacy table
// (KeepLegacyIDs): each such record names its chat's parts, so the chat
// that really owns a legacy ID is known, and only that chat gets it. A chat
// whose S1 ID is taken by another chat's legacy record never gets it.

// IDFor returns the sandbox ID of a chat (see above). Every part of the
// product that names a chat's sandbox, records, provider resources and
// workspace directories alike, goes through it.
func IDFor(appID, userID, chatID string) string {
	scope := Scope{AppID: appID, UserID: userID, ChatID: chatID}
	legacy := legacyIDs.Load()
	if legacy != nil {
		if id, ok := legacy.byScope[scope]; ok {
			return id
		}
	}
	if !Ambiguous(appID, userID) {
		id := LegacyID(appID, userID, chatID)
		if legacy == nil || !legacy.taken[id] {
			return id
		}
	}
	return idV2(appID, userID, chatID)
}

// Ambiguous reports whether S1's "appId-userId-chatId" could also spell
// another chat: when appId or userId holds a '-'.
func Ambiguous(appID, userID string) bool {
	return strings.Contains(appID, "-") || strings.Contains(userID, "-")
}

// LegacyID is S1's formula as it stands: the first 16 hex characters of
// sha256("appId-userId-chatId"). IDFor uses it where it is unambiguous.
func LegacyID(appID, userID, chatID string) string {
	sum := sha256.Sum256([]byte(appID + "-" + userID + "-" + chatID))
	return hex.EncodeToString(sum[:])[:16]
}

// idV2 hashes the parts with their lengths. Its input starts with '-',
// which no S1 input does (appId is never empty, and S1 is used only for
// an appId without '-'), so the two never hash the same string.
func idV2(appID, userID, chatID string) string {
	b := make([]byte, 0, 4+3*binary.MaxVarintLen64+len(appID)+len(userID)+len(chatID))
	b = append(b, "-v2:"...)
	for _, part := range []string{appID, userID, chatID} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

type legacyTable struct {
	byScope map[Scope]string
	taken   map[string]bool
}

var (
	legacyIDs atomic.Pointer[legacyTable]
	legacyMu  sync.Mutex // serialises the writers of legacyIDs
)

// KeepLegacyIDs makes IDFor give each of scopes the S1 ID it was created
// under, and no other chat that ID. The composition root calls it at
// start with the owners of the existing records and workspace
// directories; scopes whose ID under S1 is unambiguous, or that are not
// the owner of the ID they are given with, are left out by the caller
// (LegacyOwner helps). Later calls add to the table: an entry is never
// wrong to keep, since no new chat is given an ambiguous S1 ID.
func KeepLegacyIDs(scopes []Scope) {
	legacyMu.Lock()
	defer legacyMu.Unlock()
	t := &legacyTable{byScope: map[Scope]string{}, taken: map[string]bool{}}
	if old := legacyIDs.Load(); old != nil {
		maps.Copy(t.byScope, old.byScope)
		maps.Copy(t.taken, old.taken)
	}
	for _, s := range scopes {
		if !Ambiguous(s.AppID, s.UserID) {
			continue
		}
		id := LegacyID(s.AppID, s.UserID, s.ChatID)
		t.byScope[s] = id
		t.taken[id] = true
	}
	legacyIDs.Store(t)
}

// LegacyOwner reports whether a record or directory named id, made for
// scope, was made under S1's formula for an ambiguous scope: one that
// KeepLegacyIDs must keep.
func LegacyOwner(scope Scope, id string) bool {
	return Ambiguous(scope.AppID, scope.UserID) && LegacyID(scope.AppID, scope.UserID, scope.ChatID) == id
}

package engine

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/workspace"
)

// keepLegacyIDs finds the sandboxes and workspace directories made under
// S1's formula for chats it could confuse with others, and has
// sandbox.IDFor keep their IDs for those chats only (see sandbox/id.go).
// Records and owner.json name the chat that made them, so the owner of a
// shared ID is the one its record (or directory) names. No such sandbox
// is made any more, so reading them once at start is enough.
func keepLegacyIDs(ctx context.Context, store *mongostore.Store, provider string, ws *workspace.Store) error {
	var keep []sandbox.Scope
	records, err := store.ByProvider(ctx, provider)
	if err != nil {
		return fmt.Errorf("read the sandbox records to keep their IDs: %w", err)
	}
	for _, r := range records {
		scope := sandbox.Scope{AppID: r.AppID, UserID: r.UserID, ChatID: r.ChatID}
		if sandbox.LegacyOwner(scope, r.SandboxID) {
			keep = append(keep, scope)
		}
	}
	dirs, err := ws.Dirs(ctx)
	if err != nil {
		return fmt.Errorf("read the workspace directories to keep their IDs: %w", err)
	}
	for _, d := range dirs {
		if d.Known() && sandbox.LegacyOwner(d.Scope(), d.SandboxID) {
			keep = append(keep, d.Scope())
		}
	}
	sandbox.KeepLegacyIDs(keep)
	return nil
}

// appTransfer hands an app's keys and share links to the app's new owner
// (web.AppTransfer): they live by their creator's account. Its users
// count against the new owner's caps from then on.
type appTransfer struct {
	keys   *auth.Store
	links  *share.Store
	owners *sandbox.Owners
}

func (t appTransfer) TransferApp(ctx context.Context, appID, to string) error {
	t.owners.Moved(appID, to)
	if err := t.keys.TransferAppKeys(ctx, appID, to); err != nil {
		return err
	}
	return t.links.TransferApp(ctx, appID, to)
}

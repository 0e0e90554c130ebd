package workspace

import (
	"context"
	"errors"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// ChatData deletes the files of deleted chats and apps (the deletion
// tasks' workers.ChatData) and, in reconciliation, those no chat owns
// (workers.OrphanedData). A chat's directory is named after its sandbox,
// which the chat's user names too: the owners are read from the
// directories.
type ChatData struct {
	Files *Store
	// Chats says whether a chat is recorded (history.Store).
	Chats interface {
		Exists(ctx context.Context, chat sandbox.Scope) (bool, error)
	}
	// Records are the sandboxes' records, of Provider.
	Records  sandbox.Store
	Provider string
}

// RemoveOrphans removes the directories older than before whose chat is
// not recorded and whose sandbox has no record either (a chat's first
// turn is recorded when it ends, its sandbox when it starts), and those
// whose owner is unknown.
func (w ChatData) RemoveOrphans(ctx context.Context, before time.Time) (int, error) {
	dirs, err := w.Files.Dirs(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, o := range dirs {
		if !o.CreatedAt.Before(before) {
			continue
		}
		if o.Known() {
			if exists, err := w.Chats.Exists(ctx, o.Scope()); exists || err != nil {
				continue // the chat exists, or it cannot be told now
			}
			if _, err := w.Records.Get(ctx, w.Provider, o.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
				continue
			}
		}
		if err := w.Files.DeleteID(ctx, o.SandboxID); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// DeleteChats deletes the chats' directories; a chat without a user
// stands for that chat id of every user of its app.
func (w ChatData) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	want := map[sandbox.Scope]bool{}
	for _, c := range chats {
		want[c] = true
	}
	dirs, err := w.Files.Dirs(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range dirs {
		if o.Known() && (want[o.Scope()] || want[sandbox.Scope{AppID: o.AppID, ChatID: o.ChatID}]) {
			errs = append(errs, w.Files.DeleteID(ctx, o.SandboxID))
		}
	}
	return errors.Join(errs...)
}

func (w ChatData) DeleteApp(ctx context.Context, appID string) error {
	return w.Files.DeleteApp(ctx, appID)
}

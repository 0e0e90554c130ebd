package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// enqueueTimeout bounds queueing a deletion once its intent is recorded.
const enqueueTimeout = 5 * time.Second

// DeleteChats records that the sandboxes of chats are to be deleted, and
// queues their deletion (S8). It returns as soon as the intents are
// durable in MongoDB, never waiting for the provider; from then on no
// command of those chats can create a sandbox again. A deletion whose
// task cannot be queued (Redis down) is not an error: reconciliation
// queues it. Deleting a chat twice is harmless.
func (w *Workers) DeleteChats(ctx context.Context, chats []sandbox.Scope) error {
	byApp := map[string][]sandbox.Scope{}
	for _, c := range chats {
		if c.AppID == "" || c.UserID == "" || c.ChatID == "" {
			return fmt.Errorf("delete chats: each needs an appId, a userId and a chatId, got %q, %q and %q", c.AppID, c.UserID, c.ChatID)
		}
		byApp[c.AppID] = append(byApp[c.AppID], c)
	}
	if len(byApp) == 0 {
		return errors.New("delete chats: no chat named")
	}
	now := w.cfg.Now()
	for _, appID := range slices.Sorted(maps.Keys(byApp)) {
		list := slices.CompactFunc(slices.SortedFunc(slices.Values(byApp[appID]), compareScopes), func(a, b sandbox.Scope) bool { return a == b })
		for chunk := range slices.Chunk(list, chatBatch) {
			taskID := newTaskID(TypeDeleteChat)
			intents := make([]mongostore.Deletion, len(chunk))
			for i, chat := range chunk {
				intents[i] = mongostore.ChatDeletion(chat, taskID, now)
			}
			if err := w.cfg.Store.RequestDeletions(ctx, intents); err != nil {
				return fmt.Errorf("delete chats of app %s: %w", appID, err)
			}
			task, err := NewDeleteChatTask(appID, chunk)
			if err != nil {
				return err
			}
			w.enqueue(ctx, task, taskID)
		}
	}
	return nil
}

func compareScopes(a, b sandbox.Scope) int {
	return cmp.Or(cmp.Compare(a.AppID, b.AppID), cmp.Compare(a.UserID, b.UserID), cmp.Compare(a.ChatID, b.ChatID))
}

// DeleteApp records that every sandbox of appID is to be deleted, and
// queues the deletion; as DeleteChats, it returns once the intent is
// durable.
func (w *Workers) DeleteApp(ctx context.Context, appID string) error {
	if appID == "" {
		return errors.New("delete app: appId is required")
	}
	taskID := newTaskID(TypeDeleteApp)
	if err := w.cfg.Store.RequestDeletions(ctx, []mongostore.Deletion{mongostore.AppDeletion(appID, taskID, w.cfg.Now())}); err != nil {
		return fmt.Errorf("delete app %s: %w", appID, err)
	}
	task, err := NewDeleteAppTask(appID)
	if err != nil {
		return err
	}
	w.enqueue(ctx, task, taskID)
	return nil
}

func newTaskID(typ string) string { return typ + ":" + randomID(12) }

// enqueue queues a deletion whose intent is recorded. A failure is logged
// and counted, not returned: the intent is what counts.
func (w *Workers) enqueue(ctx context.Context, task *asynq.Task, taskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enqueueTimeout)
	defer cancel()
	if _, err := w.client.EnqueueContext(ctx, task, asynq.TaskID(taskID)); err != nil {
		w.m.enqueueFailures.Inc()
		w.log.Warn("deletion recorded but not queued; reconciliation will queue it", "type", task.Type(), "task", taskID, "err", err)
	}
}

// ChatData is a store that keeps something of a chat besides its sandbox.
// Both deletions are idempotent: a retried task deletes again.
type ChatData interface {
	// DeleteChats deletes what it keeps of chats, all of one app. A chat
	// without a UserID stands for that chat id of every user of the app
	// (a deletion queued before chat ids were scoped per app and user).
	DeleteChats(ctx context.Context, chats []sandbox.Scope) error
	DeleteApp(ctx context.Context, appID string) error
}

// HandleDeleteChat deletes the sandboxes and then the records of the
// payload's chats, then what Config.ChatData keeps of them, and marks
// their intents done. It is idempotent.
func (w *Workers) HandleDeleteChat(ctx context.Context, t *asynq.Task) error {
	var p DeleteChatPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", TypeDeleteChat, err, asynq.SkipRetry)
	}
	chats := p.scopes()
	if p.AppID == "" || len(chats) == 0 {
		return fmt.Errorf("%s payload needs appId and chats, got %q and %d: %w", TypeDeleteChat, p.AppID, len(chats), asynq.SkipRetry)
	}
	records, err := w.cfg.Store.ByChats(ctx, p.AppID, chats)
	if err != nil {
		return err
	}
	if err := w.deleteRecords(ctx, records); err != nil {
		return err
	}
	for _, d := range w.cfg.ChatData {
		if err := d.DeleteChats(ctx, chats); err != nil {
			return err
		}
	}
	keys := make([]string, len(chats))
	for i, chat := range chats {
		keys[i] = mongostore.ChatDeletionKey(chat)
	}
	return w.cfg.Store.FinishDeletions(ctx, keys, w.cfg.Now())
}

// HandleDeleteApp deletes every sandbox of the payload's app, AppBatch at
// a time, and marks its intent done. It is idempotent: a retry goes on
// with what the failed attempt left.
func (w *Workers) HandleDeleteApp(ctx context.Context, t *asynq.Task) error {
	var p DeleteAppPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return fmt.Errorf("decode %s payload: %v: %w", TypeDeleteApp, err, asynq.SkipRetry)
	}
	if p.AppID == "" {
		return fmt.Errorf("%s payload needs an appId: %w", TypeDeleteApp, asynq.SkipRetry)
	}
	for {
		records, err := w.cfg.Store.ByApp(ctx, p.AppID, w.cfg.AppBatch)
		if err != nil {
			return err
		}
		if len(records) == 0 {
			break
		}
		if err := w.deleteRecords(ctx, records); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for _, d := range w.cfg.ChatData {
		if err := d.DeleteApp(ctx, p.AppID); err != nil {
			return err
		}
	}
	return w.cfg.Store.FinishDeletions(ctx, []string{mongostore.AppDeletionKey(p.AppID)}, w.cfg.Now())
}

// deleteRecords deletes each record's sandbox, then the record: provider
// first, so that a failure leaves a record to find again.
func (w *Workers) deleteRecords(ctx context.Context, records []sandbox.Instance) error {
	provider := w.cfg.Manager.Provider().Name()
	errs := make([]error, len(records))
	w.each(len(records), func(i int) {
		inst := records[i]
		if inst.Provider != provider {
			errs[i] = fmt.Errorf("delete sandbox %s/%s: this engine runs the %s provider and cannot reach it", inst.Provider, inst.SandboxID, provider)
			return
		}
		if err := w.cfg.Store.SetStatus(ctx, provider, inst.SandboxID, sandbox.StatusDeleting); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs[i] = err
			return
		}
		if err := w.cfg.Manager.Delete(ctx, inst.SandboxID); err != nil {
			errs[i] = err
			return
		}
		w.m.deleted.Inc()
	})
	return errors.Join(errs...)
}

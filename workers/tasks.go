package workers

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/flowbox/flowbox/sandbox"
)

// Task types.
const (
	// TypeStopIdle stops the sandboxes unused for sandbox.IdleAfter. The
	// scheduler enqueues it every sandbox.IdleAfter.
	TypeStopIdle = "sandbox:stop_idle"
	// TypeDeleteChat deletes the sandboxes of some chats of an app.
	TypeDeleteChat = "sandbox:delete_chat"
	// TypeDeleteApp deletes every sandbox of an app, in batches.
	TypeDeleteApp = "sandbox:delete_app"
	// TypeReconcile brings the records, the provider and the queue back
	// into agreement. The scheduler enqueues it every Config.ReconcileEvery.
	TypeReconcile = "sandbox:reconcile"
)

// Queues. Deletions weigh more than maintenance, so that a user's delete
// is not stuck behind scans; weights are not strict priorities, so a large
// app deletion does not starve the stop scan either.
const (
	QueueDeletions   = "sandbox_deletions"   // weight 6: delete_chat, delete_app
	QueueMaintenance = "sandbox_maintenance" // weight 3: stop_idle, reconcile
)

// Queues returns the queues a worker process serves, with their weights.
func Queues() map[string]int {
	return map[string]int{QueueDeletions: 6, QueueMaintenance: 3}
}

// Retries and time limits of the tasks. A deletion is retried with
// asynq's exponential backoff (about a week over 20 retries) and then
// archived, where the dashboard shows it; the periodic tasks are not
// retried, since the next period runs them again.
const (
	deleteRetries     = 20
	deleteChatTimeout = 10 * time.Minute
	deleteAppTimeout  = time.Hour
	// chatBatch bounds the chats of one delete_chat task.
	chatBatch = 100
)

// DeleteChatPayload is the payload of TypeDeleteChat: chats of one app,
// each named by its user and chat id (chat ids are scoped per app and
// user). ChatIDs is the shape of tasks queued before that: each stands
// for the chat id of every user of the app.
type DeleteChatPayload struct {
	AppID   string     `json:"appId"`
	Chats   []ChatName `json:"chats,omitempty"`
	ChatIDs []string   `json:"chatIds,omitempty"`
}

// ChatName names a chat of a payload's app.
type ChatName struct {
	UserID string `json:"userId"`
	ChatID string `json:"chatId"`
}

// scopes are the payload's chats.
func (p DeleteChatPayload) scopes() []sandbox.Scope {
	out := make([]sandbox.Scope, 0, len(p.Chats)+len(p.ChatIDs))
	for _, c := range p.Chats {
		out = append(out, sandbox.Scope{AppID: p.AppID, UserID: c.UserID, ChatID: c.ChatID})
	}
	for _, id := range p.ChatIDs {
		out = append(out, sandbox.Scope{AppID: p.AppID, ChatID: id})
	}
	return out
}

// DeleteAppPayload is the payload of TypeDeleteApp.
type DeleteAppPayload struct {
	AppID string `json:"appId"`
}

// NewStopIdleTask returns the stop scan's task. It has no payload: the
// scan reads the time when it runs.
func NewStopIdleTask() *asynq.Task {
	return asynq.NewTask(TypeStopIdle, nil,
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(0), asynq.Timeout(sandbox.IdleAfter))
}

// NewReconcileTask returns the reconciliation's task; every is the period
// it runs at, which bounds how long it may take.
func NewReconcileTask(every time.Duration) *asynq.Task {
	return asynq.NewTask(TypeReconcile, nil,
		asynq.Queue(QueueMaintenance), asynq.MaxRetry(0), asynq.Timeout(every))
}

// NewDeleteChatTask returns the task that deletes the sandboxes of chats
// of appID (at most 100 chats, all of appID).
func NewDeleteChatTask(appID string, chats []sandbox.Scope) (*asynq.Task, error) {
	if appID == "" || len(chats) == 0 || len(chats) > chatBatch {
		return nil, fmt.Errorf("a %s task needs an appId and 1 to %d chats (got %q and %d)", TypeDeleteChat, chatBatch, appID, len(chats))
	}
	p := DeleteChatPayload{AppID: appID}
	for _, c := range chats {
		if c.AppID != appID || c.ChatID == "" {
			return nil, fmt.Errorf("a %s task of app %s cannot delete chat %q of app %q", TypeDeleteChat, appID, c.ChatID, c.AppID)
		}
		if c.UserID == "" {
			p.ChatIDs = append(p.ChatIDs, c.ChatID)
		} else {
			p.Chats = append(p.Chats, ChatName{UserID: c.UserID, ChatID: c.ChatID})
		}
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", TypeDeleteChat, err)
	}
	return asynq.NewTask(TypeDeleteChat, payload,
		asynq.Queue(QueueDeletions), asynq.MaxRetry(deleteRetries), asynq.Timeout(deleteChatTimeout)), nil
}

// NewDeleteAppTask returns the task that deletes every sandbox of appID.
func NewDeleteAppTask(appID string) (*asynq.Task, error) {
	if appID == "" {
		return nil, fmt.Errorf("a %s task needs an appId", TypeDeleteApp)
	}
	payload, err := json.Marshal(DeleteAppPayload{AppID: appID})
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", TypeDeleteApp, err)
	}
	return asynq.NewTask(TypeDeleteApp, payload,
		asynq.Queue(QueueDeletions), asynq.MaxRetry(deleteRetries), asynq.Timeout(deleteAppTimeout)), nil
}

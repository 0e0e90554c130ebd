package sandbox

import (
	"context"
	"errors"
	"time"
)

// Record states beyond running and stoped. The stop scan and the deletions
// write them (package workers documents every transition); the manager
// only ever writes running, and providers never report them.
const (
	// StatusStopping: written by earlier versions while the stop scan
	// stopped the sandbox; the scan's claim says so now, and the record
	// keeps its status. A record left stopping is settled by
	// reconciliation; commands treat it as stoped.
	StatusStopping Status = "stopping"
	// StatusDeleting: the sandbox's chat or app was deleted; the provider
	// resource and then the record are being removed.
	StatusDeleting Status = "deleting"
)

// Errors of the Store.
var (
	// ErrBusy: the stop scan or reconciliation holds the sandbox (it is
	// being stopped or repaired). Touch wrote nothing; the caller waits
	// and touches again.
	ErrBusy = errors.New("sandbox is being stopped or repaired")
	// ErrDeleted: the sandbox's chat or app has been deleted. Its sandbox
	// is gone or going, and must not be created again.
	ErrDeleted = errors.New("the sandbox's chat was deleted")
)

// Instance is one document of the sandbox_instances collection (S4).
type Instance struct {
	Provider     string    `bson:"provider" json:"provider"`
	SandboxID    string    `bson:"sandboxId" json:"sandboxId"`
	AppID        string    `bson:"appId" json:"appId"`
	UserID       string    `bson:"userId" json:"userId"`
	ChatID       string    `bson:"chatId" json:"chatId"`
	Status       Status    `bson:"status" json:"status"`
	LastActiveAt time.Time `bson:"lastActiveAt" json:"lastActiveAt"`
	CreatedAt    time.Time `bson:"createdAt" json:"createdAt"`
	Limit        Limits    `bson:"limit" json:"limit"`
}

// Scope is the chat the sandbox belongs to.
func (i Instance) Scope() Scope { return Scope{AppID: i.AppID, UserID: i.UserID, ChatID: i.ChatID} }

// Store keeps the instance records. The MongoDB implementation is
// sandbox/mongostore. Every method is safe for concurrent use by several
// engine processes.
type Store interface {
	// Touch upserts the record of inst.Provider/inst.SandboxID with
	// status=running and lastActiveAt=now (S5). The identity fields
	// (appId, userId, chatId, createdAt=now, limit) are written only when
	// the record is inserted. Concurrent first calls for one sandbox, even
	// from several processes, leave exactly one record.
	//
	// Touch refuses, writing nothing, a sandbox whose chat or app has been
	// deleted (an error wrapping ErrDeleted) and one that the stop scan or
	// reconciliation holds (ErrBusy). It checks before writing and again
	// after: the other side records its claim or deletion first and reads
	// the record second, so one of the two always sees the other.
	Touch(ctx context.Context, inst Instance, now time.Time) error
	// Refresh writes the use of a sandbox believed running, after a
	// command on the warm path. It sets lastActiveAt of an existing
	// record, whatever its status; a running record is then looked at for
	// a claim (ErrBusy), as Touch does after writing. A record that is
	// missing or not running is otherwise left as it is (ErrNotFound,
	// ErrNotRunning): whoever stopped, deleted or repaired it meanwhile
	// is not undone, and the next command's ensure brings the sandbox
	// back as it should. It never inserts a record, and does not look for
	// a deletion: the warm path asks Deleted, beside the command.
	Refresh(ctx context.Context, inst Instance, now time.Time) error
	// Deleted reports a requested deletion of the sandbox's chat or app
	// (an error wrapping ErrDeleted); nil when there is none. It writes
	// nothing.
	Deleted(ctx context.Context, inst Instance) error
	// Create inserts the record of a sandbox that has none, as Touch
	// would, and reports whether it did; a record that exists already is
	// left alone (false, nil), as is a clash with another record of the
	// chat, which Touch then reports. Inserting changes no record another
	// process holds or deletes, so Create checks after writing only: a
	// record it inserted for a deleted chat is removed again (ErrDeleted,
	// false), and one inserted under a claim stays, for the claim holder
	// (ErrBusy, true), as Touch's would. It is a new sandbox's Touch and
	// its "is it new" lookup in one step; Config.Caps, which must count
	// before a record says running, need Touch.
	Create(ctx context.Context, inst Instance, now time.Time) (created bool, err error)
	// Get returns the record, or ErrNotFound.
	Get(ctx context.Context, provider, sandboxID string) (Instance, error)
	// SetStatus sets the status of an existing record (ErrNotFound when
	// there is none).
	SetStatus(ctx context.Context, provider, sandboxID string, status Status) error
	// Delete removes the record; a missing record is not an error.
	Delete(ctx context.Context, provider, sandboxID string) error
}

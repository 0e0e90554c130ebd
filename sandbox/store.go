package sandbox

import (
	"context"
	"time"
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

// Store keeps the instance records. The MongoDB implementation is
// sandbox/mongostore. Every method is safe for concurrent use by several
// engine processes.
type Store interface {
	// Touch upserts the record of inst.Provider/inst.SandboxID with
	// status=running and lastActiveAt=now (S5). The identity fields
	// (appId, userId, chatId, createdAt=now, limit) are written only when
	// the record is inserted. Concurrent first calls for one sandbox, even
	// from several processes, leave exactly one record.
	Touch(ctx context.Context, inst Instance, now time.Time) error
	// Get returns the record, or ErrNotFound.
	Get(ctx context.Context, provider, sandboxID string) (Instance, error)
	// SetStatus sets the status of an existing record (ErrNotFound when
	// there is none).
	SetStatus(ctx context.Context, provider, sandboxID string, status Status) error
	// Delete removes the record; a missing record is not an error.
	Delete(ctx context.Context, provider, sandboxID string) error
}

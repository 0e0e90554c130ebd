// Package sandbox gives each chat its own Linux sandbox: created lazily on
// first use, reused while it runs, restarted when stopped, and deleted
// with the chat. It is provider-neutral: the Provider interface is
// implemented by sandbox/docker, sandbox/bwrap and sandbox/host, and the
// Manager never knows which one it drives. It must never know about HTTP,
// the UI, chats' wire shapes or the task queue.
//
// # Identity
//
// A chat's sandbox ID is the first 16 hex characters of
// sha256("appId-userId-chatId") (IDFor). The record of a sandbox lives in
// the sandbox_instances collection (Store), keyed by {provider, sandboxId}.
//
// # Ordering of database and provider steps (S12)
//
// The database and the provider cannot be changed atomically, so every
// operation orders its steps so that a crash between any two of them
// leaves a state the reconciliation task can repair, and never a provider
// resource that nobody knows about:
//
//   - Ensure (create or wake): 1. upsert the record (status running,
//     lastActiveAt now); 2. provider Ensure. A crash after 1 leaves a
//     record with no resource behind it; the next Ensure creates the
//     resource, and reconciliation marks such records stopped.
//     A resource is therefore never created without a record.
//   - Exec: Ensure as above, then the provider runs the command. The
//     record's lastActiveAt is refreshed on every command (S5).
//   - Stop: 1. provider Stop; 2. record status stoped. A crash after 1
//     leaves a record saying running for a stopped resource: the next
//     Ensure starts it again, and the stop scan stops it again.
//   - Delete: 1. provider Delete; 2. record removed. A crash after 1
//     leaves a record pointing at nothing, which Delete, run again, or
//     reconciliation removes. (Deletion intents that must survive a lost
//     queue task are recorded by the workers before either step.)
//
// Orphan resources (a provider resource without a record) can only appear
// when a record is removed by hand or another process deleted it while a
// creation was in flight; reconciliation finds them through Provider.List
// and the labels they carry.
//
// # The exec path
//
// Manager.Exec runs a chain of Middleware around the core step (ensure,
// record, provider exec), so policy steps plug in without changing it:
// a command filter before, output redaction after, an audit record around.
package sandbox

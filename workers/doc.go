// Package workers runs the sandbox tasks on Asynq: the stop scan that
// stops sandboxes unused for five minutes (S7), the deletions that follow
// chat and app deletes (S8), and the reconciliation that keeps the
// records, the provider and the queue in agreement whatever crashed (S12,
// B4). It also holds the small API the web layer calls when a user
// deletes chats or an app (DeleteChats, DeleteApp).
//
// It drives sandboxes only through the sandbox package (the Manager and
// its provider) and keeps its state in MongoDB through sandbox/mongostore.
// It must never create or start a sandbox, never call a provider on a
// sandbox it has not claimed (deletions excepted: their intent is recorded
// first), and never treat Redis as the truth: a task may be lost, run
// twice or run late, and every handler is idempotent.
//
// # Tasks and queues
//
//	type                 queue (weight)              payload            retries
//	sandbox:stop_idle    sandbox_maintenance (3)     none               none: the next period runs it
//	sandbox:reconcile    sandbox_maintenance (3)     none               none: the next period runs it
//	sandbox:delete_chat  sandbox_deletions (6)       appId, chatIds     20, exponential backoff, then archived
//	sandbox:delete_app   sandbox_deletions (6)       appId              20, exponential backoff, then archived
//
// The scheduler enqueues sandbox:stop_idle every sandbox.IdleAfter (cron
// "*/5 * * * *") and sandbox:reconcile every Config.ReconcileEvery. Every
// process may run a scheduler. One scan per period: the cron specs are
// aligned on the clock, asynq's Unique option keeps a period's duplicates
// out of the queue while the first waits, and the handler then takes a
// Redis lease named after the period (SET NX with the period rounded to
// its nearest boundary, so clocks a little apart agree): the first task
// of the period scans, any other skips. Even two scans at once would be
// safe, since every sandbox is claimed before it is stopped.
//
// # Record states (sandbox_instances.status)
//
//	(none)   → running   a command or the files UI uses the chat (manager Touch)
//	running  → running   every command, and every minute while one runs (lastActiveAt)
//	running  → stopping  the stop scan, holding the claim, finds it unused for IdleAfter
//	stopping → stoped    the provider stopped it
//	stopping → running   the provider failed to stop it; or it was used between the
//	                     scan's query and its claim (the status is put back)
//	stoped   → running   the next command (the manager restarts the sandbox)
//	running  → stoped    reconciliation: its resource vanished (removed by hand) and it
//	                     was not used for Config.Grace; the next command creates it again
//	stopping → stoped or running
//	                     reconciliation: the stop never ended (its worker died); the
//	                     record takes the provider's status
//	any      → deleting  a deletion task is about to delete its resource
//	deleting → (gone)    the resource is deleted, then the record
//
// Only the manager writes running, and it never writes over a claim or a
// deletion: Touch refuses while either exists (sandbox.ErrBusy,
// sandbox.ErrDeleted).
//
// # Claims (sandbox_claims)
//
// A claim is a document whose _id is the record's; inserting it is taking
// it, so one holder wins, on MongoDB and on FerretDB alike. The stop scan
// and reconciliation hold a sandbox's claim for the length of one provider
// call, then release it; reconciliation drops a claim older than
// Config.StaleClaim (its holder died), settling a record it left stopping.
//
// # Deletion intents (sandbox_deletions)
//
//	(none)  → pending  DeleteChats / DeleteApp, before the task is queued
//	pending → done     the task deleted every sandbox and record of the chat or app
//	done    → pending  the chat or app is deleted again
//	done    → (none)   reconciliation purges it after Config.TombstoneTTL
//
// The intent is written first and is what DeleteChats waits for; the task
// is queued after, and a failure to queue is only logged. Reconciliation
// queues again a pending intent whose task Redis no longer has; a task
// that exhausted its retries stays archived, visible in the dashboard. A
// done intent is a tombstone: the deleted chat's late commands fail with
// sandbox.ErrDeleted instead of creating its sandbox again.
//
// # A command racing the scan or a deletion
//
// MongoDB offers atomic conditional updates, but FerretDB 1.x, the
// embedded database, does not: it reads, changes and writes back whole
// documents, and passes only a filter on _id alone to SQLite, decoding the
// whole collection for any other. So nothing here relies on a conditional
// update. Each side writes its own mark first and reads the other's
// second, so that at least one of them sees the other:
//
//   - The scan inserts the claim, then marks the record stopping and reads
//     the record as it was (one findAndModify by _id); it stops the sandbox
//     only if that still says running and unused since the cutoff, and
//     otherwise puts the status back.
//   - A command's Touch reads the claims and intents, writes the record,
//     and reads them again. Seeing a claim, the manager waits for its
//     release (up to sandbox Config.BusyWait) and touches again: the
//     sandbox is then running (the scan backed off) or stopped (the
//     manager restarts it). No command starts in a sandbox being stopped.
//   - A command that is already running refreshes lastActiveAt every
//     minute, so a command longer than five minutes is never taken for
//     idleness; the manager's fast path (sandbox.WarmWindow) rests on the
//     same five minutes.
//   - A deletion records its intent, then reads the records. Touch, seeing
//     an intent after its write, removes a record it inserted. A sandbox
//     that a command created in the instant before the intent, after the
//     task deleted the resource, has no record left: reconciliation
//     removes it as an orphan.
//
// # Reconciliation
//
// Every Config.ReconcileEvery: queue lost deletions again; drop stale
// claims; list the provider's resources, then read the records (in that
// order: a record is written before its resource is created, so every
// listed resource has its record in the list unless it was removed since);
// remove resources without a record older than Config.Grace, and mark
// stoped running records whose resource vanished and that were not used
// for Config.Grace, each under its claim and after checking again; purge
// old tombstones. Every repair is counted in
// flowbox_reconcile_repairs_total.
package workers

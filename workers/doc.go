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
//	running  → stoped    the stop scan, holding the claim, read the record unused for
//	                     IdleAfter, and the provider stopped the sandbox
//	stoped   → running   the next command (the manager restarts the sandbox)
//	running  → stoped    reconciliation: its resource vanished (removed by hand) and it
//	                     was not used for Config.Grace; the next command creates it again
//	running  → stoped    reconciliation: a stop whose worker died stopped the sandbox
//	                     but not the record (its claim went stale)
//	stopping → stoped or running
//	                     reconciliation: a record left stopping by an earlier version,
//	                     which wrote it during the stop; it takes the provider's status
//	any      → deleting  a deletion task is about to delete its resource
//	deleting → (gone)    the resource is deleted, then the record
//
// While the scan stops a sandbox its record keeps saying running: the
// claim is what marks the stop, and what commands wait on.
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
// Config.StaleClaim (its holder died), giving the record of its sandbox the
// sandbox's status.
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
// sandbox.ErrDeleted instead of creating its sandbox again. Recording an
// intent also changes the deletions' generation, which each engine reads
// beside a warm command instead of the chat's and app's intents until it
// changes (mongostore GenerationCollection).
//
// # Where the scan's candidates come from
//
// On MongoDB, from the {status, lastActiveAt} index (mongostore Idle). On
// FerretDB, which cannot use that index and decodes every record for the
// query, from the activity index (package sandbox/activity): a sorted set
// in Redis, scored by lastActiveAt, that the store writes beside every
// record (cmd/engine chooses by asking the server what it is). Either way
// a candidate is only a candidate: the scan claims it and reads its record
// before stopping it, and forgets a stale entry (record gone or not
// running). Redis losing the set is noticed (its marker key goes too) and
// the next scan fills it from the records; reconciliation refreshes it
// from the records it reads anyway, which repairs an entry that Touch
// could not write (counted as activity_index repairs).
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
//   - The scan inserts the claim, then reads the record (by _id); it stops
//     the sandbox only if that still says running and unused since the
//     cutoff. Reading costs the embedded database about half what a write
//     does, and the claim alone keeps commands out.
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
// claims (the warm pool's, left once a member is adopted or removed, are
// dropped too, and counted as no repair); list the provider's resources, then read the records (in that
// order: a record is written before its resource is created, so every
// listed resource has its record in the list unless it was removed since);
// remove resources without a record older than Config.Grace, and mark
// stoped running records whose resource vanished and that were not used
// for Config.Grace, each under its claim and after checking again; purge
// old tombstones. Every repair is counted in
// flowbox_reconcile_repairs_total.
package workers

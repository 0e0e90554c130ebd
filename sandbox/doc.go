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
// sha256("appId-userId-chatId") where that string names one chat, and of a
// length-prefixed encoding of the three otherwise; sandboxes made before
// keep theirs (IDFor, id.go). The record of a sandbox lives in
// the sandbox_instances collection (Store), keyed by {provider, sandboxId}.
//
// # Ordering of database and provider steps (S12)
//
// The database and the provider cannot be changed atomically, so every
// operation orders its steps so that a crash between any two of them
// leaves a state the reconciliation task can repair, and never a provider
// resource that nobody knows about:
//
//   - Ensure (create or wake): 1. Touch the record (status running,
//     lastActiveAt now); 2. provider Ensure. A crash after 1 leaves a
//     record with no resource behind it; the next Ensure creates the
//     resource, and reconciliation marks such records stopped.
//     A resource is therefore never created without a record. Touch
//     refuses while the stop scan or reconciliation holds a claim on the
//     sandbox (ErrBusy: Ensure waits up to Config.BusyWait, then starts
//     the sandbox the stop left) and once the chat or its app is deleted
//     (ErrDeleted: nothing is created). With Config.Caps, a sandbox whose
//     record is not running is counted against the caps before step 1,
//     one start at a time per process, and refused (ErrLimit, nothing
//     written) when one is reached; see Caps for what holds across
//     processes.
//   - Exec: Ensure as above, then the provider runs the command. The
//     record's lastActiveAt is refreshed on every command (S5), and every
//     Config.Heartbeat while a command runs, so that the stop scan, which
//     takes only records older than IdleAfter, never stops a sandbox in
//     use.
//   - Stop (the stop scan, package workers): 1. claim the sandbox; 2. read
//     the record, and back off if it was used since the scan's query;
//     3. provider Stop; 4. record stoped; 5. release the claim. A crash
//     leaves a stale claim and a record saying running for a stopped or
//     running resource: reconciliation drops the claim and gives the
//     record the resource's status, and the next Ensure starts whatever
//     is stopped.
//   - Delete (a deletion task): 1. the deletion intent is recorded (by
//     the caller, before the task is queued); 2. record deleting;
//     3. provider Delete; 4. record removed; 5. intent done. A crash
//     leaves a pending intent, which reconciliation queues again; the
//     done intent stays a while as a tombstone that refuses the deleted
//     chat's late commands.
//
// Orphan resources (a provider resource without a record) can only appear
// when a record is removed by hand or a command created the resource in
// the instant after a deletion removed it; reconciliation finds them
// through Provider.List and the labels they carry, and removes those older
// than a grace period, so that no creation in flight is hit.
//
// # The chain
//
// Every command (Manager.Exec) and every file operation (the Files that
// Manager.Files returns) goes through one chain of Middleware, listed in
// Config.Middleware outermost first, before it reaches the core step, so
// that policy plugs in without changing the manager: a command filter
// before, output redaction after, an audit record around. Each link has
// an Exec hook, which sees a *Call, and a File hook, which sees a
// *FileCall (list, stat, read, open, write or zip, with its path and, for
// a write, the content); either may be nil. A hook may refuse a call
// (the caller gets its error, or for a command its result), change it,
// and rewrite or record what it produced. A file operation a hook refuses
// creates no sandbox: the sandbox is created or woken by the first
// operation that reaches the core, as a command is.
//
// Identity. The caller says who it is with an Actor (UserID, Kind:
// agent, files, admin or service, and the ToolCallID of the model's tool
// call), on ExecRequest.Actor for a command and as the argument of
// Manager.Files for files. It may differ from the owner the Scope names:
// an app owner or an admin may browse a user's files. The zero Actor is
// an unknown caller.
//
// Live output. ExecRequest.OnOutput, the sink of a command's live output,
// travels on the Call: an Exec hook wraps it by replacing
// Call.Request.OnOutput before calling next. The chain puts a gate below
// every link and before the provider, so that a sink is called one chunk
// at a time and never once the link that installed it has seen next
// return, and the caller's sink never after Exec returned. A hook that
// holds bytes back (one buffer per stream) therefore lets them out when
// next returns, before it returns itself. TransformOutput builds such a
// hook from a StreamTransformer, and rewrites the final result's Stdout
// and Stderr the same way, before they are capped.
//
// Time. The manager's waits (the wait for a sandbox the stop scan holds,
// the heartbeat of a long command) run on Config.Clock, and the records'
// dates on Config.Now; tests inject both and move them by hand.
package sandbox

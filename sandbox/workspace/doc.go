// Package workspace keeps the host side of each chat's workspace (K1):
// the directories its sandbox sees at /workspace/uploads and
// /workspace/intermediate, the uploads saved into them within quotas, the
// listing, opening and deletion of their files, the summary of them that
// the system prompt shows (K3), and their removal with the chat or the
// app (S8).
//
// It must never follow a link the sandbox planted to a place outside the
// directory it works in, never hold a whole upload in memory, never start
// a sandbox, and never know about HTTP or the chats' stores: callers hand
// it a sandbox.Scope and an io.Reader, and decide themselves which
// directories are orphans.
//
// # Layout
//
// Under Config.Root, one directory per chat, named by its sandbox ID
// (sandbox.IDFor):
//
//	R/chats/{sandboxId}/owner.json      appId, userId, chatId, createdAt
//	R/chats/{sandboxId}/uploads/        /workspace/uploads (rw)
//	R/chats/{sandboxId}/intermediate/   /workspace/intermediate (rw)
//	R/chats/{sandboxId}/staging/        uploads being received (engine only)
//
// With Config.Pool (where the engine keeps checkpoints), R/chats/{sandboxId}
// is a link to the chat's files in a btrfs pool instead, laid out the
// same, and checkpointed with the chat's sandbox (chatpool.go).
//
// owner.json is written before the two mounted directories exist, and
// removed after them, so that every directory Dirs finds says whose it is
// unless a creation crashed before anything was in it. It reaches the disk
// in the background, so that a new chat's first command does not wait for
// it; the chat's first upload, the first file the engine makes durable
// there, does. The sandbox sees
// neither owner.json nor staging: it cannot forge whose a directory is,
// nor watch or change an upload before it is complete.
//
// # Confinement
//
// The sandbox can create anything inside its mounts, links to /etc or to
// another chat's directory included. Every path the engine resolves inside
// uploads or intermediate goes through an os.Root opened on that
// directory: Go resolves each component with openat and O_NOFOLLOW and
// follows a link only when it stays beneath the root, so no link, whether
// planted before or during a call, makes the engine read, write or delete
// outside. Links that stay inside (an agent's "latest -> run3") keep
// working, which openat2's RESOLVE_NO_SYMLINKS would break; RESOLVE_BENEATH
// would give the same guarantee as os.Root but needs Linux 5.6. Absolute
// links are refused even when they would land inside. Directories are
// opened with O_DIRECTORY|O_NONBLOCK and files with O_NONBLOCK, so a FIFO
// swapped in cannot hang the engine. An upload is written into staging and
// linked into its directory through that directory's open descriptor
// (linkat), which never replaces an existing entry: a name that is taken,
// whether by a file, a directory or a link, is a collision, and the next
// name ("data (1).csv") is tried.
//
// # Quotas
//
// Config.MaxFileBytes bounds one upload and Config.MaxChatBytes a chat's
// files (uploads, intermediate and staging together), both counted while
// the upload streams: the byte that would pass a limit is never written,
// the partial file is removed, and the error is a *QuotaError. A chat's
// usage is measured by a walk when an upload begins while no other
// upload to that chat is in flight in this process; concurrent uploads to
// the chat then reserve their bytes from that measure under one mutex, so
// that together they never pass MaxChatBytes. What the sandbox writes
// meanwhile is seen at the next measure; uploads that other engine
// processes receive at the same time are not coordinated with.
//
// # Permissions
//
// Directories are 0755 and files the engine writes 0644, owned by the
// engine's user. That lets the sandbox write into them when its root is
// the engine's user (bwrap's user namespace, rootless Docker) or when the
// engine runs as root (Docker's sandbox root is then the owner). When
// neither holds (rootful Docker, engine not root: the sandbox's root has
// no capabilities and is not the owner), set Config.WorldWritable: the
// mounted directories become 0777 and files 0666, and the chats' parent
// directory 0700 so that no other user of the host reaches them.
package workspace

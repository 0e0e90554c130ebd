// Package skills is the catalog of Agent Skills that admins install and
// that every sandbox sees read-only at /workspace/skills (K1, K4). A skill
// is a directory holding SKILL.md, whose YAML front matter names and
// describes it, and optional scripts/, references/ and assets/. The
// package validates skills, installs them from ZIP archives, keeps their
// previous versions and reads their files with path protection; it is a
// catalog on disk and nothing more.
//
// It must never know about HTTP, the model or the prompt, never run a
// skill's scripts (ScriptPath and ScriptArgv only say what to run inside
// the sandbox), and never let a name given by a user or the model reach a
// file outside the skill it names.
//
// # Layout
//
// Under Config.Root (R):
//
//	R/skills/{name}/                     the live tree, mounted into sandboxes
//	R/skill-versions/{name}/manifest.json  version records (number, time, installer, size)
//	R/skill-versions/{name}/{n}/         previous versions, the last KeepVersions
//	R/.staging/                          archives being unpacked and trees being removed
//	R/.locks/{name}.lock                 serializes installs and deletions of one skill
//
// Mount R/skills itself (Dir) into sandboxes, never one skill's directory:
// every install replaces a skill's directory by another one, and a bind
// mount of the replaced directory would keep showing the old tree.
//
// # Atomic replacement
//
// A live tree is never written in place. An install unpacks the archive
// into a directory under R/.staging (same filesystem as R/skills),
// validates it exactly as List does, and then puts it in place with one
// rename: renameat2(RENAME_EXCHANGE) when the skill exists, which swaps
// the two directories in one step, so that the name always resolves to a
// complete tree, old or new; renameat2(RENAME_NOREPLACE) when it is new.
// The old tree is then moved to R/skill-versions. A reader that opened a
// file of the old tree keeps reading the old content (the tree is moved,
// not changed), and a reader that resolves the name afterwards sees the
// new tree. A script running in a sandbox that opens its skill's files by
// path after a replacement gets the new version's files.
//
// Every reading method opens the skill's directory once (os.Root) and
// resolves everything relative to it, so that one call sees one version
// even while an install replaces it. Should that version also be pruned
// before the call is done (a burst of installs), its reads fail and the
// call starts again on the tree now live.
//
// # Version records
//
// The manifest identifies each version's tree by its device and inode,
// which a rename keeps, and the record of the new tree is written before
// the swap: a reader matches the live directory to its record and never
// pairs new files with the previous version's number. A tree placed in
// R/skills by hand has version 0 and no installer until it is replaced.
//
// # Locking
//
// Installs and deletions of one skill are serialized twice: a per-name
// semaphore in the process, which a waiting caller can leave when its
// context ends, and then flock(2) on R/.locks/{name}.lock, so that engine
// processes sharing R on one host take turns too. Readers take no lock;
// they rely on the renames being atomic. R must be on a local filesystem
// that supports renameat2's RENAME_EXCHANGE (ext4, xfs, btrfs, tmpfs);
// New checks it.
//
// # Archives
//
// Install accepts a ZIP whose files are at its root (SKILL.md) or inside
// one top-level folder (myskill/SKILL.md), which must then be named as
// the skill. It refuses, before writing anything, archives over
// MaxZipBytes, with more than MaxEntries entries, or whose headers declare
// more than MaxEntryBytes for one file or MaxUnpackedBytes in all; and it
// counts the bytes actually written while unpacking, so that an entry
// whose header lies is stopped at the same limits. Entries with absolute
// paths, drive letters, ".." components or NUL bytes are refused;
// backslashes are read as separators, as Windows tools write them, so
// "..\x" is a traversal too. Symlink entries and other special files are
// refused: a skill installed from an archive holds only directories and
// regular files. macOS's __MACOSX/ folder and .DS_Store files are skipped.
//
// Symlinks placed in R/skills by hand are listed among a skill's files,
// but reading one through ReadResource or ScriptPath works only when it
// is relative and leads to a file inside the same skill.
package skills

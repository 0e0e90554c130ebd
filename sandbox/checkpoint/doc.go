// Package checkpoint keeps a sandbox's writable files in a pool where
// they can be checkpointed, restored and forked copy-on-write (R1–R4,
// docs/CHECKPOINTS.md): every sandbox's files are a btrfs subvolume of
// one filesystem, a checkpoint is a read-only snapshot of it, a restore
// or a fork a writable snapshot of a checkpoint. A checkpoint costs the
// blocks that change after it, and taking, restoring or forking one
// costs a btrfs transaction, not a copy: the same for ten files as for
// ten thousand.
//
// The pool needs root (the ioctls create and delete subvolumes) and a
// btrfs filesystem: a directory on one, or an image file loop-mounted by
// MountImage (btrfs-progs' mkfs.btrfs makes it).
package checkpoint

// Package workers will hold the Asynq task types, their handlers and the
// scheduler: the stop scan, the deletions after chat and app deletes, and
// reconciliation. It drives sandboxes only through the sandbox package.
package workers

package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Snapshot is a session's sandbox kept under a name: its workspace,
// shell state (directory, exported variables) and home as they were when
// it was taken. Snapshots need an engine with checkpoints
// (FLOWBOX_CHECKPOINTS); another answers ErrUnsupported.
type Snapshot struct {
	Session string    `json:"session"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// SnapshotRef names a snapshot of one of the caller's sessions, for
// SessionOptions.FromSnapshot.
type SnapshotRef struct {
	Session  string `json:"session"`
	Snapshot string `json:"snapshot"`
}

// Snapshot keeps the session's sandbox as it is now under name (1 to 48
// letters, digits, - and _, starting with a letter or digit). A name the
// session has already is ErrExists; a session in which nothing has run
// yet has no files to keep: ErrNotStarted.
func (c *Client) Snapshot(ctx context.Context, sessionID, name string) (*Snapshot, error) {
	var s Snapshot
	if err := c.sendJSON(ctx, http.MethodPost, sessionPath(sessionID, "/snapshots"), map[string]string{"name": name}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Snapshots lists the session's snapshots, oldest first.
func (c *Client) Snapshots(ctx context.Context, sessionID string) ([]Snapshot, error) {
	var out struct {
		Snapshots []Snapshot `json:"snapshots"`
	}
	if err := c.getJSON(ctx, sessionPath(sessionID, "/snapshots"), nil, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// DeleteSnapshot deletes one of the session's snapshots; the sessions
// started from it keep their files. Retried after an answer lost on the
// way, it reports ErrNotFound for the snapshot it did delete.
func (c *Client) DeleteSnapshot(ctx context.Context, sessionID, name string) error {
	return c.sendJSON(ctx, http.MethodDelete, sessionPath(sessionID, "/snapshots/"+url.PathEscape(name)), nil, nil)
}

// noSnapshot refuses opts with FromSnapshot for the calls that cannot
// start from one.
func noSnapshot(call string, opts SessionOptions) error {
	if opts.FromSnapshot != nil {
		return fmt.Errorf("%w: %s starts no session from a snapshot: use CreateSession with FromSnapshot", ErrBadRequest, call)
	}
	return nil
}

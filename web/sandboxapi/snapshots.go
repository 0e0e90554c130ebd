package sandboxapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/web/api"
)

// Snapshots (R3): a session's sandbox's files and shell state kept under
// a name (a checkpoint, docs/CHECKPOINTS.md), and new sessions started
// from one.

// Snapshots keeps the sessions' snapshots (sandbox.Manager).
type Snapshots interface {
	Checkpoint(ctx context.Context, scope sandbox.Scope, name string) (sandbox.Checkpoint, error)
	Fork(ctx context.Context, scope sandbox.Scope, name string, to sandbox.Scope) error
	DropCheckpoint(ctx context.Context, scope sandbox.Scope, name string) error
	Checkpoints(ctx context.Context, scope sandbox.Scope) ([]sandbox.Checkpoint, error)
}

var snapshotName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$`)

// snapshots answers 501 when the engine keeps none; else returns them.
func (h *API) snapshots(c *gin.Context) (Snapshots, bool) {
	if h.Snapshots == nil {
		api.ServiceError(c, http.StatusNotImplemented, "unsupported", "this engine keeps no snapshots of sandboxes (FLOWBOX_CHECKPOINTS)")
		return nil, false
	}
	return h.Snapshots, true
}

// snapshotFailure answers an error of a snapshot operation.
func (h *API) snapshotFailure(c *gin.Context, err error) {
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		api.ServiceError(c, http.StatusConflict, "not_started", "the session's sandbox has no files yet: run a call in it first")
	case errors.Is(err, sandbox.ErrUnsupported):
		api.ServiceError(c, http.StatusNotImplemented, "unsupported", err.Error())
	default:
		h.sandboxFailure(c, err)
	}
}

// snapshotView is a snapshot as the API shows it.
type snapshotView struct {
	Session string `json:"session"`
	sandbox.Checkpoint
}

// CreateSnapshot serves POST /api/sandbox/v1/sessions/{id}/snapshots
// {"name"}: the session's sandbox as it is now, kept under name.
func (h *API) CreateSnapshot(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	snaps, ok := h.snapshots(c)
	if !ok {
		return
	}
	var o struct {
		Name string `json:"name"`
	}
	if !bindJSON(c, &o) {
		return
	}
	if !snapshotName.MatchString(o.Name) {
		api.ServiceError(c, http.StatusBadRequest, "bad_request", "name: 1 to 48 letters, digits, - and _, starting with a letter or digit")
		return
	}
	ctx := c.Request.Context()
	list, err := snaps.Checkpoints(ctx, s.Scope())
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.snapshotFailure(c, err)
		return
	}
	if slices.ContainsFunc(list, func(cp sandbox.Checkpoint) bool { return cp.Name == o.Name }) {
		api.ServiceError(c, http.StatusConflict, "exists", fmt.Sprintf("the session has a snapshot %q already: delete it first, or choose another name", o.Name))
		return
	}
	cp, err := snaps.Checkpoint(ctx, s.Scope(), o.Name)
	if err != nil {
		h.snapshotFailure(c, err)
		return
	}
	c.JSON(http.StatusCreated, snapshotView{Session: s.ID, Checkpoint: cp})
}

// ListSnapshots serves GET /api/sandbox/v1/sessions/{id}/snapshots.
func (h *API) ListSnapshots(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	snaps, ok := h.snapshots(c)
	if !ok {
		return
	}
	list, err := snaps.Checkpoints(c.Request.Context(), s.Scope())
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.snapshotFailure(c, err)
		return
	}
	out := make([]snapshotView, 0, len(list))
	for _, cp := range list {
		out = append(out, snapshotView{Session: s.ID, Checkpoint: cp})
	}
	c.JSON(http.StatusOK, gin.H{"snapshots": out})
}

// DeleteSnapshot serves DELETE /api/sandbox/v1/sessions/{id}/snapshots/{name}.
func (h *API) DeleteSnapshot(c *gin.Context) {
	s, ok := h.own(c)
	if !ok {
		return
	}
	snaps, ok := h.snapshots(c)
	if !ok {
		return
	}
	name := c.Param("name")
	ctx := c.Request.Context()
	list, err := snaps.Checkpoints(ctx, s.Scope())
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.snapshotFailure(c, err)
		return
	}
	if !slices.ContainsFunc(list, func(cp sandbox.Checkpoint) bool { return cp.Name == name }) {
		api.ServiceError(c, http.StatusNotFound, "not_found", fmt.Sprintf("the session has no snapshot %q; GET .../snapshots lists them", name))
		return
	}
	if err := snaps.DropCheckpoint(ctx, s.Scope(), name); err != nil {
		h.snapshotFailure(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"session": s.ID, "name": name, "deleted": true})
}

// fromSnapshot gives the new session s the sandbox of snapshot from
// (one of the caller's sessions'); false when it answered the client.
func (h *API) fromSnapshot(c *gin.Context, from *SnapshotRef, s sessions.Session) bool {
	snaps, ok := h.snapshots(c)
	if !ok {
		return false
	}
	ctx := c.Request.Context()
	src, err := h.Sessions.Get(ctx, from.Session)
	if errors.Is(err, sessions.ErrNotFound) || err == nil && src.OwnerID != s.OwnerID {
		api.ServiceError(c, http.StatusNotFound, "not_found", fmt.Sprintf("fromSnapshot.session: no session %q of yours", from.Session))
		return false
	} else if err != nil {
		api.ServiceError(c, http.StatusServiceUnavailable, "unavailable", "could not read the session; retry later")
		return false
	}
	list, err := snaps.Checkpoints(ctx, src.Scope())
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.snapshotFailure(c, err)
		return false
	}
	if !slices.ContainsFunc(list, func(cp sandbox.Checkpoint) bool { return cp.Name == from.Snapshot }) {
		api.ServiceError(c, http.StatusNotFound, "not_found", fmt.Sprintf("fromSnapshot.snapshot: session %q has no snapshot %q", from.Session, from.Snapshot))
		return false
	}
	if err := snaps.Fork(ctx, src.Scope(), from.Snapshot, s.Scope()); err != nil {
		h.snapshotFailure(c, err)
		return false
	}
	return true
}

// SnapshotRef names a snapshot of one of the caller's sessions.
type SnapshotRef struct {
	Session  string `json:"session"`
	Snapshot string `json:"snapshot"`
}

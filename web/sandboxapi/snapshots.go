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

// withSnapshots is a session of the caller's with its snapshots.
type withSnapshots struct {
	session sessions.Session
	snaps   Snapshots
	list    []sandbox.Checkpoint
}

func hasSnapshot(list []sandbox.Checkpoint, name string) bool {
	return slices.ContainsFunc(list, func(cp sandbox.Checkpoint) bool { return cp.Name == name })
}

// sessionSnapshots is what the snapshot routes of a session do first: it
// finds the caller's session :id, checks that the engine keeps
// snapshots, runs check (the route's own reading of the request, before
// the sandbox is read; nil for none), and lists the session's snapshots.
// False when it answered the client.
func (h *API) sessionSnapshots(c *gin.Context, check func() bool) (withSnapshots, bool) {
	s, ok := h.own(c)
	if !ok {
		return withSnapshots{}, false
	}
	snaps, ok := h.snapshots(c)
	if !ok || check != nil && !check() {
		return withSnapshots{}, false
	}
	list, ok := h.listSnapshots(c, snaps, s.Scope())
	return withSnapshots{session: s, snaps: snaps, list: list}, ok
}

// listSnapshots lists the snapshots of scope's sandbox, none before its
// first call; false when it answered the client.
func (h *API) listSnapshots(c *gin.Context, snaps Snapshots, scope sandbox.Scope) ([]sandbox.Checkpoint, bool) {
	list, err := snaps.Checkpoints(c.Request.Context(), scope)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		h.snapshotFailure(c, err)
		return nil, false
	}
	return list, true
}

// CreateSnapshot serves POST /api/sandbox/v1/sessions/{id}/snapshots
// {"name"}: the session's sandbox as it is now, kept under name.
func (h *API) CreateSnapshot(c *gin.Context) {
	var o struct {
		Name string `json:"name"`
	}
	s, ok := h.sessionSnapshots(c, func() bool {
		if !bindJSON(c, &o) {
			return false
		}
		if !snapshotName.MatchString(o.Name) {
			api.ServiceError(c, http.StatusBadRequest, "bad_request", "name: 1 to 48 letters, digits, - and _, starting with a letter or digit")
			return false
		}
		return true
	})
	if !ok {
		return
	}
	if hasSnapshot(s.list, o.Name) {
		api.ServiceError(c, http.StatusConflict, "exists", fmt.Sprintf("the session has a snapshot %q already: delete it first, or choose another name", o.Name))
		return
	}
	cp, err := s.snaps.Checkpoint(c.Request.Context(), s.session.Scope(), o.Name)
	if err != nil {
		h.snapshotFailure(c, err)
		return
	}
	c.JSON(http.StatusCreated, snapshotView{Session: s.session.ID, Checkpoint: cp})
}

// ListSnapshots serves GET /api/sandbox/v1/sessions/{id}/snapshots.
func (h *API) ListSnapshots(c *gin.Context) {
	s, ok := h.sessionSnapshots(c, nil)
	if !ok {
		return
	}
	out := make([]snapshotView, 0, len(s.list))
	for _, cp := range s.list {
		out = append(out, snapshotView{Session: s.session.ID, Checkpoint: cp})
	}
	c.JSON(http.StatusOK, gin.H{"snapshots": out})
}

// DeleteSnapshot serves DELETE /api/sandbox/v1/sessions/{id}/snapshots/{name}.
func (h *API) DeleteSnapshot(c *gin.Context) {
	s, ok := h.sessionSnapshots(c, nil)
	if !ok {
		return
	}
	name := c.Param("name")
	if !hasSnapshot(s.list, name) {
		api.ServiceError(c, http.StatusNotFound, "not_found", fmt.Sprintf("the session has no snapshot %q; GET .../snapshots lists them", name))
		return
	}
	if err := s.snaps.DropCheckpoint(c.Request.Context(), s.session.Scope(), name); err != nil {
		h.snapshotFailure(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"session": s.session.ID, "name": name, "deleted": true})
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
	list, ok := h.listSnapshots(c, snaps, src.Scope())
	if !ok {
		return false
	}
	if !hasSnapshot(list, from.Snapshot) {
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

package account

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/web/api"
)

// The versions of an app (/api/apps/:appId/versions): its owner and admins
// publish the draft, list and read the versions and roll back to one.

// versionInfo is a version as the API answers it: whether it is the one
// the app's chats run besides the version itself.
type versionInfo struct {
	apps.Version
	Published bool `json:"published"`
}

// DefaultVersionPage and MaxVersionPage bound a page of versions.
const (
	DefaultVersionPage = 20
	MaxVersionPage     = 100
)

// optionalBody decodes a JSON body into v; an empty body leaves v as it
// is. It answers 400 itself and returns false when the body is not v.
func optionalBody(c *gin.Context, v any, what string) bool {
	err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<16), v)
	if err != nil && !errors.Is(err, io.EOF) {
		api.Error(c, http.StatusBadRequest, "the request body is not "+what+": "+err.Error())
		return false
	}
	return true
}

// Publish makes the app's draft a new version, which its chats, keys and
// share links then run. The draft must pass the checks an app's save
// passes.
func (h *Apps) Publish(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	var body struct {
		Note string `json:"note"`
	}
	if !optionalBody(c, &body, `{"note": "what changed"}`) {
		return
	}
	if n := utf8.RuneCountInString(body.Note); n > apps.MaxNoteLength {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("the note has %d characters, over %d; shorten it", n, apps.MaxNoteLength))
		return
	}
	p, _ := api.PrincipalOf(c)
	v, err := h.Versions.Publish(c.Request.Context(), app.ID, apps.Publication{Note: body.Note, AuthorID: p.UserID, Check: h.CheckGraph}, h.Now())
	var invalid *nodes.ValidationError
	switch {
	case errors.As(err, &invalid):
		refuseGraph(c, invalid)
		return
	case errors.Is(err, apps.ErrNotFound):
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(app.ID))
		return
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not publish the app; retry later")
		return
	}
	v.Graph = nil
	c.JSON(http.StatusCreated, versionInfo{Version: v, Published: true})
}

// ListVersions answers the app's versions, newest first, without their
// graphs: pageSize of them (default 20, at most 100) after offset.
func (h *Apps) ListVersions(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	offset, pageSize := 0, DefaultVersionPage
	for _, q := range []struct {
		name     string
		into     *int
		min, max int
	}{{"offset", &offset, 0, 1 << 30}, {"pageSize", &pageSize, 1, MaxVersionPage}} {
		raw := c.Query(q.name)
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < q.min || n > q.max {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("%s must be a whole number from %d to %d", q.name, q.min, q.max))
			return
		}
		*q.into = n
	}
	list, total, err := h.Versions.Versions(c.Request.Context(), app, offset, pageSize)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list the app's versions; retry later")
		return
	}
	out := make([]versionInfo, len(list))
	for i, v := range list {
		out[i] = versionInfo{Version: v, Published: v.ID == app.PublishedVersionID}
	}
	c.JSON(http.StatusOK, gin.H{"list": out, "total": total, "publishedVersionId": app.PublishedVersionID})
}

// version loads :versionId of the app; it answers 404 and returns false
// when the app has no such version.
func (h *Apps) version(c *gin.Context, app apps.App) (apps.Version, bool) {
	v, err := h.Versions.Version(c.Request.Context(), app.ID, c.Param("versionId"))
	switch {
	case errors.Is(err, apps.ErrVersionNotFound):
		api.Error(c, http.StatusNotFound, fmt.Sprintf("app %q has no version %q", app.ID, c.Param("versionId")))
		return apps.Version{}, false
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not read the version; retry later")
		return apps.Version{}, false
	}
	return v, true
}

// GetVersion answers one version with its graph.
func (h *Apps) GetVersion(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	if v, ok := h.version(c, app); ok {
		c.JSON(http.StatusOK, versionInfo{Version: v, Published: v.ID == app.PublishedVersionID})
	}
}

// Rollback makes a version's graph the app's draft again, replacing the
// draft, as FastGPT's builder does; the published version stays until the
// draft is published. With {"publish": true} the version is also made the
// published one at once (no new version is made), for taking back a bad
// publish in one step. The version must pass today's save checks.
func (h *Apps) Rollback(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	var body struct {
		Publish bool `json:"publish"`
	}
	if !optionalBody(c, &body, `{"publish": true or false}`) {
		return
	}
	v, ok := h.version(c, app)
	if !ok {
		return
	}
	if h.CheckGraph != nil {
		if problems := h.CheckGraph(*v.Graph); len(problems) > 0 {
			refuseGraph(c, &nodes.ValidationError{Problems: problems})
			return
		}
	}
	rolled, err := h.Versions.Rollback(c.Request.Context(), app.ID, v.ID, body.Publish, h.Now())
	var invalid *nodes.ValidationError
	switch {
	case errors.As(err, &invalid):
		refuseGraph(c, invalid)
		return
	case errors.Is(err, apps.ErrNotFound), errors.Is(err, apps.ErrVersionNotFound):
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(app.ID))
		return
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not roll the app back; retry later")
		return
	}
	c.JSON(http.StatusOK, rolled)
}

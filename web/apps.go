package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
)

// AppsHandler serves /api/apps.
type AppsHandler struct {
	Apps    AppStore
	Access  *Access
	Deleter SandboxDeleter
	// Publishing, when set, loses the app's keys and share links with
	// the app.
	Publishing *PublishHandler
	// CheckGraph, when set, says what else is wrong with a graph about to
	// be saved (the tool-call node's command policy, checked against the
	// operator's).
	CheckGraph func(nodes.Graph) []string
	Now        func() time.Time
}

type appBody struct {
	Name   string      `json:"name"`
	Public bool        `json:"public"`
	Graph  nodes.Graph `json:"graph"`
}

// visible loads the app at :appId if the caller may see it; otherwise it
// answers 404 and returns false.
func (h *AppsHandler) visible(c *gin.Context) (apps.App, bool) {
	app, err := h.Apps.Get(c.Request.Context(), c.Param("appId"))
	if err == nil && h.Access.CanUseApp(principal(c), app) {
		return app, true
	}
	if err != nil && !errors.Is(err, apps.ErrNotFound) {
		apiError(c, http.StatusInternalServerError, "could not read the app; retry later")
		return apps.App{}, false
	}
	apiError(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
	return apps.App{}, false
}

func (h *AppsHandler) editable(c *gin.Context) (apps.App, bool) {
	app, ok := h.visible(c)
	if ok && !h.Access.CanEditApp(principal(c), app) {
		apiError(c, http.StatusForbidden, "only the app's owner and admins may change it")
		return apps.App{}, false
	}
	return app, ok
}

// List answers the apps the caller may use.
func (h *AppsHandler) List(c *gin.Context) {
	all, err := h.Apps.List(c.Request.Context(), "")
	if err != nil {
		apiError(c, http.StatusInternalServerError, "could not list apps; retry later")
		return
	}
	out := []apps.App{}
	for _, a := range all {
		if h.Access.CanUseApp(principal(c), a) {
			out = append(out, a)
		}
	}
	c.JSON(http.StatusOK, gin.H{"apps": out})
}

// Get answers one app with its graph.
func (h *AppsHandler) Get(c *gin.Context) {
	if app, ok := h.visible(c); ok {
		c.JSON(http.StatusOK, app)
	}
}

func (h *AppsHandler) save(c *gin.Context, app apps.App, status int) {
	var body appBody
	if err := decodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<20), &body); err != nil {
		apiError(c, http.StatusBadRequest, "the request body is not a valid app: "+err.Error())
		return
	}
	if strings.TrimSpace(body.Name) == "" {
		apiError(c, http.StatusBadRequest, "an app needs a name")
		return
	}
	app.Name, app.Public, app.Graph = strings.TrimSpace(body.Name), body.Public, body.Graph
	if h.CheckGraph != nil {
		if problems := h.CheckGraph(app.Graph); len(problems) > 0 {
			c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"code": http.StatusUnprocessableEntity,
				"statusText": http.StatusText(http.StatusUnprocessableEntity), "message": strings.Join(problems, "; "), "problems": problems})
			return
		}
	}
	err := h.Apps.Put(c.Request.Context(), app, h.Now())
	var invalid *nodes.ValidationError
	switch {
	case errors.As(err, &invalid):
		c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"code": http.StatusUnprocessableEntity,
			"statusText": http.StatusText(http.StatusUnprocessableEntity), "message": err.Error(), "problems": invalid.Problems})
		return
	case err != nil:
		apiError(c, http.StatusInternalServerError, "could not save the app; retry later")
		return
	}
	saved, _ := h.Apps.Get(c.Request.Context(), app.ID)
	c.JSON(status, saved)
}

// Create makes an app owned by the caller; its graph must be valid.
func (h *AppsHandler) Create(c *gin.Context) {
	p, _ := PrincipalOf(c)
	h.save(c, apps.App{ID: newID(), OwnerID: p.UserID}, http.StatusCreated)
}

// Update replaces an app's name, visibility and graph.
func (h *AppsHandler) Update(c *gin.Context) {
	if app, ok := h.editable(c); ok {
		h.save(c, app, http.StatusOK)
	}
}

// Delete records the deletion of the app's sandboxes and removes the app;
// it answers at once, the workers remove the sandboxes (S8).
func (h *AppsHandler) Delete(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if err := h.Deleter.DeleteApp(ctx, app.ID); err != nil {
		apiError(c, http.StatusServiceUnavailable, "could not record the deletion of the app's sandboxes; nothing was deleted, retry later")
		return
	}
	// Keys and links first: they must not outlive the app, and a retry
	// finds the app still there to delete.
	if err := h.Publishing.forgetApp(ctx, app.ID); err != nil {
		apiError(c, http.StatusInternalServerError, "the app's sandboxes are being deleted but its keys and share links could not be; retry")
		return
	}
	if err := h.Apps.Delete(ctx, app.ID); err != nil {
		apiError(c, http.StatusInternalServerError, "the app's sandboxes are being deleted but the app could not be; retry")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"deleted": app.ID})
}

package account

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/web/api"
)

// Apps serves /api/apps.
type Apps struct {
	Apps    api.AppStore
	Access  *api.Access
	Deleter api.SandboxDeleter
	// Publishing, when set, loses the app's keys and share links with
	// the app.
	Publishing *Publishing
	// CheckGraph, when set, says what else is wrong with a graph about to
	// be saved (the tool-call node's command policy, checked against the
	// operator's).
	CheckGraph func(nodes.Graph) []nodes.Problem
	// Templates are the node types the builder offers.
	Templates nodes.Templates
	// Versions keeps the apps' published versions.
	Versions AppVersions
	// MaxIdleMinutes bounds an app's idle timeout (default 60).
	MaxIdleMinutes int
	// Retention, when set, is the engine's retention of chats'
	// checkpoints (chat.Handler), which an app may lower.
	Retention CheckpointRetention
	Now       func() time.Time
}

// setIdle sets the app's idle timeout when one was sent, within the
// operator's bounds; false when it answered the client.
func (h *Apps) setIdle(c *gin.Context, app *apps.App, minutes *int) bool {
	if minutes == nil {
		return true
	}
	most := h.MaxIdleMinutes
	if most <= 0 {
		most = 60
	}
	if *minutes < 0 || *minutes > most {
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("idleMinutes must be 1 to %d (this engine's bound, FLOWBOX_APP_IDLE_MAX_MINUTES), or 0 for the engine's 5 minutes", most))
		return false
	}
	app.IdleMinutes = *minutes
	return true
}

// CheckpointRetention is the engine's retention of chats' checkpoints:
// the checkpoints of their last keep turns, none older than maxAge; on
// is false when the engine keeps none.
type CheckpointRetention interface {
	CheckpointRetention() (keep int, maxAge time.Duration, on bool)
}

// checkpointLimits are the most an app may set of the retention of its
// chats' checkpoints: the engine's.
type checkpointLimits struct {
	Keep        int `json:"keep"`
	MaxAgeHours int `json:"maxAgeHours"`
}

// limits are the engine's retention, nil when it keeps no checkpoints.
func (h *Apps) limits() *checkpointLimits {
	if h.Retention == nil {
		return nil
	}
	keep, age, on := h.Retention.CheckpointRetention()
	if !on {
		return nil
	}
	return &checkpointLimits{Keep: keep, MaxAgeHours: int(age / time.Hour)}
}

// setRetention sets the retention of the app's chats' checkpoints to
// what was sent, within the engine's; false when it answered the client.
func (h *Apps) setRetention(c *gin.Context, app *apps.App, keep, hours *int) bool {
	most := h.limits()
	if most == nil {
		const off = "this engine keeps no checkpoints of chats' sandboxes (FLOWBOX_CHECKPOINTS)"
		return bounded(c, "checkpointKeep", keep, 0, off, &app.CheckpointKeep) &&
			bounded(c, "checkpointMaxAgeHours", hours, 0, off, &app.CheckpointMaxAgeHours)
	}
	return bounded(c, "checkpointKeep", keep, most.Keep, fmt.Sprintf("this engine keeps the checkpoints of a chat's last %d turns (FLOWBOX_CHECKPOINT_KEEP)", most.Keep), &app.CheckpointKeep) &&
		bounded(c, "checkpointMaxAgeHours", hours, most.MaxAgeHours, fmt.Sprintf("this engine keeps checkpoints for %d hours at most (FLOWBOX_CHECKPOINT_MAX_AGE)", most.MaxAgeHours), &app.CheckpointMaxAgeHours)
}

// bounded sets *to to the value sent, if any, when it is 0 (the
// engine's) or 1 to most; false when it answered the client, saying why
// most is the bound.
func bounded(c *gin.Context, field string, v *int, most int, why string, to *int) bool {
	if v == nil {
		return true
	}
	if *v < 0 || *v > most {
		allowed := fmt.Sprintf("1 to %d, or 0 for the engine's", most)
		if most == 0 {
			allowed = "0 (the engine's)"
		}
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("%s must be %s: %s", field, allowed, why))
		return false
	}
	*to = *v
	return true
}

// AppVersions keeps the apps' published versions (apps.Store).
type AppVersions interface {
	Publish(ctx context.Context, appID string, p apps.Publication, now time.Time) (apps.Version, error)
	Version(ctx context.Context, appID, versionID string) (apps.Version, error)
	Versions(ctx context.Context, a apps.App, offset, limit int) ([]apps.Version, int, error)
	Rollback(ctx context.Context, appID, versionID string, publish bool, now time.Time) (apps.App, error)
}

// nodeTemplate is a node type as the builder's palette and side panel
// read it.
type nodeTemplate struct {
	Type           string                  `json:"type"`
	Label          map[string]string       `json:"label"`
	Description    string                  `json:"description"`
	Group          string                  `json:"group"`
	Catch          bool                    `json:"catch,omitempty"`
	Branches       bool                    `json:"branches,omitempty"`
	DynamicOutputs bool                    `json:"dynamicOutputs,omitempty"`
	OutputsFrom    string                  `json:"outputsFrom,omitempty"`
	Outputs        map[string]nodes.Output `json:"outputs"`
	// Schema is the template itself: its inputs' JSON Schema with labels,
	// defaults and how to draw them.
	Schema json.RawMessage `json:"schema"`
}

// NodeTemplates answers every node type an app may use, by type.
func (h *Apps) NodeTemplates(c *gin.Context) {
	out := make([]nodeTemplate, 0, len(h.Templates))
	for _, t := range h.Templates {
		outputs := t.Outputs
		if outputs == nil {
			outputs = map[string]nodes.Output{}
		}
		out = append(out, nodeTemplate{Type: t.Type, Label: t.Label, Description: t.Description, Group: t.Group,
			Catch: t.Catch, Branches: t.Branches, DynamicOutputs: t.DynamicOutputs, OutputsFrom: t.OutputsFrom, Outputs: outputs, Schema: t.Schema})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	c.JSON(http.StatusOK, gin.H{"templates": out, "variableTypes": nodes.VariableTypes, "systemVariables": nodes.SystemVariables})
}

type appBody struct {
	Name   string      `json:"name"`
	Public bool        `json:"public"`
	Graph  nodes.Graph `json:"graph"`
	// TerminalOff, when sent, turns terminals off or on for the app's
	// chats; when left out the app keeps its setting (on for a new app).
	TerminalOff *bool `json:"terminalOff"`
	// IdleMinutes, when sent, is the app's idle timeout (0: the
	// engine's); when left out the app keeps its setting.
	IdleMinutes *int `json:"idleMinutes"`
	// CheckpointKeep and CheckpointMaxAgeHours, when sent, are the
	// retention of the app's chats' checkpoints (0: the engine's); when
	// left out the app keeps its setting.
	CheckpointKeep        *int `json:"checkpointKeep"`
	CheckpointMaxAgeHours *int `json:"checkpointMaxAgeHours"`
}

// visible loads the app at :appId if the caller may see it; otherwise it
// answers 404 and returns false.
func (h *Apps) visible(c *gin.Context) (apps.App, bool) {
	app, err := h.Apps.Get(c.Request.Context(), c.Param("appId"))
	if err == nil && h.Access.CanUseApp(api.Caller(c), app) {
		return app, true
	}
	if err != nil && !errors.Is(err, apps.ErrNotFound) {
		api.Error(c, http.StatusInternalServerError, "could not read the app; retry later")
		return apps.App{}, false
	}
	api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
	return apps.App{}, false
}

func (h *Apps) editable(c *gin.Context) (apps.App, bool) {
	app, ok := h.visible(c)
	if ok && !h.Access.CanEditApp(api.Caller(c), app) {
		api.Error(c, http.StatusForbidden, "only the app's owner and admins may change it")
		return apps.App{}, false
	}
	return app, ok
}

// List answers the apps the caller may use.
func (h *Apps) List(c *gin.Context) {
	all, err := h.Apps.List(c.Request.Context(), "")
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list apps; retry later")
		return
	}
	out := []apps.App{}
	for _, a := range all {
		if h.Access.CanUseApp(api.Caller(c), a) {
			out = append(out, a)
		}
	}
	c.JSON(http.StatusOK, gin.H{"apps": out})
}

// appAnswer is an app as GET, PUT and PATCH answer it: with the most
// its settings of the checkpoints' retention may be, when the engine
// keeps checkpoints.
type appAnswer struct {
	apps.App
	CheckpointLimits *checkpointLimits `json:"checkpointLimits,omitempty"`
}

// Get answers one app with its graph.
func (h *Apps) Get(c *gin.Context) {
	if app, ok := h.visible(c); ok {
		c.JSON(http.StatusOK, appAnswer{App: app, CheckpointLimits: h.limits()})
	}
}

func (h *Apps) save(c *gin.Context, app apps.App, status int) {
	var body appBody
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 1<<20), &body); err != nil {
		api.Error(c, http.StatusBadRequest, "the request body is not a valid app: "+err.Error())
		return
	}
	if strings.TrimSpace(body.Name) == "" {
		api.Error(c, http.StatusBadRequest, "an app needs a name")
		return
	}
	app.Name, app.Public, app.Graph = strings.TrimSpace(body.Name), body.Public, body.Graph
	if body.TerminalOff != nil {
		app.TerminalOff = *body.TerminalOff
	}
	if !h.setIdle(c, &app, body.IdleMinutes) || !h.setRetention(c, &app, body.CheckpointKeep, body.CheckpointMaxAgeHours) {
		return
	}
	if h.CheckGraph != nil {
		if problems := h.CheckGraph(app.Graph); len(problems) > 0 {
			refuseGraph(c, &nodes.ValidationError{Problems: problems})
			return
		}
	}
	h.put(c, app, status)
}

// put stores app and answers it as stored.
func (h *Apps) put(c *gin.Context, app apps.App, status int) {
	err := h.Apps.Put(c.Request.Context(), app, h.Now())
	var invalid *nodes.ValidationError
	switch {
	case errors.As(err, &invalid):
		refuseGraph(c, invalid)
		return
	case err != nil:
		api.Error(c, http.StatusInternalServerError, "could not save the app; retry later")
		return
	}
	saved, _ := h.Apps.Get(c.Request.Context(), app.ID)
	c.JSON(status, appAnswer{App: saved, CheckpointLimits: h.limits()})
}

// Create makes an app owned by the caller; its graph must be valid.
func (h *Apps) Create(c *gin.Context) {
	p, _ := api.PrincipalOf(c)
	h.save(c, apps.App{ID: api.NewID(), OwnerID: p.UserID}, http.StatusCreated)
}

// Update replaces an app's name, visibility and graph.
func (h *Apps) Update(c *gin.Context) {
	if app, ok := h.editable(c); ok {
		h.save(c, app, http.StatusOK)
	}
}

// Patch changes the settings sent (name, public, terminalOff,
// idleMinutes, checkpointKeep, checkpointMaxAgeHours) and keeps the rest,
// the graph included: the Publish page's switches use it.
func (h *Apps) Patch(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	var body struct {
		Name        *string `json:"name"`
		Public      *bool   `json:"public"`
		TerminalOff *bool   `json:"terminalOff"`
		IdleMinutes *int    `json:"idleMinutes"`
		// The retention of the app's chats' checkpoints.
		CheckpointKeep        *int `json:"checkpointKeep"`
		CheckpointMaxAgeHours *int `json:"checkpointMaxAgeHours"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send the settings to change: {"name": "...", "public": true, "terminalOff": false, "idleMinutes": 5, "checkpointKeep": 10, "checkpointMaxAgeHours": 24}, each optional: `+err.Error())
		return
	}
	if !h.setIdle(c, &app, body.IdleMinutes) || !h.setRetention(c, &app, body.CheckpointKeep, body.CheckpointMaxAgeHours) {
		return
	}
	if body.Name != nil {
		if strings.TrimSpace(*body.Name) == "" {
			api.Error(c, http.StatusBadRequest, "an app needs a name")
			return
		}
		app.Name = strings.TrimSpace(*body.Name)
	}
	if body.Public != nil {
		app.Public = *body.Public
	}
	if body.TerminalOff != nil {
		app.TerminalOff = *body.TerminalOff
	}
	h.put(c, app, http.StatusOK)
}

// Delete records the deletion of the app's sandboxes and removes the app;
// it answers at once, the workers remove the sandboxes (S8).
func (h *Apps) Delete(c *gin.Context) {
	app, ok := h.editable(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if err := h.Deleter.DeleteApp(ctx, app.ID); err != nil {
		api.Error(c, http.StatusServiceUnavailable, "could not record the deletion of the app's sandboxes; nothing was deleted, retry later")
		return
	}
	// Keys and links first: they must not outlive the app, and a retry
	// finds the app still there to delete.
	if err := h.Publishing.forgetApp(ctx, app.ID); err != nil {
		api.Error(c, http.StatusInternalServerError, "the app's sandboxes are being deleted but its keys and share links could not be; retry")
		return
	}
	if err := h.Apps.Delete(ctx, app.ID); err != nil {
		api.Error(c, http.StatusInternalServerError, "the app's sandboxes are being deleted but the app could not be; retry")
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"deleted": app.ID})
}

// refuseGraph answers 422 with everything wrong with a graph, each
// problem naming its node and field.
func refuseGraph(c *gin.Context, invalid *nodes.ValidationError) {
	c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"code": http.StatusUnprocessableEntity,
		"statusText": http.StatusText(http.StatusUnprocessableEntity), "message": invalid.Error(), "problems": invalid.Problems})
}

package account

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/web/api"
)

// AppKeys keeps the keys bound to one app (auth.Store).
type AppKeys interface {
	CreateAppKey(ctx context.Context, appID, createdBy string, spec auth.KeySpec) (string, auth.KeyInfo, error)
	AppKeys(ctx context.Context, appID string) ([]auth.KeyInfo, error)
	RevokeAppKey(ctx context.Context, appID, keyID string) error
	DeleteAppKeys(ctx context.Context, appID string) error
}

// ShareLinks keeps share links (share.Store).
type ShareLinks interface {
	Create(ctx context.Context, appID, createdBy string, spec share.Spec) (share.Link, error)
	List(ctx context.Context, appID string) ([]share.Link, error)
	Revoke(ctx context.Context, appID, id string) error
	DeleteApp(ctx context.Context, appID string) error
}

// Publishing serves an app's "Publish" tab: the app's keys and its
// share links, for the app's owner and admins.
type Publishing struct {
	Apps      api.AppReader
	Access    *api.Access
	KeyStore  AppKeys
	LinkStore ShareLinks
}

// app loads :appId if the caller may publish it; it answers the client
// itself otherwise.
func (h *Publishing) app(c *gin.Context) (apps.App, bool) {
	a, err := h.Apps.Get(c.Request.Context(), c.Param("appId"))
	switch {
	case err == nil && h.Access.CanEditApp(api.Caller(c), a):
		return a, true
	case err == nil && h.Access.CanUseApp(api.Caller(c), a):
		api.Error(c, http.StatusForbidden, "only the app's owner and admins may publish it")
	case err == nil || errors.Is(err, apps.ErrNotFound):
		api.Error(c, http.StatusNotFound, "no app "+strconv.Quote(c.Param("appId")))
	default:
		api.Error(c, http.StatusInternalServerError, "could not read the app; retry later")
	}
	return apps.App{}, false
}

// Keys lists the app's keys.
func (h *Publishing) Keys(c *gin.Context) {
	a, ok := h.app(c)
	if !ok {
		return
	}
	keys, err := h.KeyStore.AppKeys(c.Request.Context(), a.ID)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list the app's keys; retry later")
		return
	}
	if keys == nil {
		keys = []auth.KeyInfo{}
	}
	c.JSON(http.StatusOK, gin.H{"keys": keys})
}

// CreateKey makes a key bound to the app ({"name", "expiresAt" (RFC 3339,
// optional), "ratePerMinute" (optional)}); the answer is the only time the
// secret is shown.
func (h *Publishing) CreateKey(c *gin.Context) {
	a, ok := h.app(c)
	if !ok {
		return
	}
	var body struct {
		Name          string    `json:"name"`
		ExpiresAt     time.Time `json:"expiresAt"`
		RatePerMinute int       `json:"ratePerMinute"`
	}
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &body); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"name": "...", "expiresAt": "2027-01-31T00:00:00Z" (optional), "ratePerMinute": 60 (optional)}: `+err.Error())
		return
	}
	p, _ := api.PrincipalOf(c)
	key, info, err := h.KeyStore.CreateAppKey(c.Request.Context(), a.ID, p.UserID, auth.KeySpec{Name: body.Name, ExpiresAt: body.ExpiresAt, RatePerMinute: body.RatePerMinute})
	if err != nil {
		api.Fail(c, err, "could not change the accounts")
		return
	}
	c.JSON(http.StatusCreated, struct {
		Key string `json:"key"`
		auth.KeyInfo
		Note string `json:"note"`
	}{key, info, "this is the only time the key is shown; keep it somewhere safe. It reaches only this app's chat API, chats and files."})
}

// RevokeKey deletes one of the app's keys.
func (h *Publishing) RevokeKey(c *gin.Context) {
	h.revoke(c, "keyId", "key", auth.ErrNotFound, h.KeyStore.RevokeAppKey)
}

// revoke deletes the app's key or link named by the route's parameter
// param, with revoke; notFound is revoke's error for an id the app does
// not have.
func (h *Publishing) revoke(c *gin.Context, param, what string, notFound error, revoke func(ctx context.Context, appID, id string) error) {
	a, ok := h.app(c)
	if !ok {
		return
	}
	id := c.Param(param)
	if err := revoke(c.Request.Context(), a.ID, id); err != nil {
		if errors.Is(err, notFound) {
			api.Error(c, http.StatusNotFound, "this app has no "+what+" "+strconv.Quote(id)+"; reload the list")
			return
		}
		api.Error(c, http.StatusInternalServerError, "could not revoke the "+what+"; retry later")
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": id})
}

// Links lists the app's share links.
func (h *Publishing) Links(c *gin.Context) {
	a, ok := h.app(c)
	if !ok {
		return
	}
	links, err := h.LinkStore.List(c.Request.Context(), a.ID)
	if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not list the app's share links; retry later")
		return
	}
	c.JSON(http.StatusOK, gin.H{"links": links})
}

// CreateLink makes a share link (share.Spec as JSON).
func (h *Publishing) CreateLink(c *gin.Context) {
	a, ok := h.app(c)
	if !ok {
		return
	}
	var spec share.Spec
	if err := api.DecodeJSON(http.MaxBytesReader(c.Writer, c.Request.Body, 16<<10), &spec); err != nil {
		api.Error(c, http.StatusBadRequest, `send {"name": "...", "expiresAt": RFC 3339 (optional), "ratePerMinute": 0, "maxRuns": 0, "showTools": true, "files": "hidden"|"read"|"write", "terminal": false, "hookUrl": "" (optional)}: `+err.Error())
		return
	}
	p, _ := api.PrincipalOf(c)
	l, err := h.LinkStore.Create(c.Request.Context(), a.ID, p.UserID, spec)
	if errors.Is(err, share.ErrInvalid) {
		api.Error(c, http.StatusBadRequest, err.Error())
		return
	} else if err != nil {
		api.Error(c, http.StatusInternalServerError, "could not create the link; retry later")
		return
	}
	c.JSON(http.StatusCreated, l)
}

// RevokeLink deletes a share link: its visitors are refused at once; their
// chats stay for the owner.
func (h *Publishing) RevokeLink(c *gin.Context) {
	h.revoke(c, "linkId", "share link", share.ErrNotFound, h.LinkStore.Revoke)
}

// forgetApp removes an app's keys and links (the app is being deleted).
func (h *Publishing) forgetApp(ctx context.Context, appID string) error {
	if h == nil {
		return nil
	}
	if err := h.KeyStore.DeleteAppKeys(ctx, appID); err != nil {
		return err
	}
	return h.LinkStore.DeleteApp(ctx, appID)
}

package chat

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/web/api"
)

// AppLister lists the apps (apps.Store), for GET /api/v1/models.
type AppLister interface {
	List(ctx context.Context, owner string) ([]apps.App, error)
}

// Models serves GET /api/v1/models as OpenAI's API does: the apps the
// caller may chat with, each a model whose id a completion may name in
// "model" instead of appId. The service key may chat with every app; an
// app key sees its own app only.
func (h *Handler) Models(c *gin.Context) {
	if !h.authorised(c) {
		return
	}
	if h.AppList == nil {
		api.Error(c, http.StatusNotFound, "this engine lists no models; name the app in appId")
		return
	}
	all, err := h.AppList.List(c.Request.Context(), "")
	if err != nil {
		h.Log.Error("list apps", "err", err)
		api.Error(c, http.StatusInternalServerError, "could not list the apps; retry later")
		return
	}
	_, signedIn := api.PrincipalOf(c)
	data := []gin.H{}
	for _, a := range all {
		if signedIn && (h.Access == nil || !h.Access.CanUseApp(api.Caller(c), a)) {
			continue
		}
		owner := a.OwnerID
		if owner == "" {
			owner = "flowbox"
		}
		data = append(data, gin.H{"id": a.ID, "object": "model", "created": a.CreatedAt.Unix(), "owned_by": owner})
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": data})
}

package files

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/chats/preview"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/api"
)

// Previews is the part of preview.Store the previews API uses.
type Previews interface {
	Issue(ctx context.Context, scope sandbox.Scope, port int) (preview.Link, error)
	NewGrant(ctx context.Context, l preview.Link) (string, error)
	List(ctx context.Context, scope sandbox.Scope) ([]preview.Link, error)
	Update(ctx context.Context, scope sandbox.Scope, port int, shared bool, ttl time.Duration) (preview.Link, error)
	Revoke(ctx context.Context, scope sandbox.Scope, port int) error
}

// PreviewJSON is a link as the API shows it to those who may see the
// chat's files: path is the link to hand on (for the owner alone unless
// shared); open, for the caller, carries a grant and opens at once.
type PreviewJSON struct {
	preview.Link
	Path    string `json:"path"`
	Open    string `json:"open,omitempty"`
	Expired bool   `json:"expired"`
	// Files: the link serves the workspace's files (path + "site/index.html"
	// is /workspace/site/index.html), not a port.
	Files bool `json:"files"`
}

// Previews serves POST /api/core/ai/sandbox/previews (L2): a chat's
// preview links, to those who may see its files: "list" them, "open" the
// one of a port (made when there is none; the answer's open path works at
// once), and as writes "update" one (shared, ttlHours) or "revoke" it. It
// starts no sandbox. With files instead of a port, the same for the link
// to the workspace's files (an HTML file opened rendered).
func (h *Handler) Previews(c *gin.Context) {
	action := ""
	req, scope, ok := h.bindAs(c, func(r fileRequest) string {
		action = r.Action
		if r.Action == "update" || r.Action == "revoke" {
			return "write"
		}
		return "read"
	})
	if !ok {
		return
	}
	if h.Links == nil {
		api.Error(c, http.StatusNotImplemented, "this engine serves no preview links")
		return
	}
	ctx := c.Request.Context()
	switch {
	case action == "list":
	case req.Files && req.Port != 0:
		api.Error(c, http.StatusBadRequest, "give either files or a port, not both")
		return
	case req.Files:
		req.Port = preview.Files
	default:
		if err := sandbox.CheckPort(req.Port); err != nil {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("%q needs the port, between 1 and 65535, or files: true", action))
			return
		}
	}
	now := time.Now()
	show := func(l preview.Link) PreviewJSON {
		return PreviewJSON{Link: l, Path: l.Path(), Expired: !now.Before(l.ExpiresAt), Files: l.Port == preview.Files}
	}
	var out any
	var err error
	switch action {
	case "list":
		var list []preview.Link
		if list, err = h.Links.List(ctx, scope); err == nil {
			shown := make([]PreviewJSON, 0, len(list))
			for _, l := range list {
				shown = append(shown, show(l))
			}
			out = gin.H{"previews": shown}
		}
	case "open":
		var l preview.Link
		if l, err = h.Links.Issue(ctx, scope, req.Port); err == nil {
			var g string
			if g, err = h.Links.NewGrant(ctx, l); err == nil {
				p := show(l)
				p.Open = "/preview/" + l.Token() + "~" + g + "/"
				out = gin.H{"preview": p}
			}
		}
	case "update":
		if req.Shared == nil {
			api.Error(c, http.StatusBadRequest, "update needs shared (true or false)")
			return
		}
		if req.TTLHours < 0 || time.Duration(req.TTLHours)*time.Hour > preview.MaxTTL {
			api.Error(c, http.StatusBadRequest, fmt.Sprintf("ttlHours must be between 1 and %d (0: keep the expiry)", int(preview.MaxTTL.Hours())))
			return
		}
		var l preview.Link
		if l, err = h.Links.Update(ctx, scope, req.Port, *req.Shared, time.Duration(req.TTLHours)*time.Hour); err == nil {
			out = gin.H{"preview": show(l)}
		}
	case "revoke":
		if err = h.Links.Revoke(ctx, scope, req.Port); err == nil {
			out = gin.H{"revoked": req.Port}
		}
	default:
		api.Error(c, http.StatusBadRequest, fmt.Sprintf("action must be list, open, update or revoke, not %q", action))
		return
	}
	switch {
	case errors.Is(err, preview.ErrNotFound):
		if req.Port == preview.Files {
			api.Error(c, http.StatusNotFound, "this chat has no link to its workspace's files")
		} else {
			api.Error(c, http.StatusNotFound, fmt.Sprintf("this chat has no preview link to port %d", req.Port))
		}
	case err != nil:
		if _, known := api.FailureOf(err); !known {
			slog.Error("the chat's preview links", "action", action, "err", err)
		}
		api.Fail(c, err, "the preview links could not be read or changed")
	default:
		c.JSON(http.StatusOK, out)
	}
}

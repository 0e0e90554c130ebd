package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web/account"
	"github.com/flowbox/flowbox/web/admin"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/chat"
	"github.com/flowbox/flowbox/web/files"
	"github.com/flowbox/flowbox/web/preview"
	"github.com/flowbox/flowbox/web/sandboxapi"
	"github.com/flowbox/flowbox/web/terminal"
	"github.com/flowbox/flowbox/web/ui"
	"github.com/flowbox/flowbox/web/visitor"
)

// SandboxAdmin stops and deletes sandboxes for operators, through the same
// coordination as the stop scan and chat deletion (the workers): a stop
// holds the sandbox's claim, so commands wait for it; a delete records the
// deletion of the sandbox's chat first, so no command brings it back.
// Errors wrap sandbox.ErrNotFound (no such sandbox), sandbox.ErrBusy (the
// stop scan or reconciliation holds it) or sandbox.ErrDeleted (its chat is
// being deleted already).
type SandboxAdmin interface {
	StopSandbox(ctx context.Context, sandboxID string) error
	DeleteSandbox(ctx context.Context, sandboxID string) error
}

// Usage is the latest metrics of the running sandboxes (sandbox.Sampler).
type Usage interface {
	Look(ctx context.Context) map[string]sandbox.Sample
}

// sandboxUsage serves GET /admin/api/sandboxes/metrics: the latest
// metrics of every running sandbox, by id, sampled while someone looks.
func (p *Product) sandboxUsage(c *gin.Context) {
	if p.Usage == nil {
		c.JSON(http.StatusOK, gin.H{"metrics": gin.H{}})
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	c.JSON(http.StatusOK, gin.H{"metrics": p.Usage.Look(ctx)})
}

// Product is the user-facing part of the engine: accounts, the chat API,
// apps and chats, the sandbox file API and the pages. Its routes are
// listed in New (router.go) with every other route.
type Product struct {
	Auth     api.Authenticator
	Sessions *account.Sessions
	Chat     *chat.Handler
	Apps     *account.Apps
	Chats    *chat.Chats
	Files    *files.Handler
	// Preview serves the chats' preview links (L2).
	Preview *preview.Handler
	// Terminal serves the chats' web terminals (L1).
	Terminal *terminal.Handler
	// Usage reads the running sandboxes' metrics for the admin page
	// (L4); nil: the page shows none.
	Usage   Usage
	Uploads *files.Uploads
	Skills  *admin.Skills
	Tools   *admin.Tools
	// Sandbox is the sandbox service API (A1) and its MCP server.
	Sandbox *sandboxapi.API
	Users   *account.Users
	UI      *ui.UI
	Admin   SandboxAdmin
	// Publish serves an app's keys and share links; Share the links'
	// visitors.
	Publish *account.Publishing
	Share   *visitor.Handler
	// Audit serves the audit of sandbox calls.
	Audit *admin.Audit
	// LoginLimit limits sign-in attempts per client; ChatLimit chat
	// requests per user.
	LoginLimit, ChatLimit *api.RateLimiter
	// SandboxLimit limits each caller's calls of the sandbox service API
	// (programs call it far more often than people chat).
	SandboxLimit *api.RateLimiter
}

func (p *Product) sandboxAction(do func(context.Context, string) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.Param("id")
		if !sandbox.ValidID(id) {
			api.Error(c, http.StatusBadRequest, "not a sandbox id")
			return
		}
		err := do(c.Request.Context(), id)
		switch {
		case err == nil:
			c.JSON(http.StatusOK, gin.H{"sandboxId": id, "done": true})
		case errors.Is(err, sandbox.ErrNotFound):
			api.Error(c, http.StatusNotFound, "no sandbox "+id+"; reload the page to see the current list")
		case errors.Is(err, sandbox.ErrBusy):
			api.Error(c, http.StatusConflict, "sandbox "+id+" is being stopped or repaired by the workers right now; retry in a moment")
		case errors.Is(err, sandbox.ErrDeleted):
			api.Error(c, http.StatusGone, "sandbox "+id+" is already being deleted with its chat")
		default:
			api.Error(c, http.StatusServiceUnavailable, "could not do it now; retry later ("+err.Error()+")")
		}
	}
}

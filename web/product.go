package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/sandbox"
)

// SandboxAdmin stops and deletes sandboxes for the admin page.
type SandboxAdmin interface {
	Stop(ctx context.Context, sandboxID string) error
	Delete(ctx context.Context, sandboxID string) error
}

// Product is the user-facing part of the engine: accounts, the chat API,
// apps and chats, the sandbox file API and the pages. Its routes are
// listed in register, grouped by who may call them.
type Product struct {
	Auth     Authenticator
	Sessions *SessionHandler
	Chat     *ChatHandler
	Apps     *AppsHandler
	Chats    *ChatsHandler
	Files    *FilesHandler
	UI       *UI
	Admin    SandboxAdmin
	// LoginLimit limits sign-in attempts per client; ChatLimit chat
	// requests per user.
	LoginLimit, ChatLimit *RateLimiter
}

func (p *Product) register(r *gin.Engine, adminPages *gin.RouterGroup) {
	r.StaticFS("/static", StaticFiles())
	authn := Authenticate(p.Auth)

	// Public.
	r.GET("/login", authn, p.UI.Login)
	r.POST("/api/login", p.LoginLimit.Middleware(ByClient), p.Sessions.Login)

	// The chat API: signed-in callers, or programs with the configured key.
	r.POST("/api/v1/chat/completions", AuthenticateOrServiceKey(p.Auth, p.Chat.APIKey), p.ChatLimit.Middleware(ByUser), p.Chat.Completions)

	// Signed-in users (session with CSRF token, or API key).
	api := r.Group("/api", authn, RequireUser())
	api.POST("/logout", p.Sessions.Logout)
	api.GET("/me", p.Sessions.Me)
	api.GET("/apps", p.Apps.List)
	api.POST("/apps", p.Apps.Create)
	api.GET("/apps/:appId", p.Apps.Get)
	api.PUT("/apps/:appId", p.Apps.Update)
	api.DELETE("/apps/:appId", p.Apps.Delete)
	api.GET("/apps/:appId/chats", p.Chats.List)
	api.DELETE("/apps/:appId/chats", p.Chats.Delete)
	api.GET("/apps/:appId/chats/:chatId", p.Chats.Get)
	api.PATCH("/apps/:appId/chats/:chatId", p.Chats.Rename)
	api.POST("/core/ai/sandbox/file", p.Files.File)
	api.POST("/core/ai/sandbox/download", p.Files.Download)
	api.POST("/core/ai/sandbox/status", p.Files.Status)

	// Pages for signed-in users.
	pages := r.Group("/", authn, RequirePage())
	pages.GET("/", p.UI.AppList)
	pages.GET("/apps/:appId/edit", p.UI.Builder)
	pages.GET("/apps/:appId/chats", p.UI.ChatList)
	pages.GET("/apps/:appId/chat/:chatId", p.UI.Chat)

	// Admins.
	adminPages.GET("", p.UI.Admin)
	adminAPI := r.Group("/api/admin", authn, RequireAdmin())
	adminAPI.POST("/sandboxes/:id/stop", p.sandboxAction(p.Admin.Stop))
	adminAPI.POST("/sandboxes/:id/delete", p.sandboxAction(p.Admin.Delete))
}

func (p *Product) sandboxAction(do func(context.Context, string) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.Param("id")
		if !sandbox.ValidID(id) {
			apiError(c, http.StatusBadRequest, "not a sandbox id")
			return
		}
		if err := do(c.Request.Context(), id); err != nil {
			if errors.Is(err, sandbox.ErrNotFound) {
				apiError(c, http.StatusNotFound, "no sandbox "+id)
				return
			}
			apiError(c, http.StatusServiceUnavailable, "the provider could not do it: "+err.Error())
			return
		}
		c.JSON(http.StatusOK, gin.H{"sandboxId": id, "done": true})
	}
}

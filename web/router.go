// Package web is the engine's HTTP surface. New (this file) lists every
// route of the engine, grouped by who may call it; the handlers live in
// packages by audience: chat, files, sandboxapi, admin, account, visitor
// (share links) and ui (the pages), on what web/api gives them all (the
// caller, access rules, the one error table). It maps errors to HTTP
// statuses at the edge and must never reach a sandbox except through the
// sandbox.Manager.
package web

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/web/admin"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/sandboxapi"
	"github.com/flowbox/flowbox/web/ui"
)

// Check is one dependency /readyz verifies (the database, Redis, the
// sandbox provider).
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Config configures the router.
type Config struct {
	// Ready are the checks of /readyz.
	Ready []Check
	// Metrics serves /metrics (Prometheus); nil leaves the route out.
	Metrics http.Handler
	// Queues is the task queue dashboard (asynqmon), served to admins at
	// QueuesPath; nil leaves it out.
	Queues http.Handler
	// AdminToken guards the admin routes for operators without an admin
	// account. Empty: only signed-in admins reach them.
	AdminToken string
	// TrustedProxies are the peers (addresses or CIDRs) whose
	// X-Forwarded-For names the client; empty: none, the peer is the
	// client. Rate limits and logs key on the client's address, so a
	// header any caller can send must not choose it.
	TrustedProxies []string
	// Product is the user-facing part: accounts, chat, apps, files, pages.
	// Nil leaves it out (a worker's metrics-only server).
	Product *Product
}

// PreviewMethods are the methods preview links pass on.
var PreviewMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// QueuesPath is where the queue dashboard is mounted; the dashboard must
// be built with it as its root path.
const QueuesPath = "/admin/queues"

// New returns the engine's HTTP handler. Every route of the engine is
// listed here, grouped by who may call it, then by resource.
func New(cfg Config) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		// config.Parse has checked them; trust none rather than all.
		_ = r.SetTrustedProxies(nil)
	}
	r.Use(gin.Recovery())
	p := cfg.Product
	var auth api.Authenticator
	if p != nil {
		auth = p.Auth
	}

	// Public: liveness and readiness for load balancers and operators.
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", readyz(cfg.Ready))
	// Metrics carry counts and durations, nothing about users; keep the
	// port off the internet or filter /metrics at the proxy.
	if cfg.Metrics != nil {
		r.GET("/metrics", gin.WrapH(cfg.Metrics))
	}
	if p != nil {
		r.StaticFS("/ui", ui.AppFiles())
		r.GET("/login", api.Authenticate(auth), p.UI.Login)
		r.POST("/api/login", p.LoginLimit.Middleware(api.ByClient), p.Sessions.Login)
		// One-time set-password links: the token is the credential.
		r.GET("/set-password/:token", p.Users.SetPasswordPage(p.UI))
		r.POST("/api/set-password", p.LoginLimit.Middleware(api.ByClient), p.Users.SetPassword)
	}

	// Admins: signed-in admins (a session, with its CSRF token on changes,
	// or an admin's API key) and operators with the admin token. Every
	// admin route is under /admin, so a browser that was given the token
	// through HTTP basic auth sends it to all of them.
	admins := r.Group("/admin", admin.Gate(auth, cfg.AdminToken, true))
	if cfg.Queues != nil {
		// The dashboard's own pages send no CSRF token; changes to the
		// queues are refused unless they come from this origin.
		queues := r.Group(QueuesPath, admin.Gate(auth, cfg.AdminToken, false))
		h := gin.WrapH(admin.OfflineDashboard(cfg.Queues))
		queues.Any("", h)
		queues.Any("/*path", h)
	}
	if p == nil {
		return r
	}
	admins.GET("", p.UI.Admin)
	admins.GET("/users", p.UI.UserList)
	admins.GET("/audit", p.UI.Audit)
	admins.GET("/api/sandboxes/metrics", p.sandboxUsage)
	admins.POST("/api/sandboxes/:id/stop", p.sandboxAction(p.Admin.StopSandbox))
	admins.POST("/api/sandboxes/:id/delete", p.sandboxAction(p.Admin.DeleteSandbox))
	admins.GET("/api/users", p.Users.List)
	admins.POST("/api/users", p.Users.Create)
	admins.POST("/api/users/:userId/disable", p.Users.Disable)
	admins.POST("/api/users/:userId/enable", p.Users.Enable)
	admins.POST("/api/users/:userId/password", p.Users.ResetPassword)
	admins.DELETE("/api/users/:userId", p.Users.Delete)
	// The audit of every sandbox call.
	admins.GET("/api/audit", p.Audit.List)
	admins.GET("/api/audit/export", p.Audit.Export)
	// Skills every sandbox sees read-only (K4).
	admins.GET("/skills", p.UI.Skills)
	admins.GET("/mcp", p.UI.MCP)
	admins.GET("/api/skills", p.Skills.List)
	admins.POST("/api/skills", p.Skills.Install)
	admins.POST("/api/skills/examples/:name", p.Skills.InstallExample)
	admins.GET("/api/skills/:name", p.Skills.Get)
	admins.DELETE("/api/skills/:name", p.Skills.Delete)
	// MCP servers the apps' agents may use (N6).
	admins.GET("/api/mcp-servers", p.Tools.ServerList)
	admins.POST("/api/mcp-servers", p.Tools.CreateServer)
	admins.PUT("/api/mcp-servers/:id", p.Tools.UpdateServer)
	admins.DELETE("/api/mcp-servers/:id", p.Tools.DeleteServer)
	admins.POST("/api/mcp-servers/:id/refresh", p.Tools.RefreshServer)

	// The chat API: signed-in callers, or programs with the service key
	// (FLOWBOX_API_KEY), naming their user in customUid.
	// Its errors take OpenAI's shape, for OpenAI's clients (E5).
	chatAuth := api.AuthenticateOrServiceKey(auth, p.Chat.APIKey)
	r.POST("/api/v1/chat/completions", api.OpenAIErrors, chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Completions)
	r.GET("/api/v1/models", api.OpenAIErrors, chatAuth, p.Chat.Models)
	// Stopping a run in progress (E3), by the same callers.
	r.POST("/api/v1/chat/stop", api.OpenAIErrors, chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Stop)
	// Rewinding a chat with its sandbox, redoing, branching (R2, R3):
	// FastGPT's item/delete goes back to before the item's turn.
	r.DELETE("/api/core/chat/item/delete", chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Rewind)
	r.POST("/api/core/chat/item/delete", chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Rewind)
	r.POST("/api/core/chat/item/redo", chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Redo)
	r.POST("/api/core/chat/fork", chatAuth, p.ChatLimit.Middleware(api.ByUser), p.Chat.Fork)

	// Signed-in users (a session with its CSRF token on changes, or an
	// API key). App keys reach only the routes of their app's chats and
	// files; the rest is for accounts.
	users := r.Group("/api", api.Authenticate(auth), api.RequireUser())
	accounts := users.Group("", api.RequireAccount())
	accounts.POST("/logout", p.Sessions.Logout)
	accounts.GET("/me", p.Sessions.Me)
	accounts.POST("/me/password", p.Users.ChangePassword)
	accounts.GET("/keys", p.Users.Keys)
	accounts.POST("/keys", p.Users.CreateKey)
	accounts.DELETE("/keys/:keyId", p.Users.RevokeKey)
	accounts.GET("/apps", p.Apps.List)
	accounts.POST("/apps", p.Apps.Create)
	accounts.GET("/apps/:appId", p.Apps.Get)
	accounts.PUT("/apps/:appId", p.Apps.Update)
	accounts.PATCH("/apps/:appId", p.Apps.Patch)
	accounts.DELETE("/apps/:appId", p.Apps.Delete)
	// A workflow as a file (W6): export (owner and admins), and import of
	// Flowbox's files or FastGPT's workflow JSON as a new app.
	accounts.GET("/apps/:appId/export", p.Apps.Export)
	accounts.POST("/apps/import", p.Apps.Import)
	// An app's versions: publishing its draft, reading and rolling back
	// (owner and admins).
	accounts.GET("/apps/:appId/versions", p.Apps.ListVersions)
	accounts.POST("/apps/:appId/versions", p.Apps.Publish)
	accounts.GET("/apps/:appId/versions/:versionId", p.Apps.GetVersion)
	accounts.POST("/apps/:appId/versions/:versionId/rollback", p.Apps.Rollback)
	// Publishing an app: its keys and share links (owner and admins).
	accounts.GET("/apps/:appId/keys", p.Publish.Keys)
	accounts.POST("/apps/:appId/keys", p.Publish.CreateKey)
	accounts.DELETE("/apps/:appId/keys/:keyId", p.Publish.RevokeKey)
	accounts.GET("/apps/:appId/links", p.Publish.Links)
	accounts.POST("/apps/:appId/links", p.Publish.CreateLink)
	accounts.DELETE("/apps/:appId/links/:linkId", p.Publish.RevokeLink)
	// The audit of the app's sandbox calls (owner and admins).
	accounts.GET("/apps/:appId/audit", p.Audit.AppList)
	accounts.GET("/node-templates", p.Apps.NodeTemplates)
	accounts.GET("/skills", p.Skills.Choices)
	accounts.GET("/tools", p.Tools.Choices)
	accounts.POST("/apps/:appId/nodes/:nodeId/run", p.Chat.RunNode)
	users.GET("/apps/:appId/chats", p.Chats.List)
	users.DELETE("/apps/:appId/chats", p.Chats.Delete)
	users.GET("/apps/:appId/chats/:chatId", p.Chats.Get)
	users.PATCH("/apps/:appId/chats/:chatId", p.Chats.Rename)
	users.POST("/core/ai/sandbox/file", p.Files.File)
	users.POST("/core/ai/sandbox/download", p.Files.Download)
	users.POST("/core/ai/sandbox/status", p.Files.Status)
	users.POST("/core/ai/sandbox/processes", p.Files.Processes)
	users.POST("/core/ai/sandbox/previews", p.Files.Previews)
	// The chat's terminal (L1): a WebSocket, for the chat's owner and
	// admins; its Origin must be this engine's.
	users.GET("/core/ai/sandbox/terminal", p.Terminal.Serve)
	// Files a user gives the agent (K2), kept on the host.
	users.POST("/uploads/:chatId", p.Uploads.Upload)
	users.GET("/uploads/:chatId/files", p.Uploads.List)
	users.DELETE("/uploads/:chatId/files", p.Uploads.Delete)

	// The sandbox service API (A1, docs/SANDBOX_API.md): programs with a
	// personal or app key, or a signed-in session with its CSRF token,
	// each caller at most 100 calls a second. Its OpenAPI document is
	// public.
	r.GET("/api/sandbox/v1/openapi.json", sandboxapi.OpenAPI)
	sb := r.Group("/api/sandbox/v1", api.Authenticate(auth), api.RequireUser(), p.SandboxLimit.Middleware(api.ByUser))
	sb.GET("/tools", p.Sandbox.ToolList)
	sb.GET("/sessions", p.Sandbox.ListSessions)
	sb.POST("/sessions", p.Sandbox.CreateSession)
	sb.GET("/sessions/:id", p.Sandbox.GetSession)
	sb.DELETE("/sessions/:id", p.Sandbox.DeleteSession)
	sb.POST("/sessions/:id/execute", p.Sandbox.Execute)
	sb.POST("/execute", p.Sandbox.ExecuteOnce)
	sb.POST("/warmup", p.Sandbox.Warmup)
	sb.GET("/sessions/:id/files", p.Sandbox.Download)
	sb.GET("/sessions/:id/metrics", p.Sandbox.SessionMetrics)
	sb.POST("/sessions/:id/snapshots", p.Sandbox.CreateSnapshot)
	sb.GET("/sessions/:id/snapshots", p.Sandbox.ListSnapshots)
	sb.DELETE("/sessions/:id/snapshots/:name", p.Sandbox.DeleteSnapshot)
	sb.PUT("/sessions/:id/files", p.Sandbox.Upload)
	sb.GET("/sessions/:id/mcp", p.Sandbox.MCP)
	sb.POST("/sessions/:id/mcp", p.Sandbox.MCP)
	sb.DELETE("/sessions/:id/mcp", p.Sandbox.MCP)

	// Share links: login-free visitors of one app, known by a cookie of
	// the link's (or the link's identity hook). The API is the users' own
	// handlers, with the visitor as the caller.
	shared := r.Group("/share/:linkId")
	shared.GET("", p.Share.Gate(false), p.Share.Home)
	shared.GET("/chat/:chatId", p.Share.Gate(false), p.Share.Chat)
	shared.POST("/switch", p.Share.Gate(false), p.Share.Switch)
	visitors := shared.Group("/api", p.Share.Gate(true))
	shared.POST("/api/v1/chat/completions", api.OpenAIErrors, p.Share.Gate(true), p.ChatLimit.Middleware(api.ByUser), p.Chat.Completions)
	shared.POST("/api/v1/chat/stop", api.OpenAIErrors, p.Share.Gate(true), p.ChatLimit.Middleware(api.ByUser), p.Chat.Stop)
	shared.POST("/api/core/chat/item/delete", p.Share.Gate(true), p.ChatLimit.Middleware(api.ByUser), p.Chat.Rewind)
	shared.POST("/api/core/chat/item/redo", p.Share.Gate(true), p.ChatLimit.Middleware(api.ByUser), p.Chat.Redo)
	visitors.POST("/core/ai/sandbox/file", p.Files.File)
	visitors.POST("/core/ai/sandbox/download", p.Files.Download)
	visitors.POST("/core/ai/sandbox/status", p.Files.Status)
	visitors.POST("/core/ai/sandbox/processes", p.Files.Processes)
	visitors.POST("/core/ai/sandbox/previews", p.Files.Previews)
	visitors.GET("/core/ai/sandbox/terminal", p.Terminal.Serve)
	visitors.POST("/uploads/:chatId", p.Uploads.Upload)
	visitors.GET("/uploads/:chatId/files", p.Uploads.List)
	visitors.DELETE("/uploads/:chatId/files", p.Uploads.Delete)

	// Preview links (L2): the link's token is the credential (and the
	// owner's session, for a link that is not shared); the pages behind
	// it run in an opaque origin (web/preview).
	for _, m := range PreviewMethods {
		r.Handle(m, "/preview/:token", p.Preview.Serve)
		r.Handle(m, "/preview/:token/*path", p.Preview.Serve)
	}

	// Pages for signed-in users; anonymous visitors go to /login.
	pages := r.Group("/", api.Authenticate(auth), api.RequirePage(), api.RequireAccount())
	pages.GET("/", p.UI.AppList)
	pages.GET("/apps/:appId/edit", p.UI.Builder)
	pages.GET("/apps/:appId/flow", p.UI.Flow)
	pages.GET("/apps/:appId/chats", p.UI.ChatList)
	pages.GET("/apps/:appId/chat/:chatId", p.UI.Chat)
	pages.GET("/account", p.UI.Account)
	return r
}

// Routes lists the routes of a handler made by New, as "METHOD /path"
// with the router's parameters (":appId", "*filepath").
func Routes(h http.Handler) []string {
	r, ok := h.(*gin.Engine)
	if !ok {
		return nil
	}
	var out []string
	for _, ri := range r.Routes() {
		out = append(out, ri.Method+" "+ri.Path)
	}
	return out
}

// readyz runs every check with a deadline and reports each one, so an
// operator sees which dependency is down and why.
func readyz(checks []Check) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		defer cancel()
		status := http.StatusOK
		results := gin.H{}
		for _, ch := range checks {
			if err := ch.Fn(ctx); err != nil {
				status = http.StatusServiceUnavailable
				results[ch.Name] = err.Error()
			} else {
				results[ch.Name] = "ok"
			}
		}
		c.JSON(status, gin.H{"ready": status == http.StatusOK, "checks": results})
	}
}

package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/web/api"
)

// Translate is a label in lang, or in English (labels.go).
func Translate(lang, key string) string {
	if s, ok := labels[lang][key]; ok {
		return s
	}
	return labels["en"][key]
}

// SandboxLister lists every sandbox record for the admin page.
type SandboxLister interface {
	List(ctx context.Context) ([]sandbox.Instance, error)
}

// UI serves the pages: the browser app's built pages with what each
// shows as the page's data.
type UI struct {
	Apps      api.AppStore
	Chats     api.ChatStore
	Access    *api.Access
	Sandboxes SandboxLister
	// Limits, when set, are the caps the admin page shows with their use.
	Limits *Limits
	// Pool, when set, gives the warm pool's figures the admin page shows.
	Pool PoolStats
	// Terminal: the chat page offers its terminal (L1) to the chat's
	// owner and admins.
	Terminal bool
	// Rewind: chats' sandboxes have checkpoints, so their owners' pages
	// offer regenerate, edit, redo and branch (R2, R3).
	Rewind bool
}

// Lang is the reader's language: ?lang= (kept in a cookie), the cookie,
// or the browser's; English unless it is Chinese.
func Lang(c *gin.Context) string {
	if l := c.Query("lang"); l == "en" || l == "zh" {
		c.SetCookie("flowbox_lang", l, 365*24*3600, "/", "", false, false)
		return l
	}
	if l, err := c.Cookie("flowbox_lang"); err == nil && (l == "en" || l == "zh") {
		return l
	}
	if strings.HasPrefix(c.GetHeader("Accept-Language"), "zh") {
		return "zh"
	}
	return "en"
}

// Render is RenderStatus with 200.
func (u *UI) Render(c *gin.Context, name, title string, data any) {
	u.RenderStatus(c, http.StatusOK, name, title, data)
}

// RenderStatus answers with the browser app's page name (app/src/pages,
// registry.ts), status and title, with data as the page's data (a page
// saying why something is not there is still a page).
func (u *UI) RenderStatus(c *gin.Context, status int, name, title string, data any) {
	p, _ := api.PrincipalOf(c)
	serveApp(c, status, "pages.html", title, shellData{Page: name, Title: title, Data: data,
		User: shellUser{ID: p.UserID, Name: p.Name, Admin: p.Admin(), LinkID: p.LinkID}})
}

// shellData is what app/src/pages/main.tsx reads from the page's data:
// which page, its title, who is signed in (for the header) and the
// page's own data.
type shellData struct {
	Page  string    `json:"page"`
	Title string    `json:"title"`
	User  shellUser `json:"user"`
	Data  any       `json:"data,omitempty"`
}

// shellUser is the caller as the header shows them: nobody (ID empty), a
// share link's visitor (LinkID set), a user or an admin.
type shellUser struct {
	ID     string `json:"id,omitempty"`
	Name   string `json:"name,omitempty"`
	Admin  bool   `json:"admin,omitempty"`
	LinkID string `json:"linkId,omitempty"`
}

// Login is the sign-in page.
func (u *UI) Login(c *gin.Context) { u.Render(c, "login", Translate(Lang(c), "signIn"), nil) }

// Apps is the app list.
func (u *UI) AppList(c *gin.Context) {
	all, err := u.Apps.List(c.Request.Context(), "")
	if err != nil {
		c.String(http.StatusInternalServerError, "could not list apps; retry later")
		return
	}
	var visible []apps.App
	for _, a := range all {
		if u.Access.CanUseApp(api.Caller(c), a) {
			visible = append(visible, a)
		}
	}
	page := appsPage{Apps: []appRow{}, StarterGraph: json.RawMessage(starterGraph)}
	for _, a := range visible {
		page.Apps = append(page.Apps, appRow{ID: a.ID, Name: a.Name, OwnerID: a.OwnerID, Public: a.Public})
	}
	u.Render(c, "apps", Translate(Lang(c), "apps"), page)
}

// appsPage is the app list's data (app/src/pages/Apps.tsx): the apps the
// caller may use, without their graphs, and the graph a new app starts from.
type appsPage struct {
	Apps         []appRow        `json:"apps"`
	StarterGraph json.RawMessage `json:"starterGraph"`
}

type appRow struct {
	ID      string `json:"appId"`
	Name    string `json:"name"`
	OwnerID string `json:"ownerId"`
	Public  bool   `json:"public"`
}

// starterGraph is a new app's graph: the tool-call node on the offline
// model, with the sandbox switch off until the builder turns it on.
const starterGraph = `{"nodes":[{"nodeId":"start","type":"workflowStart","name":"Start"},` +
	`{"nodeId":"agent","type":"tools","name":"Agent","inputs":{"model":"` + llmDefault + `","useAgentSandbox":false,` +
	`"systemPrompt":"You are a helpful assistant."}}],"edges":[{"source":"start","target":"agent"}]}`

func (u *UI) app(c *gin.Context) (apps.App, bool) {
	a, err := u.Apps.Get(c.Request.Context(), c.Param("appId"))
	if err != nil || !u.Access.CanUseApp(api.Caller(c), a) {
		c.String(http.StatusNotFound, "no such app")
		return apps.App{}, false
	}
	return a, true
}

// Builder is an app's Publish page: its API keys and share links (the
// graph is edited on the canvas, UI.Flow).
func (u *UI) Builder(c *gin.Context) {
	a, ok := u.app(c)
	if !ok {
		return
	}
	if !u.Access.CanEditApp(api.Caller(c), a) {
		c.String(http.StatusForbidden, "only the app's owner and admins may edit it")
		return
	}
	u.Render(c, "builder", a.Name, builderPage{AppID: a.ID, Name: a.Name})
}

// builderPage is the Publish page's data (app/src/pages/publish): the
// page reads the app's keys and links from the API.
type builderPage struct {
	AppID string `json:"appId"`
	Name  string `json:"name"`
}

const llmDefault = "flowbox-demo"

// ChatList lists the app's chats the caller may see.
func (u *UI) ChatList(c *gin.Context) {
	a, ok := u.app(c)
	if !ok {
		return
	}
	p, _ := api.PrincipalOf(c)
	user := p.UserID
	if u.Access.ManagesChats(api.Caller(c), a) {
		user = ""
	}
	chats, _ := u.Chats.List(c.Request.Context(), a.ID, user, 200)
	u.Render(c, "chats", a.Name, ChatsPage(a, chats, "/apps/"+a.ID, p.UserID, false))
}

// ChatsPage is the data of a chat list (app/src/pages/Chats.tsx): the
// signed-in users' at base /apps/{id}, or a share link's visitor's at the
// link's URL. Chats of users other than me link with their userId.
func ChatsPage(a apps.App, chats []history.Chat, base, me string, visitor bool) any {
	page := chatsPage{AppID: a.ID, Name: a.Name, Base: base, Me: me, Visitor: visitor, Chats: []chatRow{}}
	for _, ch := range chats {
		page.Chats = append(page.Chats, chatRow{ID: ch.ID, UserID: ch.UserID, Title: ch.Title, UpdatedAt: ch.UpdatedAt})
	}
	return page
}

type chatsPage struct {
	AppID   string    `json:"appId"`
	Name    string    `json:"name"`
	Base    string    `json:"base"`
	Me      string    `json:"me"`
	Visitor bool      `json:"visitor"`
	Chats   []chatRow `json:"chats"`
}

type chatRow struct {
	ID        string    `json:"chatId"`
	UserID    string    `json:"userId"`
	Title     string    `json:"title"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Admin lists every sandbox with its state, the caps with their use and
// the warm pool's figures.
func (u *UI) Admin(c *gin.Context) {
	var list []sandbox.Instance
	if u.Sandboxes != nil {
		var err error
		if list, err = u.Sandboxes.List(c.Request.Context()); err != nil {
			c.String(http.StatusInternalServerError, "could not list sandboxes; retry later")
			return
		}
	}
	rows := make([]sandboxRow, len(list))
	for i, s := range list {
		rows[i] = sandboxRow{Instance: s, LastActive: s.LastActiveAt.Format("2006-01-02 15:04:05")}
	}
	u.Render(c, "admin", Translate(Lang(c), "sandboxes"), adminPage{Sandboxes: rows, Limits: u.Limits.view(c.Request.Context(), list), Pool: u.Pool.view(c.Request.Context())})
}

// adminPage is the admin page's data: every sandbox record, the caps with
// their use (nil: not configured here) and the warm pool (nil: unknown).
type adminPage struct {
	Sandboxes []sandboxRow `json:"sandboxes"`
	Limits    *limitsView  `json:"limits,omitempty"`
	Pool      *poolView    `json:"pool,omitempty"`
}

// sandboxRow is a sandbox record with its last activity as the engine
// writes times on its pages.
type sandboxRow struct {
	sandbox.Instance
	LastActive string `json:"lastActive"`
}

// UserList is the admins' user management. The browser app draws the list
// from /admin/api/users and redraws it after each change, so the page and
// the API show the same accounts.
func (u *UI) UserList(c *gin.Context) {
	u.Render(c, "users", Translate(Lang(c), "users"), nil)
}

// Account is the caller's own page: their password and their API keys,
// listed by the browser app from /api/keys. A new key's secret is shown
// from the answer that made it, never by this page.
func (u *UI) Account(c *gin.Context) {
	u.Render(c, "account", Translate(Lang(c), "account"), nil)
}

// Audit is the admins' audit page: the filters, a page of records and
// the next, drawn by the browser app from /admin/api/audit.
func (u *UI) Audit(c *gin.Context) {
	u.Render(c, "audit", Translate(Lang(c), "audit"), auditPage{Statuses: audit.Statuses})
}

// auditPage is the audit page's data: the statuses its filter offers.
type auditPage struct {
	Statuses []audit.Status `json:"statuses"`
}

// Skills is the admin page of the skills: the installed ones with their
// versions, the invalid directories and why, and the install form, drawn
// by the browser app from /admin/api/skills.
func (u *UI) Skills(c *gin.Context) {
	u.Render(c, "skills", Translate(Lang(c), "skills"), nil)
}

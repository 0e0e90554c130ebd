package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/auth"
	"github.com/flowbox/flowbox/chats/history"
	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/code"
	"github.com/flowbox/flowbox/nodes/httprequest"
	"github.com/flowbox/flowbox/nodes/readfiles"
	"github.com/flowbox/flowbox/nodes/runapp"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/web/account"
	"github.com/flowbox/flowbox/web/admin"
	"github.com/flowbox/flowbox/web/api"
	"github.com/flowbox/flowbox/web/chat"
	"github.com/flowbox/flowbox/web/files"
	webpreview "github.com/flowbox/flowbox/web/preview"
	"github.com/flowbox/flowbox/web/sandboxapi"
	"github.com/flowbox/flowbox/web/terminal"
	"github.com/flowbox/flowbox/web/ui"
	"github.com/flowbox/flowbox/web/visitor"
)

// product builds the user-facing part: the workflow engine with its
// tool-call node, accounts, the chat and file APIs and the pages.
func (e *Engine) product(ctx context.Context) (*web.Product, error) {
	cfg, svc, log := e.cfg, e.Services, e.log
	templates, err := nodes.LoadTemplates()
	if err != nil {
		return nil, fmt.Errorf("load node templates: %w", err)
	}
	models := &llm.Resolver{Endpoint: llm.Config{BaseURL: cfg.Product.LLMBaseURL, APIKey: cfg.Product.LLMAPIKey}}
	env, err := toolcall.Probe(ctx, svc.Provider, cfg.Sandbox.Network)
	if err != nil {
		log.Warn("could not probe the sandbox; the prompt will not list its tools", "err", err)
		env = toolcall.Environment{Network: cfg.Sandbox.Network, Unsafe: svc.Provider.Capabilities().Unsafe}
	}
	env.Egress = cfg.Sandbox.Egress
	e.Tools = newRegistry(svc, func(ctx context.Context, scope sandbox.Scope) error {
		return e.Workers.DeleteChats(ctx, []sandbox.Scope{scope})
	})
	types := nodes.Builtins(models)
	chats := history.New(svc.DB)
	// Chats stored before chat ids were scoped per app and user move to
	// their keys before anything reads them.
	if n, err := chats.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("move the stored chats to keys scoped per app and user (the next start goes on where this one stopped): %w", err)
	} else if n > 0 {
		log.Info("moved stored chats to keys scoped per app and user", "chats", n)
	}
	approvals := svc.Approvals
	types["tools"] = toolcall.New(toolcall.Config{Models: models, Tools: e.Tools, Env: env,
		Approvals: approvals, Limits: svc.Policy.ToolCallLimits, History: chats,
		Workspace: promptWorkspace{svc.Workspace}})
	types[code.Type] = code.New(code.Config{Sandboxes: svc.Manager,
		SandboxOn: func(ctx context.Context, appID string) (bool, error) {
			a, err := e.Apps.Get(ctx, appID)
			if errors.Is(err, apps.ErrNotFound) {
				return false, nil
			}
			return err == nil && code.SandboxOn(&a.Graph), err
		},
		Discard: func(ctx context.Context, scope sandbox.Scope) error {
			return e.Workers.DeleteChats(ctx, []sandbox.Scope{scope})
		}})
	types[httprequest.Type] = httprequest.New(httprequest.Config{Outbound: cfg.Trust.OutboundAllow})
	types[readfiles.Type] = readfiles.New(readfiles.Config{Uploads: svc.Workspace})
	engine := &nodes.Engine{Templates: templates, Types: types}

	accounts := auth.New(svc.DB)
	if e.passwordCost > 0 {
		accounts.Cost = e.passwordCost
	}
	password := cfg.Product.AdminPassword
	if password == "" {
		// First run without a configured password: make one and say it
		// once. An existing admin keeps the password it has.
		if _, err := accounts.User(ctx, "u:"+cfg.Product.AdminUser); errors.Is(err, auth.ErrBadCredentials) {
			password = auth.RandomPassword()
			log.Warn("first run: created the admin account; sign in and keep this password (it is not shown again), or set FLOWBOX_ADMIN_PASSWORD",
				"user", cfg.Product.AdminUser, "password", password)
		}
	}
	if password != "" {
		if err := accounts.EnsureAdmin(ctx, cfg.Product.AdminUser, password); err != nil {
			return nil, fmt.Errorf("create the first admin %q: %w", cfg.Product.AdminUser, err)
		}
	}
	appStore := apps.New(svc.DB, templates)
	if err := appStore.EnsureDemo(ctx, "u:"+cfg.Product.AdminUser, time.Now()); err != nil {
		return nil, fmt.Errorf("create the demo app: %w", err)
	}
	links := share.New(svc.DB)
	links.Hook = share.HookClient(cfg.Trust.OutboundAllow)
	access := &api.Access{Apps: appStore, Chats: chats}
	// The app-call node runs other apps on this engine, those the calling
	// app's owner may use.
	types["runApp"] = runapp.New(runapp.Config{Apps: appStore, Engine: engine, Access: ownerAccess(accounts, access)})
	// Every door that writes a chat's files checks the data disk and the
	// chat quota first (T4).
	storage := files.Storage{Disk: svc.DataDisk, Quota: svc.Workspace}
	publish := &account.Publishing{Apps: appStore, Access: access, KeyStore: accounts, LinkStore: links}
	runs := runLimits(svc, cfg.Caps, log)
	// Stop requests reach the runs of every engine process on this Redis
	// (E3).
	stops := &chat.Stops{Redis: svc.Redis, Namespace: svc.DB.Name(), Log: log}
	listen, stopListening := context.WithCancel(context.Background())
	go stops.Listen(listen)
	svc.closers = append(svc.closers, stopListening) // before Redis closes
	ui := &ui.UI{Apps: appStore, Chats: chats, Access: access, Sandboxes: providerRecords{svc}, Pool: svc.Manager.PoolStats, Terminal: cfg.Product.Terminal,
		Limits: &ui.Limits{Sandboxes: sandboxCaps(cfg.Caps, svc.Owners), Runs: runs}}
	e.Accounts, e.Apps, e.Chats = accounts, appStore, chats
	sandboxAPI := &sandboxapi.API{Tools: e.Tools, Sessions: svc.Sessions, Sandboxes: svc.Manager, Apps: appStore, Access: access,
		ServiceTools: cfg.Trust.ServiceTools,
		Limits:       sandbox.Limits{CPUCount: cfg.Sandbox.CPUs, MemoryMiB: cfg.Sandbox.MemoryMiB, Pids: cfg.Sandbox.Pids},
		Network:      cfg.Sandbox.Network, Egress: cfg.Sandbox.Egress, MaxUpload: cfg.Files.MaxAPIUploadMiB << 20, Storage: storage, Metrics: svc.Manager, Now: time.Now, Log: log}
	chatHandler := &chat.Handler{Engine: engine, Apps: appStore, AppList: appStore, History: chats, Deleter: e.Workers, APIKey: cfg.Product.APIKey,
		Versions:   appStore,
		DefaultApp: apps.DemoAppID, Access: access, Runs: links, RunLimits: runs, Stops: stops, Redactor: svc.Policy.RedactorFor, Now: time.Now, Log: log,
		Approvals: approvals, ApprovalTimeout: cfg.Product.ApprovalTimeout, Audit: svc.AuditWriter, Uploads: svc.Workspace}
	if svc.Manager.Provider().Capabilities().Checkpoints {
		chatHandler.Checkpoints, chatHandler.Rewinds = svc.Manager, chats
		chatHandler.CheckpointKeep, chatHandler.CheckpointMaxAge = cfg.Sandbox.CheckpointKeep, cfg.Sandbox.CheckpointMaxAge
		sandboxAPI.Snapshots = svc.Manager
		ui.Rewind = true
	}
	return &web.Product{
		Auth: accounts,
		Sessions: &account.Sessions{Accounts: accounts, Secure: cfg.Product.SecureCookies, TTL: accounts.SessionTTL,
			AccountLimit: &api.RateLimiter{Now: e.limitClock}, AccountBurst: cfg.Trust.LoginAccountBurst},
		Chat: chatHandler,
		Apps: &account.Apps{Apps: appStore, Access: access, Deleter: e.Workers, Publishing: publish, Templates: templates,
			Versions: appStore, MaxIdleMinutes: cfg.Sandbox.AppIdleMaxMinutes,
			Retention:  chatHandler,
			CheckGraph: func(g nodes.Graph) []nodes.Problem { return checkGraph(engine, g, svc.Policy.Check) }, Now: time.Now},
		Chats: &chat.Chats{Apps: appStore, Chats: chats, Access: access, Deleter: e.Workers, Sandboxes: svc.Manager},
		Users: &account.Users{Accounts: accounts, Apps: appStore, Chats: chats, Deleter: e.Workers, Sessions: svc.Sessions,
			Publishing: appTransfer{keys: accounts, links: links, owners: svc.Owners}, Now: time.Now},
		Files: &files.Handler{Sandboxes: svc.Manager, Access: access, Storage: storage, Procs: svc.Manager, Links: svc.Previews},
		Usage: svc.Sampler,
		Terminal: &terminal.Handler{Sandboxes: svc.Manager, Access: access, Apps: appStore, Transcripts: svc.Policy, Off: !cfg.Product.Terminal, Log: log,
			Ended: func(r terminal.Record) { svc.AuditWriter.Write(context.Background(), r.Audit()) }},
		Preview: &webpreview.Handler{Links: svc.Previews, Ports: svc.Manager, Files: svc.Manager, Access: access, Auth: accounts, Log: log},
		Uploads: &files.Uploads{Files: svc.Workspace, Chats: chats, Access: access, Now: time.Now, Disk: svc.DataDisk},
		Skills:  &admin.Skills{Catalog: svc.Skills, MaxZip: cfg.Files.MaxSkillZipMiB << 20},
		Sandbox: sandboxAPI,
		Tools:   &admin.Tools{Servers: svc.MCPServers, Client: svc.MCP, Exec: execToolInfo(svc.ExecTools)},
		UI:      ui,
		Admin:   e.Workers,
		Publish: publish,
		Audit:   &admin.Audit{Records: svc.Audit, Apps: appStore, Access: access, Pending: svc.AuditWriter.Flush},
		Share: &visitor.Handler{Links: links, Apps: appStore, Chats: chats, UI: ui, Secure: cfg.Product.SecureCookies,
			Limits: &api.RateLimiter{}, HookLimits: &api.RateLimiter{Now: e.limitClock}, Creators: accounts, Now: time.Now, Log: log},
		LoginLimit: &api.RateLimiter{Every: 6 * time.Second, Burst: cfg.Product.LoginBurst, Now: e.limitClock},
		ChatLimit:  &api.RateLimiter{Every: 100 * time.Millisecond, Burst: 60},
		// 100 calls a second per caller, 200 at once.
		SandboxLimit: &api.RateLimiter{Every: 10 * time.Millisecond, Burst: 200},
	}, nil
}

// providerRecords lists the records of the provider in use, for the admin
// page.
type providerRecords struct{ svc *Services }

func (r providerRecords) List(ctx context.Context) ([]sandbox.Instance, error) {
	return r.svc.Store.ByProvider(ctx, r.svc.Provider.Name())
}

// checkGraph says everything wrong with a graph about to be saved: the
// engine's refusals (W3), then its command policies'.
func checkGraph(e *nodes.Engine, g nodes.Graph, policy func([]byte) error) []nodes.Problem {
	var problems []nodes.Problem
	var invalid *nodes.ValidationError
	if err := e.Check(&g); errors.As(err, &invalid) {
		problems = invalid.Problems
	} else if err != nil {
		problems = append(problems, nodes.Problem{Message: err.Error()})
	}
	return append(problems, apps.CheckPolicies(g, policy)...)
}

// ownerAccess decides which apps an app may call (runapp.Config.Access):
// those its owner may use, by the chat API's rules; the owner's role is
// read afresh, and a disabled owner is no admin.
func ownerAccess(accounts *auth.Store, access *api.Access) func(ctx context.Context, caller, called apps.App) (bool, bool, error) {
	return func(ctx context.Context, caller, called apps.App) (bool, bool, error) {
		owner := auth.Principal{UserID: caller.OwnerID}
		u, err := accounts.User(ctx, caller.OwnerID)
		switch {
		case err == nil && !u.Disabled:
			owner.Role = u.Role
		case err != nil && !errors.Is(err, auth.ErrBadCredentials):
			return false, false, fmt.Errorf("read the account of app %s's owner: %w", caller.ID, err)
		}
		return access.CanUseApp(owner, called), access.CanEditApp(owner, called), nil
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/mongo"
	corev1 "k8s.io/api/core/v1"

	"github.com/flowbox/flowbox/apps"
	"github.com/flowbox/flowbox/apps/share"
	"github.com/flowbox/flowbox/chats/approval"
	"github.com/flowbox/flowbox/chats/preview"
	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/internal/datadisk"
	"github.com/flowbox/flowbox/internal/mongodb"
	"github.com/flowbox/flowbox/internal/outbound"
	"github.com/flowbox/flowbox/internal/redisconn"
	"github.com/flowbox/flowbox/registry/exectool"
	"github.com/flowbox/flowbox/registry/mcptool"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/activity"
	"github.com/flowbox/flowbox/sandbox/audit"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/host"
	"github.com/flowbox/flowbox/sandbox/kubernetes"
	"github.com/flowbox/flowbox/sandbox/mongostore"
	"github.com/flowbox/flowbox/sandbox/policy"
	"github.com/flowbox/flowbox/sandbox/sessions"
	"github.com/flowbox/flowbox/sandbox/skills"
	"github.com/flowbox/flowbox/sandbox/workspace"
	"github.com/flowbox/flowbox/web"
	"github.com/flowbox/flowbox/workers"
)

// Services are the long-lived components of one engine process, below the
// product: what engine worker and engine shell need too.
type Services struct {
	// poolRefill is the workers' RequestPoolRefill, once they exist.
	poolRefill atomic.Pointer[func()]

	DB       *mongo.Database
	Redis    *redis.Client
	Store    *mongostore.Store
	Provider sandbox.Provider
	Manager  *sandbox.Manager
	// Audit keeps the record of every sandbox call; AuditWriter writes
	// them off the commands' path; AuditMetrics counts the commands by
	// result (registered by New).
	Audit        *audit.Store
	AuditWriter  *audit.Writer
	AuditMetrics *audit.Metrics
	// Alerter sends the audit's alerts (nil: no webhook) through Alerts
	// to the workers; AlertMetrics counts them (registered by New).
	Alerter      *audit.Alerter
	Alerts       *workers.AlertQueue
	AlertMetrics *workers.AlertMetrics
	// Policy is the shell policy: the operator's command rules, limits
	// and redaction, tightened per app.
	Policy *policy.Resolver
	// Approvals keeps the runs paused for a person's approval.
	Approvals *approval.Store
	// Previews keeps the chats' preview links (L2).
	Previews *preview.Store
	// Sampler reads the running sandboxes' metrics while someone looks
	// (L4).
	Sampler *sandbox.Sampler
	// Workspace keeps the chats' uploaded and intermediate files, Skills
	// the installed skills, on the engine's host (K1–K4).
	Workspace *workspace.Store
	Skills    *skills.Catalog
	// ExecTools are the operator's exec tools; MCPServers the MCP servers
	// admins registered and MCP the client that lists and calls their
	// tools (N6, X1–X4).
	ExecTools  []*exectool.Tool
	MCPServers *mcptool.Store
	MCP        *mcptool.Client
	// Sessions are the sandbox service API's sessions (A1).
	Sessions *sessions.Store
	// Owners finds the account a user's sandboxes and runs count against
	// under the owner caps; an app's transfer tells it (Moved).
	Owners *sandbox.Owners
	// DataDisk refuses writes and new sandboxes before the engine's data
	// disk is full (FLOWBOX_DATA_DISK_MIN_FREE).
	DataDisk *datadisk.Guard
	// MongoDesc and RedisDesc say, for the logs, which database and Redis
	// are in use (no secrets).
	MongoDesc, RedisDesc string

	redisOpt asynq.RedisClientOpt // the same Redis, for the queue dashboard
	closers  []func()
}

// Close stops everything in reverse order of start.
func (s *Services) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// Start brings up the database, Redis, the sandbox provider and the
// manager, whose exec chain the middleware wraps (outermost first).
// Anything started before a failure is stopped again.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger, middleware ...sandbox.Middleware) (_ *Services, err error) {
	s := &Services{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	db, closeDB, desc, err := OpenMongo(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	s.DB, s.MongoDesc = db, desc
	s.closers = append(s.closers, closeDB)

	if cfg.RedisAddr == "" {
		emb, err := redisconn.StartEmbedded()
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, emb.Close)
		s.RedisDesc = "embedded at " + emb.Addr()
		// Only this process knows the password: a sandbox or any other
		// local process that reaches the port gets NOAUTH (T1).
		cfg.RedisAddr, cfg.RedisPassword = emb.Addr(), emb.Password()
	} else {
		s.RedisDesc = cfg.RedisAddr
	}
	s.Redis, err = redisconn.Connect(ctx, cfg.RedisAddr, cfg.RedisPassword, cfg.RedisDB)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.Redis.Close() })
	s.redisOpt = asynq.RedisClientOpt{Addr: cfg.RedisAddr, Password: cfg.RedisPassword, DB: cfg.RedisDB}

	store, err := openStore(ctx, db, s.Redis, log)
	if err != nil {
		return nil, err
	}
	s.Store = store
	// The audit is the outermost link of the chain: it sees what the
	// caller asked and got, the refusals of the links below included.
	if s.Audit, err = audit.New(ctx, db); err != nil {
		return nil, fmt.Errorf("open the audit records: %w", err)
	}
	s.AuditMetrics = audit.NewMetrics()
	s.AuditWriter = audit.NewWriter(audit.WriterConfig{Store: s.Audit, Metrics: s.AuditMetrics, Logger: log})
	s.closers = append(s.closers, s.AuditWriter.Close) // before the database closes
	s.Approvals = approval.New(db)
	s.Previews = preview.New(db)
	startAlerts(s, cfg.Alerts, log)
	var proxy *egress.Proxy
	if len(cfg.Sandbox.Egress) > 0 || cfg.Sandbox.Network {
		// The only way out of a sandbox: to its allowlist, or to any
		// public host with the network. Every connection is logged by the
		// proxy (message "egress") and recorded in the audit.
		proxy = egress.New(egress.Config{Logger: log, Audit: egressAudit(s, log)})
		s.closers = append(s.closers, proxy.Shutdown)
	}
	s.Provider, err = chooseProvider(ctx, cfg, proxy, log)
	if err != nil {
		return nil, err
	}
	if c, ok := s.Provider.(interface{ Close() error }); ok {
		s.closers = append(s.closers, func() { c.Close() })
	}
	// Then the shell policy: a refused command never runs, and what runs
	// has its output redacted before anything else sees it.
	appsReader := apps.New(db, nil)
	if s.Policy, err = policy.LoadResolver(cfg.Sandbox.PolicyFile, appsReader.PolicyDocument); err != nil {
		return nil, err
	}
	middleware = append(append([]sandbox.Middleware{audit.Middleware(audit.Config{Records: s.AuditWriter, Metrics: s.AuditMetrics,
		Redact: s.Policy.RedactCommand, OnRecord: s.Alerter.Observe})}, s.Policy.Middleware()...), middleware...)
	s.DataDisk = &datadisk.Guard{Paths: []string{cfg.DataDir, cfg.Files.Dir, cfg.Sandbox.Root}, Min: cfg.DataDiskMinFree}
	// Where the provider keeps checkpoints, the chats' files are kept in
	// the same pool, so that a rewind brings them back too.
	var chatsPool workspace.Pool
	if s.Provider.Capabilities().Checkpoints {
		if chatsPool, err = openChatsPool(cfg.Sandbox); err != nil {
			return nil, err
		}
	}
	if s.Workspace, s.Skills, err = openWorkspace(cfg.Files, s.Provider.Name(), chatsPool, log); err != nil {
		return nil, err
	}
	var fileCheckpoints sandbox.FileCheckpoints
	if chatsPool != nil {
		fileCheckpoints = s.Workspace
	}
	// Before anything names a sandbox: the chats created under S1's
	// ambiguous IDs keep theirs (sandbox.IDFor).
	if err := keepLegacyIDs(ctx, store, s.Provider.Name(), s.Workspace); err != nil {
		return nil, err
	}
	if s.Sessions, err = sessions.New(ctx, db); err != nil {
		return nil, err
	}
	s.Owners = &sandbox.Owners{AppOwner: appsReader.OwnerOf, LinkApp: share.New(db).AppOf}
	s.Manager, err = sandbox.New(sandbox.Config{
		Provider: s.Provider,
		// The chat's uploads and intermediate files, and the skills.
		MountsFor: s.mountsFor,
		Store:     store,
		Limits:    sandbox.Limits{CPUCount: cfg.Sandbox.CPUs, MemoryMiB: cfg.Sandbox.MemoryMiB, Pids: cfg.Sandbox.Pids, DiskGiB: cfg.Sandbox.DiskGiB},
		Network:   cfg.Sandbox.Network,
		Egress:    cfg.Sandbox.Egress,
		// An app's policy may narrow the operator's egress allowlist, and
		// a service API session its app's.
		EgressFor: s.egressFor,
		// ... and lower its sandboxes' memory, CPUs and processes.
		LimitsFor: s.limitsFor,
		Caps:      sandboxCaps(cfg.Caps, s.Owners),
		// The apps' startup and shutdown commands, read as the sandboxes
		// need them (the workers' stops and deletions included).
		Lifecycle:  apps.Lifecycle{Apps: appsReader},
		Middleware: middleware,
		// A rewind or fork takes the chat's files with its sandbox.
		Files: fileCheckpoints,
		// Started sandboxes of the operator's shape wait for new chats;
		// the workers refill the pool, asked by each adoption.
		Pool: sandbox.PoolConfig{
			Size: cfg.Sandbox.PoolSize, Store: store,
			Workspace: s.Workspace, SharedMounts: []sandbox.Mount{s.skillsMount()},
			Refill: s.requestPoolRefill,
		},
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	// Before the database closes: the record refreshes still running.
	s.closers = append(s.closers, s.Manager.Close)
	s.Sampler = &sandbox.Sampler{Manager: s.Manager, List: func(ctx context.Context) ([]sandbox.Instance, error) {
		return store.ByProvider(ctx, s.Provider.Name())
	}}
	s.closers = append(s.closers, s.Sampler.Close)
	if s.ExecTools, err = exectool.Load(cfg.Files.ExecTools...); err != nil {
		return nil, fmt.Errorf("load the exec tools (FLOWBOX_EXEC_TOOLS, engine serve -tools): %w", err)
	}
	var inSandbox []string
	for _, t := range s.ExecTools {
		if t.Defaulted() {
			inSandbox = append(inSandbox, t.Name())
		}
	}
	if len(inSandbox) > 0 {
		log.Info("exec tools whose declaration names no runIn run in the chat's sandbox (add \"runIn\": \"host\" to run one on this machine)", "tools", inSandbox)
	}
	s.MCPServers = mcptool.NewStore(db)
	if s.MCP, err = mcptool.New(mcptool.Config{Servers: s.MCPServers, Sandbox: s.Manager, Logger: log,
		// Admins type the servers' addresses: the engine's own networks
		// only where the operator allows them. Each redirect hop is
		// dialled through the same check.
		HTTPClient: cfg.Trust.OutboundAllow.Client(outbound.Options{Redirects: 10})}); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenMongo connects to the configured MongoDB, or starts the embedded
// database under the data directory when none is configured. The returned
// function disconnects and stops what it started.
func OpenMongo(ctx context.Context, cfg config.Config, log *slog.Logger) (*mongo.Database, func(), string, error) {
	uri, desc := cfg.MongoURI, mongodb.Redact(cfg.MongoURI)
	var closers []func()
	if uri == "" {
		dir := filepath.Join(cfg.DataDir, "mongodb")
		emb, err := mongodb.StartEmbedded(ctx, mongodb.Config{DataDir: dir, Logger: log})
		if err != nil {
			return nil, nil, "", err
		}
		closers = append(closers, emb.Close)
		uri, desc = emb.URI(), "embedded (FerretDB, SQLite) in "+dir
	}
	client, db, err := mongodb.Connect(ctx, uri, cfg.MongoDB)
	if err != nil {
		for _, c := range closers {
			c()
		}
		return nil, nil, "", err
	}
	closeAll := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	return db, closeAll, desc, nil
}

// openStore opens the sandbox records. On FerretDB, which cannot use the
// {status, lastActiveAt} index, the stop scan's candidates come from an
// activity index in Redis instead (see sandbox/activity); on MongoDB the
// index serves them.
func openStore(ctx context.Context, db *mongo.Database, rdb *redis.Client, log *slog.Logger) (*mongostore.Store, error) {
	ferret, err := mongodb.IsFerretDB(ctx, db.Client())
	if err != nil {
		return nil, fmt.Errorf("open sandbox_instances: %w", err)
	}
	var opts []mongostore.Option
	if ferret {
		opts = append(opts, mongostore.WithActivity(activity.New(rdb, db.Name())))
	}
	store, err := mongostore.New(ctx, db, log, opts...)
	if err != nil {
		return nil, fmt.Errorf("open sandbox_instances: %w", err)
	}
	return store, nil
}

// checkpointPool is the directory of the checkpoint pool the bwrap and
// Docker providers keep new sandboxes' files in, ready (on btrfs), or "" when
// checkpoints are off (FLOWBOX_CHECKPOINTS).
func checkpointPool(sc config.Sandbox, log *slog.Logger) (string, error) {
	if sc.Checkpoints == "off" {
		return "", nil
	}
	if err := checkpoint.Usable(); err != nil {
		if sc.Checkpoints == "auto" {
			log.Info("checkpoints are off: the checkpoint pool cannot be made here", "why", err)
			return "", nil
		}
		return "", fmt.Errorf("FLOWBOX_CHECKPOINTS=on: %w", err)
	}
	img := strings.TrimSuffix(sc.CheckpointPool, "/") + ".img"
	if err := checkpoint.MountImage(img, sc.CheckpointPool, sc.CheckpointPoolGiB<<30); err != nil {
		if sc.Checkpoints == "auto" {
			log.Warn("checkpoints are off: the checkpoint pool could not be mounted", "err", err)
			return "", nil
		}
		return "", fmt.Errorf("FLOWBOX_CHECKPOINTS=on: %w", err)
	}
	return sc.CheckpointPool, nil
}

// chooseProvider builds the configured provider and checks that it can
// run here. "auto" takes bwrap, then docker; it never picks host.
func chooseProvider(ctx context.Context, cfg config.Config, proxy *egress.Proxy, log *slog.Logger) (sandbox.Provider, error) {
	sc := cfg.Sandbox
	// The daemon may see the chats' files elsewhere (an engine in a
	// container).
	var daemonPaths []docker.PathMap
	if sc.DockerDaemonFilesDir != "" {
		daemonPaths = []docker.PathMap{{Engine: cfg.Files.Dir, Daemon: sc.DockerDaemonFilesDir}}
	}
	build := map[string]func() (sandbox.Provider, error){
		"bwrap": func() (sandbox.Provider, error) {
			agentBin := sc.BwrapAgentBinary
			if agentBin == "none" {
				agentBin = ""
			}
			pool, err := checkpointPool(sc, log)
			if err != nil {
				return nil, err
			}
			// The agent binary forwards egress too, and starts faster than
			// the engine (the default forwarder).
			return bwrap.New(bwrap.Config{Root: filepath.Join(sc.Root, "bwrap"), Egress: proxy, AgentBinary: agentBin, ForwarderBinary: agentBin, Logger: log,
				CheckpointPool: pool})
		},
		"docker": func() (sandbox.Provider, error) {
			var pool string
			if d := sc.DockerDaemonRoot; d != "" && filepath.Clean(d) != filepath.Clean(sc.DockerRoot) {
				// The daemon would not see the files bound from the pool.
				if sc.Checkpoints == "on" {
					return nil, errors.New("FLOWBOX_CHECKPOINTS=on: checkpoints on Docker need the engine on the daemon's host (FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT is set)")
				}
			} else {
				var err error
				if pool, err = checkpointPool(sc, log); err != nil {
					return nil, err
				}
			}
			return docker.New(docker.Config{Host: sc.DockerHost, Image: sc.DockerImage, Shell: sc.DockerShell, Runtime: sc.DockerRuntime,
				WorkspaceRoot: sc.DockerRoot, DaemonWorkspaceRoot: sc.DockerDaemonRoot, AgentBinary: sc.DockerAgentBinary, DaemonAgentBinary: sc.DockerDaemonAgentBinary, Logger: log, Egress: proxy,
				DaemonPaths: daemonPaths, CheckpointPool: pool})
		},
		"kubernetes": func() (sandbox.Provider, error) {
			k := sc.Kube
			return kubernetes.New(kubernetes.Config{Kubeconfig: k.Config, Namespace: k.Namespace, Image: k.Image, AgentImage: k.AgentImage,
				PullPolicy: corev1.PullPolicy(k.PullPolicy), Shell: k.Shell, StorageClass: k.StorageClass, RuntimeClass: k.RuntimeClass, HostUsers: k.HostUsers,
				DefaultLimits: sandbox.Limits{DiskGiB: sc.DiskGiB},
				FilesRoot:     cfg.Files.Dir, FilesClaim: k.FilesClaim, FilesHostPath: k.FilesHostPath, Logger: log})
		},
		"host": func() (sandbox.Provider, error) {
			return host.New(host.Config{Root: filepath.Join(sc.Root, "host"), AllowUnsafe: sc.AllowUnsafeHost})
		},
	}
	names := []string{sc.Provider}
	if sc.Provider == "auto" {
		names = []string{"bwrap", "docker"}
	}
	var reasons []error
	for _, name := range names {
		p, err := build[name]()
		if err == nil {
			err = p.Fingerprint(ctx)
		}
		if err == nil {
			return p, nil
		}
		reasons = append(reasons, fmt.Errorf("%s: %w", name, err))
		log.Warn("sandbox provider cannot run here", "provider", name, "reason", err)
	}
	return nil, fmt.Errorf("no sandbox provider can run on this machine (FLOWBOX_SANDBOX_PROVIDER=%s): %w", sc.Provider, errors.Join(reasons...))
}

func (s *Services) readyChecks() []web.Check {
	return []web.Check{
		{Name: "mongodb", Fn: func(ctx context.Context) error { return s.DB.Client().Ping(ctx, nil) }},
		{Name: "redis", Fn: func(ctx context.Context) error { return s.Redis.Ping(ctx).Err() }},
		{Name: "sandbox", Fn: s.Provider.Fingerprint},
		{Name: "dataDisk", Fn: s.DataDisk.Ready},
	}
}

// limitsFor is an app's limits, lowered by a service API session's own.
func (s *Services) limitsFor(ctx context.Context, scope sandbox.Scope) sandbox.Limits {
	return s.Sessions.Limits(ctx, scope, s.Policy.LimitsFor(ctx, scope))
}

// egressFor is an app's egress allowlist, narrowed by a service API
// session's.
func (s *Services) egressFor(ctx context.Context, scope sandbox.Scope) []string {
	return s.Sessions.Egress(ctx, scope, s.Policy.EgressFor(ctx, scope))
}

// Package config reads the engine's configuration from FLOWBOX_*
// environment variables. Every setting has a default that runs the whole
// product on one machine with nothing installed but the engine (B1); it
// must never read files or reach the network.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flowbox/flowbox/internal/datadisk"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// Config is the engine's configuration. docs/CONFIGURATION.md documents every field
// with its variable; keep the two in step.
type Config struct {
	Mode     string // FLOWBOX_MODE: development | production (default development)
	HTTPAddr string // FLOWBOX_HTTP_ADDR (default :8080)
	DataDir  string // FLOWBOX_DATA_DIR (default ./data)
	LogLevel string // FLOWBOX_LOG_LEVEL: debug | info | warn | error (default info)

	MongoURI string // FLOWBOX_MONGODB_URI; empty: the embedded database under DataDir
	MongoDB  string // FLOWBOX_MONGODB_DB (default flowbox)

	RedisAddr     string // FLOWBOX_REDIS_ADDR; empty: the in-process Redis
	RedisPassword string // FLOWBOX_REDIS_PASSWORD
	RedisDB       int    // FLOWBOX_REDIS_DB (default 0)

	// AdminToken lets operators without an admin account into everything
	// under /admin (the admin page and its actions, the queue dashboard).
	// FLOWBOX_ADMIN_TOKEN; empty: only signed-in admins get in.
	AdminToken string

	// DataDiskMinFree is the free space the engine keeps on the
	// filesystems of DataDir, Files.Dir and Sandbox.Root: below it,
	// uploads, file writes and new sandboxes are refused and /readyz
	// says the disk is low (T4). FLOWBOX_DATA_DISK_MIN_FREE: a size
	// ("2GiB", "512MiB") or a percentage of the disk ("5%"); 0 turns
	// the guard off (default 2GiB).
	DataDiskMinFree datadisk.Limit

	Sandbox Sandbox
	Workers Workers
	Product Product
	Caps    Caps
	Alerts  Alerts
	Files   Files
	Trust   Trust
}

// Files configures the workspace (K1–K4): the chats' uploaded and
// intermediate files and the installed skills, kept on the engine's host
// and mounted into the sandboxes.
type Files struct {
	// Dir holds them: Dir/chats/{sandboxId}/{uploads,intermediate} and
	// Dir/skills. FLOWBOX_FILES_DIR (default DataDir/files).
	Dir string
	// MaxFileMiB bounds one uploaded file, MaxChatMiB a chat's uploaded
	// and intermediate files together. FLOWBOX_UPLOAD_MAX_FILE_MIB
	// (default 100), FLOWBOX_UPLOAD_MAX_CHAT_MIB (default 1024).
	MaxFileMiB, MaxChatMiB int64
	// MaxSkillZipMiB bounds an uploaded skill archive.
	// FLOWBOX_SKILL_MAX_ZIP_MIB (default 20).
	MaxSkillZipMiB int64
	// MaxAPIUploadMiB bounds a file uploaded through the sandbox service
	// API. FLOWBOX_SANDBOX_API_MAX_UPLOAD_MIB (default 64).
	MaxAPIUploadMiB int64
	// ChatDisk gives each new chat's files a filesystem of MaxChatMiB of
	// their own, so that what its sandbox writes into uploads and
	// intermediate stops at the quota too (T4). FLOWBOX_FILES_CHAT_DISK:
	// auto (default: on with the bwrap provider when the engine runs as
	// root and mkfs.ext4 is installed), on, off.
	ChatDisk string
	// ExecTools are the files that declare exec tools
	// (schemas/exectool.schema.json). FLOWBOX_EXEC_TOOLS, comma-separated,
	// and engine serve -tools FILE; empty: none.
	ExecTools []string
}

// Caps keep one user, one share link's visitors, one app's key users, or
// an owner with all of their apps and links, from taking the machine: how
// many sandboxes may run at once and how many chat runs may be in
// progress at once, in all, per user, per share link, per app and per
// owner. 0 means no cap; a negative value is refused.
type Caps struct {
	// Sandboxes, UserSandboxes, LinkSandboxes, AppSandboxes,
	// OwnerSandboxes bound the running sandboxes. FLOWBOX_CAP_SANDBOXES
	// (default 200), FLOWBOX_CAP_USER_SANDBOXES (default 5),
	// FLOWBOX_CAP_LINK_SANDBOXES (default 20), FLOWBOX_CAP_APP_SANDBOXES
	// (default 20: over all the end users an app's keys name in
	// customUid), FLOWBOX_CAP_OWNER_SANDBOXES (default 40: over an
	// account's own chats, all its apps' key users and all its share
	// links' visitors).
	Sandboxes, UserSandboxes, LinkSandboxes, AppSandboxes, OwnerSandboxes int
	// Runs, UserRuns, LinkRuns, AppRuns, OwnerRuns bound the chat runs in
	// progress (chat completion requests running their app's workflow).
	// FLOWBOX_CAP_RUNS (default 100), FLOWBOX_CAP_USER_RUNS (default 3),
	// FLOWBOX_CAP_LINK_RUNS (default 10), FLOWBOX_CAP_APP_RUNS (default
	// 10: over all of an app key's end users), FLOWBOX_CAP_OWNER_RUNS
	// (default 20: over the same users as OwnerSandboxes).
	Runs, UserRuns, LinkRuns, AppRuns, OwnerRuns int
}

// Product configures accounts, the chat API and the models.
type Product struct {
	// APIKey lets programs without an account call the chat API, naming
	// their user in customUid. FLOWBOX_API_KEY; empty: they are refused.
	APIKey string
	// AdminUser and AdminPassword create the first admin at start when
	// that user does not exist. FLOWBOX_ADMIN_USER (default admin),
	// FLOWBOX_ADMIN_PASSWORD (empty: a random password, logged once when
	// the account is created; an existing account keeps its password).
	AdminUser, AdminPassword string
	// LLMBaseURL and LLMAPIKey are the OpenAI-compatible endpoint for
	// every model but the offline demo model. FLOWBOX_LLM_BASE_URL,
	// FLOWBOX_LLM_API_KEY.
	LLMBaseURL, LLMAPIKey string
	// LoginBurst is how many sign-in attempts one client address may make
	// at once; after them, one every 6 seconds. FLOWBOX_LOGIN_BURST
	// (default 10).
	LoginBurst int
	// SecureCookies marks session cookies HTTPS-only.
	// FLOWBOX_SECURE_COOKIES (default: true in production mode).
	SecureCookies bool
	// Terminal lets chats' owners and admins open a terminal into the
	// chat's sandbox (L1). FLOWBOX_TERMINAL (default true).
	Terminal bool
	// ApprovalTimeout is how long a command an ask rule matched waits for
	// its chat's owner to approve it; then it counts as rejected
	// ("expired"). FLOWBOX_APPROVAL_TIMEOUT (default 30m).
	ApprovalTimeout time.Duration
}

// Workers configures the task workers (package workers).
type Workers struct {
	// InServe runs the task server and scheduler inside engine serve.
	// FLOWBOX_WORKERS (default true); engine worker always runs them.
	InServe bool
	// Concurrency is how many tasks one process runs at once.
	// FLOWBOX_WORKERS_CONCURRENCY (default 10).
	Concurrency int
	// ShutdownTimeout is how long a stopping process lets running tasks
	// finish before they go back to their queue.
	// FLOWBOX_WORKERS_SHUTDOWN_TIMEOUT (default 30s).
	ShutdownTimeout time.Duration
	// PollInterval is how often an idle worker looks for new tasks and
	// for retries that are due. FLOWBOX_WORKERS_POLL_INTERVAL (default 1s).
	PollInterval time.Duration
	// AuditRetention is how long the audit records of sandbox calls are
	// kept; a daily task deletes older ones. FLOWBOX_AUDIT_RETENTION, in
	// days ("90", "90d") or as a duration ("36h"); default 90 days; 0
	// keeps them forever.
	AuditRetention time.Duration
}

// Kube configures the Kubernetes provider (FLOWBOX_SANDBOX_PROVIDER=kubernetes).
type Kube struct {
	Config       string // FLOWBOX_KUBE_CONFIG: the kubeconfig's path (default: $KUBECONFIG; empty: in-cluster, the engine pod's service account)
	Namespace    string // FLOWBOX_KUBE_NAMESPACE: where the sandboxes' pods, claims and secrets live (default flowbox-sandboxes)
	Image        string // FLOWBOX_KUBE_IMAGE: the sandbox image (default flowbox-sandbox:bookworm)
	AgentImage   string // FLOWBOX_KUBE_AGENT_IMAGE: the image holding the command agent (default flowbox-agent:latest, images/agent/build.sh)
	PullPolicy   string // FLOWBOX_KUBE_PULL_POLICY: IfNotPresent | Always | Never (default IfNotPresent)
	Shell        string // FLOWBOX_KUBE_SHELL (default /bin/bash)
	StorageClass string // FLOWBOX_KUBE_STORAGE_CLASS: the class of the sandboxes' claims (default: the cluster's default class)
	RuntimeClass string // FLOWBOX_KUBE_RUNTIME_CLASS: the pods' runtimeClassName, such as gvisor or kata (default: the cluster's default runtime)
	// HostUsers runs the sandboxes' pods without a user namespace of their
	// own (spec.hostUsers unset), for clusters whose runtime cannot give
	// them one: root in a sandbox is then the node's uid 0.
	// FLOWBOX_KUBE_HOST_USERS (default false: spec.hostUsers: false).
	HostUsers bool
	// FilesClaim is the claim (ReadWriteMany) holding the files directory
	// (uploads, intermediate files, skills), which the engine's pods mount
	// at FLOWBOX_FILES_DIR and the sandboxes' pods mount from.
	// FLOWBOX_KUBE_FILES_CLAIM. FilesHostPath instead is the files
	// directory's path on the node, for a single-node cluster:
	// FLOWBOX_KUBE_FILES_HOST_PATH. One of them is required: every chat's
	// sandbox mounts the skills and the chat's uploads.
	FilesClaim    string
	FilesHostPath string
}

// Sandbox configures the sandbox provider and its limits.
type Sandbox struct {
	Provider        string  // FLOWBOX_SANDBOX_PROVIDER: auto | bwrap | docker | kubernetes | host (default auto; auto never picks kubernetes or host)
	AllowUnsafeHost bool    // FLOWBOX_SANDBOX_ALLOW_UNSAFE_HOST (default false)
	Network         bool    // FLOWBOX_SANDBOX_NETWORK (default false)
	CPUs            float64 // FLOWBOX_SANDBOX_CPUS (default 1)
	MemoryMiB       int64   // FLOWBOX_SANDBOX_MEMORY_MIB (default 512)
	Pids            int64   // FLOWBOX_SANDBOX_PIDS (default 256)
	DiskGiB         int64   // FLOWBOX_SANDBOX_DISK_GIB (recorded; enforced by providers that can)
	PoolSize        int     // FLOWBOX_SANDBOX_POOL_SIZE: started sandboxes kept for new chats' first commands (default 2, 0 with kubernetes; 0: no warm pool)
	Root            string  // FLOWBOX_SANDBOX_ROOT (default DataDir/sandboxes)
	// Checkpoints keeps new bwrap and Docker sandboxes' files in a btrfs
	// pool where they have checkpoints (docs/CHECKPOINTS.md): on, off, or
	// auto (on when the engine runs as root with btrfs-progs and can
	// mount the pool). FLOWBOX_CHECKPOINTS (default auto). CheckpointPool is the pool's directory
	// (FLOWBOX_CHECKPOINT_POOL, default Root/checkpoints): when it is not
	// on btrfs, a sparse image of CheckpointPoolGiB
	// (FLOWBOX_CHECKPOINT_POOL_GIB, default 64) beside it is mounted there.
	Checkpoints       string
	CheckpointPool    string
	CheckpointPoolGiB int64
	// CheckpointKeep is how many of a chat's turns keep their checkpoint
	// (FLOWBOX_CHECKPOINT_KEEP, default 20), CheckpointMaxAge how long
	// one is kept (FLOWBOX_CHECKPOINT_MAX_AGE, default 168h): a chat
	// rewinds as far as its oldest kept checkpoint.
	CheckpointKeep   int
	CheckpointMaxAge time.Duration
	// AppIdleMaxMinutes bounds the idle timeout an app may set for its
	// chats' sandboxes (R4). FLOWBOX_APP_IDLE_MAX_MINUTES (default 60).
	AppIdleMaxMinutes int
	PolicyFile        string // FLOWBOX_POLICY_FILE: the operator's shell policy, JSON (schemas/policy.schema.json); empty: the built-in denylist and secret detectors
	DockerHost        string // FLOWBOX_DOCKER_HOST (default: DOCKER_HOST or the local socket)
	DockerImage       string // FLOWBOX_DOCKER_IMAGE (default flowbox-sandbox:bookworm)
	DockerShell       string // FLOWBOX_DOCKER_SHELL (default /bin/bash)
	DockerRuntime     string // FLOWBOX_DOCKER_RUNTIME: the OCI runtime of new sandbox containers, by the daemon's name for it, such as runsc for gVisor (default: the daemon's default, runc)
	DockerRoot        string // FLOWBOX_DOCKER_WORKSPACE_ROOT (default Root/docker)
	DockerDaemonRoot  string // FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT (default DockerRoot)
	// BwrapAgentBinary is the engine binary whose command agent runs each
	// running bwrap sandbox's commands in one long-lived namespace.
	// FLOWBOX_BWRAP_AGENT_BINARY (default: the engine itself; none: a
	// bwrap per command).
	BwrapAgentBinary  string
	DockerAgentBinary string // FLOWBOX_DOCKER_AGENT_BINARY: the static engine binary each container runs as its command agent (empty: the engine itself when static, else a docker exec per command; none: a docker exec per command)

	// DockerDaemonAgentBinary is the agent binary (DockerAgentBinary, or
	// the engine itself) as the Docker daemon sees it, for an engine that
	// runs in a container. FLOWBOX_DOCKER_DAEMON_AGENT_BINARY (default:
	// the same path as in the engine).
	DockerDaemonAgentBinary string
	// DockerDaemonFilesDir is the files directory (uploads, intermediate
	// files, skills), which sandboxes mount, as the Docker daemon sees it,
	// for an engine that runs in a container.
	// FLOWBOX_DOCKER_DAEMON_FILES_DIR (default: the files directory).
	DockerDaemonFilesDir string

	// Kubernetes: sandboxes as pods (sandbox/kubernetes, docs/KUBERNETES.md).
	Kube Kube

	// Egress is the allowlist of host names sandboxes reach through the
	// engine's egress proxy (sandbox/egress). FLOWBOX_SANDBOX_EGRESS,
	// comma-separated ("pypi.org,*.pythonhosted.org"); empty: none.
	// Exclusive with Network.
	Egress []string
}

// Load reads the configuration from the environment.
func Load() (Config, error) { return Parse(os.Getenv) }

// Parse reads the configuration from getenv, which answers FLOWBOX_*
// variables as the environment would (tests pass a map).
func Parse(getenv func(string) string) (Config, error) {
	var errs []string
	str := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	boolean := func(key string, def bool) bool {
		v := str(key, strconv.FormatBool(def))
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q is not true or false", key, v))
		}
		return b
	}
	duration := func(key string, def time.Duration) time.Duration {
		v := str(key, def.String())
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("%s=%q is not a positive duration such as 30s or 2m", key, v))
		}
		return d
	}
	integer := func(key string, def int64) int64 {
		v := str(key, strconv.FormatInt(def, 10))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("%s=%q is not a whole number >= 0", key, v))
		}
		return n
	}
	c := Config{
		Mode:          str("FLOWBOX_MODE", "development"),
		HTTPAddr:      str("FLOWBOX_HTTP_ADDR", ":8080"),
		DataDir:       str("FLOWBOX_DATA_DIR", "data"),
		LogLevel:      str("FLOWBOX_LOG_LEVEL", "info"),
		MongoURI:      str("FLOWBOX_MONGODB_URI", ""),
		MongoDB:       str("FLOWBOX_MONGODB_DB", "flowbox"),
		RedisAddr:     str("FLOWBOX_REDIS_ADDR", ""),
		RedisPassword: str("FLOWBOX_REDIS_PASSWORD", ""),
		RedisDB:       int(integer("FLOWBOX_REDIS_DB", 0)),
		AdminToken:    str("FLOWBOX_ADMIN_TOKEN", ""),
		Workers: Workers{
			InServe:         boolean("FLOWBOX_WORKERS", true),
			Concurrency:     int(integer("FLOWBOX_WORKERS_CONCURRENCY", 10)),
			ShutdownTimeout: duration("FLOWBOX_WORKERS_SHUTDOWN_TIMEOUT", 30*time.Second),
			PollInterval:    duration("FLOWBOX_WORKERS_POLL_INTERVAL", time.Second),
		},
	}
	c.Workers.AuditRetention = retention(str("FLOWBOX_AUDIT_RETENTION", "90d"), &errs)
	c.Alerts = alerts(str, &errs)
	c.Trust = trust(str, integer, &errs)
	if c.Workers.Concurrency == 0 {
		errs = append(errs, "FLOWBOX_WORKERS_CONCURRENCY=0: a worker needs to run at least one task at a time")
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	c.Files = Files{
		Dir:             str("FLOWBOX_FILES_DIR", filepath.Join(c.DataDir, "files")),
		MaxFileMiB:      integer("FLOWBOX_UPLOAD_MAX_FILE_MIB", 100),
		MaxChatMiB:      integer("FLOWBOX_UPLOAD_MAX_CHAT_MIB", 1024),
		MaxSkillZipMiB:  integer("FLOWBOX_SKILL_MAX_ZIP_MIB", 20),
		MaxAPIUploadMiB: integer("FLOWBOX_SANDBOX_API_MAX_UPLOAD_MIB", 64),
		ChatDisk:        str("FLOWBOX_FILES_CHAT_DISK", "auto"),
	}
	switch c.Files.ChatDisk {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_FILES_CHAT_DISK=%q: use auto, on or off", c.Files.ChatDisk))
	}
	if l, err := datadisk.ParseLimit(str("FLOWBOX_DATA_DISK_MIN_FREE", "2GiB")); err != nil {
		errs = append(errs, "FLOWBOX_DATA_DISK_MIN_FREE="+err.Error())
	} else {
		c.DataDiskMinFree = l
	}
	if abs, err := filepath.Abs(c.Files.Dir); err == nil {
		c.Files.Dir = abs
	}
	for _, f := range strings.Split(str("FLOWBOX_EXEC_TOOLS", ""), ",") {
		if f = strings.TrimSpace(f); f != "" {
			c.Files.ExecTools = append(c.Files.ExecTools, f)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"FLOWBOX_UPLOAD_MAX_FILE_MIB", c.Files.MaxFileMiB}, {"FLOWBOX_UPLOAD_MAX_CHAT_MIB", c.Files.MaxChatMiB}, {"FLOWBOX_SKILL_MAX_ZIP_MIB", c.Files.MaxSkillZipMiB},
		{"FLOWBOX_SANDBOX_API_MAX_UPLOAD_MIB", c.Files.MaxAPIUploadMiB}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Sprintf("%s=%d: use a positive number of MiB", f.name, f.v))
		}
	}
	c.Product = Product{
		APIKey:        str("FLOWBOX_API_KEY", ""),
		AdminUser:     str("FLOWBOX_ADMIN_USER", "admin"),
		AdminPassword: str("FLOWBOX_ADMIN_PASSWORD", ""),
		LLMBaseURL:    str("FLOWBOX_LLM_BASE_URL", ""),
		LLMAPIKey:     str("FLOWBOX_LLM_API_KEY", ""),
		SecureCookies: boolean("FLOWBOX_SECURE_COOKIES", c.Mode == "production"),
		Terminal:      boolean("FLOWBOX_TERMINAL", true),
		LoginBurst:    int(integer("FLOWBOX_LOGIN_BURST", 10)),
		// A duration, as the other timeouts.
		ApprovalTimeout: duration("FLOWBOX_APPROVAL_TIMEOUT", 30*time.Minute),
	}
	if c.Product.LoginBurst == 0 {
		errs = append(errs, "FLOWBOX_LOGIN_BURST=0 would refuse every sign-in; allow at least 1")
	}
	c.Caps = Caps{
		Sandboxes:     int(integer("FLOWBOX_CAP_SANDBOXES", 200)),
		UserSandboxes: int(integer("FLOWBOX_CAP_USER_SANDBOXES", 5)),
		LinkSandboxes: int(integer("FLOWBOX_CAP_LINK_SANDBOXES", 20)),
		Runs:          int(integer("FLOWBOX_CAP_RUNS", 100)),
		UserRuns:      int(integer("FLOWBOX_CAP_USER_RUNS", 3)),
		LinkRuns:      int(integer("FLOWBOX_CAP_LINK_RUNS", 10)),
		AppSandboxes:  int(integer("FLOWBOX_CAP_APP_SANDBOXES", 20)),
		AppRuns:       int(integer("FLOWBOX_CAP_APP_RUNS", 10)),
		// An owner's cap is above its apps' and links': one busy app
		// does not hold back the owner's others, but many cannot take
		// every global place.
		OwnerSandboxes: int(integer("FLOWBOX_CAP_OWNER_SANDBOXES", 40)),
		OwnerRuns:      int(integer("FLOWBOX_CAP_OWNER_RUNS", 20)),
	}
	s := &c.Sandbox
	s.Provider = str("FLOWBOX_SANDBOX_PROVIDER", "auto")
	s.AllowUnsafeHost = boolean("FLOWBOX_SANDBOX_ALLOW_UNSAFE_HOST", false)
	s.Network = boolean("FLOWBOX_SANDBOX_NETWORK", false)
	if egressList, err := egress.ParsePatterns(strings.Split(str("FLOWBOX_SANDBOX_EGRESS", ""), ",")); err != nil {
		errs = append(errs, fmt.Sprintf("FLOWBOX_SANDBOX_EGRESS: %v (use host names such as pypi.org or *.pythonhosted.org, comma-separated)", err))
	} else {
		s.Egress = egressList
	}
	if s.Network && len(s.Egress) > 0 {
		errs = append(errs, "FLOWBOX_SANDBOX_NETWORK=true and FLOWBOX_SANDBOX_EGRESS exclude each other: the network gives everything, the allowlist only what it names; set one")
	}
	cpus := str("FLOWBOX_SANDBOX_CPUS", "1")
	if f, err := strconv.ParseFloat(cpus, 64); err != nil || f <= 0 {
		errs = append(errs, fmt.Sprintf("FLOWBOX_SANDBOX_CPUS=%q is not a positive number", cpus))
	} else {
		s.CPUs = f
	}
	s.MemoryMiB = integer("FLOWBOX_SANDBOX_MEMORY_MIB", 512)
	s.Pids = integer("FLOWBOX_SANDBOX_PIDS", 256)
	s.DiskGiB = integer("FLOWBOX_SANDBOX_DISK_GIB", 0)
	pool := int64(2)
	if s.Provider == "kubernetes" {
		pool = 0 // no warm pool there
	}
	s.PoolSize = int(integer("FLOWBOX_SANDBOX_POOL_SIZE", pool))
	if s.PoolSize < 0 || s.PoolSize > 1000 {
		errs = append(errs, fmt.Sprintf("FLOWBOX_SANDBOX_POOL_SIZE=%d: use 0 (no warm pool) to 1000", s.PoolSize))
	}
	if c.Files.ChatDisk == "on" && (c.Sandbox.Provider == "docker" || c.Sandbox.Provider == "kubernetes") && c.Sandbox.PoolSize > 0 {
		errs = append(errs, "FLOWBOX_FILES_CHAT_DISK=on with the "+c.Sandbox.Provider+" provider needs FLOWBOX_SANDBOX_POOL_SIZE=0: a container's mounts cannot move to a chat's disk when it adopts a warm pool member")
	}
	s.Root = str("FLOWBOX_SANDBOX_ROOT", filepath.Join(c.DataDir, "sandboxes"))
	s.PolicyFile = str("FLOWBOX_POLICY_FILE", "")
	s.DockerHost = str("FLOWBOX_DOCKER_HOST", "")
	s.DockerImage = str("FLOWBOX_DOCKER_IMAGE", "flowbox-sandbox:bookworm")
	s.DockerShell = str("FLOWBOX_DOCKER_SHELL", "/bin/bash")
	s.DockerRuntime = str("FLOWBOX_DOCKER_RUNTIME", "")
	s.DockerRoot = str("FLOWBOX_DOCKER_WORKSPACE_ROOT", filepath.Join(s.Root, "docker"))
	s.DockerDaemonRoot = str("FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT", s.DockerRoot)
	s.BwrapAgentBinary = str("FLOWBOX_BWRAP_AGENT_BINARY", "")
	s.Checkpoints = str("FLOWBOX_CHECKPOINTS", "auto")
	switch s.Checkpoints {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_CHECKPOINTS=%q: use auto, on or off", s.Checkpoints))
	}
	s.CheckpointPool = str("FLOWBOX_CHECKPOINT_POOL", filepath.Join(s.Root, "checkpoints"))
	s.CheckpointPoolGiB = integer("FLOWBOX_CHECKPOINT_POOL_GIB", 64)
	s.CheckpointKeep = int(integer("FLOWBOX_CHECKPOINT_KEEP", 20))
	if s.CheckpointKeep < 1 || s.CheckpointKeep > 1000 {
		errs = append(errs, fmt.Sprintf("FLOWBOX_CHECKPOINT_KEEP=%d: use 1 to 1000 turns", s.CheckpointKeep))
	}
	s.AppIdleMaxMinutes = int(integer("FLOWBOX_APP_IDLE_MAX_MINUTES", 60))
	if s.AppIdleMaxMinutes < 1 || s.AppIdleMaxMinutes > 7*24*60 {
		errs = append(errs, fmt.Sprintf("FLOWBOX_APP_IDLE_MAX_MINUTES=%d: use 1 to 10080 (a week)", s.AppIdleMaxMinutes))
	}
	s.CheckpointMaxAge = duration("FLOWBOX_CHECKPOINT_MAX_AGE", 7*24*time.Hour)
	if s.CheckpointMaxAge < time.Minute {
		errs = append(errs, fmt.Sprintf("FLOWBOX_CHECKPOINT_MAX_AGE=%s: use a minute or more (168h is a week)", s.CheckpointMaxAge))
	}
	if s.CheckpointPoolGiB < 1 {
		errs = append(errs, fmt.Sprintf("FLOWBOX_CHECKPOINT_POOL_GIB=%d: use 1 or more", s.CheckpointPoolGiB))
	}
	s.DockerAgentBinary = str("FLOWBOX_DOCKER_AGENT_BINARY", "")
	s.DockerDaemonAgentBinary = str("FLOWBOX_DOCKER_DAEMON_AGENT_BINARY", "")
	s.DockerDaemonFilesDir = str("FLOWBOX_DOCKER_DAEMON_FILES_DIR", "")
	s.Kube = Kube{
		Config:        str("FLOWBOX_KUBE_CONFIG", os.Getenv("KUBECONFIG")),
		Namespace:     str("FLOWBOX_KUBE_NAMESPACE", "flowbox-sandboxes"),
		Image:         str("FLOWBOX_KUBE_IMAGE", "flowbox-sandbox:bookworm"),
		AgentImage:    str("FLOWBOX_KUBE_AGENT_IMAGE", "flowbox-agent:latest"),
		PullPolicy:    str("FLOWBOX_KUBE_PULL_POLICY", "IfNotPresent"),
		Shell:         str("FLOWBOX_KUBE_SHELL", "/bin/bash"),
		StorageClass:  str("FLOWBOX_KUBE_STORAGE_CLASS", ""),
		RuntimeClass:  str("FLOWBOX_KUBE_RUNTIME_CLASS", ""),
		HostUsers:     boolean("FLOWBOX_KUBE_HOST_USERS", false),
		FilesClaim:    str("FLOWBOX_KUBE_FILES_CLAIM", ""),
		FilesHostPath: str("FLOWBOX_KUBE_FILES_HOST_PATH", ""),
	}

	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_LOG_LEVEL=%q: use debug, info, warn or error", c.LogLevel))
	}
	switch c.Mode {
	case "development", "production":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_MODE=%q: use development or production", c.Mode))
	}
	switch s.Provider {
	case "auto", "bwrap", "docker", "kubernetes", "host":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_SANDBOX_PROVIDER=%q: use auto, bwrap, docker, kubernetes or host", s.Provider))
	}
	if s.Provider == "kubernetes" {
		errs = append(errs, s.Kube.check(*s)...)
	}
	if s.Provider == "host" && c.Mode == "production" {
		errs = append(errs, "FLOWBOX_SANDBOX_PROVIDER=host is refused in production mode: it gives commands the engine's privileges; use bwrap or docker")
	}
	if b := s.BwrapAgentBinary; b != "" && b != "none" && !filepath.IsAbs(b) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_BWRAP_AGENT_BINARY=%q: use an absolute path, or none for a bwrap per command", b))
	}
	// "none" is docker.NoAgent.
	if b := s.DockerAgentBinary; b != "" && b != "none" && !filepath.IsAbs(b) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_DOCKER_AGENT_BINARY=%q: use an absolute path, or none for a docker exec per command", b))
	}
	if r := s.DockerRuntime; strings.ContainsFunc(r, notRuntimeName) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_DOCKER_RUNTIME=%q: use the name of a runtime the Docker daemon has (docker info lists them under Runtimes), such as runsc for gVisor", r))
	}
	if b := s.DockerDaemonAgentBinary; b != "" && !filepath.IsAbs(b) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_DOCKER_DAEMON_AGENT_BINARY=%q: use an absolute path", b))
	}
	if d := s.DockerDaemonFilesDir; d != "" && !filepath.IsAbs(d) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_DOCKER_DAEMON_FILES_DIR=%q: use an absolute path, where the Docker daemon sees the files directory", d))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// notRuntimeName reports a character no Docker runtime's name has.
// check says what is wrong with the Kubernetes settings.
func (k Kube) check(s Sandbox) []string {
	var errs []string
	switch k.PullPolicy {
	case "IfNotPresent", "Always", "Never":
	default:
		errs = append(errs, fmt.Sprintf("FLOWBOX_KUBE_PULL_POLICY=%q: use IfNotPresent, Always or Never", k.PullPolicy))
	}
	switch {
	case k.FilesClaim != "" && k.FilesHostPath != "":
		errs = append(errs, "FLOWBOX_KUBE_FILES_CLAIM and FLOWBOX_KUBE_FILES_HOST_PATH are both set: use the claim on a cluster, the host path on a single node")
	case k.FilesClaim == "" && k.FilesHostPath == "":
		errs = append(errs, "FLOWBOX_SANDBOX_PROVIDER=kubernetes needs a volume the sandboxes' pods mount the files directory (uploads, skills) from: set FLOWBOX_KUBE_FILES_CLAIM to a ReadWriteMany claim the engine mounts at FLOWBOX_FILES_DIR, or FLOWBOX_KUBE_FILES_HOST_PATH on a single node (docs/KUBERNETES.md)")
	}
	if p := k.FilesHostPath; p != "" && !filepath.IsAbs(p) {
		errs = append(errs, fmt.Sprintf("FLOWBOX_KUBE_FILES_HOST_PATH=%q: use an absolute path", p))
	}
	if len(s.Egress) > 0 {
		errs = append(errs, "FLOWBOX_SANDBOX_EGRESS is not supported with FLOWBOX_SANDBOX_PROVIDER=kubernetes: the cluster's NetworkPolicy says what sandboxes reach (docs/KUBERNETES.md)")
	}
	if s.PoolSize > 0 {
		errs = append(errs, "FLOWBOX_SANDBOX_POOL_SIZE: the kubernetes provider has no warm pool; set it to 0")
	}
	return errs
}

func notRuntimeName(r rune) bool {
	return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-')
}

// retention reads FLOWBOX_AUDIT_RETENTION: whole days ("90", "90d") or
// a Go duration ("36h"); 0 keeps everything.
func retention(v string, errs *[]string) time.Duration {
	if days, err := strconv.ParseInt(strings.TrimSuffix(v, "d"), 10, 64); err == nil && days >= 0 {
		return time.Duration(days) * 24 * time.Hour
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d
	}
	*errs = append(*errs, fmt.Sprintf("FLOWBOX_AUDIT_RETENTION=%q is not a number of days (90, 90d), a duration (36h) or 0 (keep forever)", v))
	return 0
}

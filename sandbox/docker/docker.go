// Package docker runs sandboxes as Docker containers, one container per
// sandbox, through the Docker Engine API. A container has no network
// unless the spec asks for it, no capabilities, no new privileges and
// cgroup limits on CPU, memory and processes; the sandbox's workspace and
// shell state are host directories bind-mounted into it, so they survive
// stop and start, and so are the engine's directories in the spec's
// mounts.
//
// Commands reach a container one of two ways. By default the container's
// main process is the exec agent (sandbox/agent), run from this very
// engine binary (or Config.AgentBinary), and a command is a connection to
// its socket, which the container sees in a host directory of its own: a
// few milliseconds instead of a Docker exec's tens, and every process a
// command starts ends with it. The fallback, for an engine binary that
// cannot run in a container (dynamically linked), for containers created
// without the agent and when the agent cannot be reached, is a Docker
// exec per command.
//
// The package must never run a user's command outside the persistent
// shell (sandbox.ShellArgv), never leave a timed-out command running, and
// never touch containers it did not label as its own.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
	"github.com/flowbox/flowbox/sandbox/diskimage"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// Defaults for the zero values of Config.
const (
	DefaultImage         = "flowbox-sandbox:bookworm"
	DefaultShell         = "/bin/bash"
	DefaultWorkspaceRoot = "/var/lib/flowbox/docker"
	DefaultStopTimeout   = 10 * time.Second
)

// defaultLimits fill the fields that both a spec's Limits and
// Config.DefaultLimits leave at zero.
var defaultLimits = sandbox.Limits{CPUCount: 1, MemoryMiB: 512, Pids: 256}

// Labels put on every container; List finds the product's containers by
// LabelManaged. A spec's own labels are added under LabelPrefix, unless
// their key would stand for one of these. LabelPoolMember marks a warm
// pool's member (sandbox.Spec.Pool); LabelSandbox stays its pool id when
// it is adopted (see Adopt).
const (
	LabelPrefix     = "flowbox."
	LabelManaged    = LabelPrefix + "managed"
	LabelSandbox    = LabelPrefix + "sandbox"
	LabelPoolMember = LabelPrefix + "pool-member"
	// LabelNetwork is "full" on a sandbox with the network: its egress
	// forwarder leads to any public host (egress.Proxy.OpenPublic).
	LabelNetwork = LabelPrefix + "network"
)

// Config configures a Provider. Every zero value has the default named in
// its comment.
type Config struct {
	// Host is the daemon's address (unix:///var/run/docker.sock,
	// tcp://host:2376). Default: DOCKER_HOST and the other DOCKER_*
	// variables the Docker client reads, else the local socket.
	Host string
	// Image runs every sandbox. Default DefaultImage, built by
	// images/sandbox/build.sh.
	Image string
	// Shell interprets commands inside the image. Default DefaultShell;
	// use /bin/sh for images without bash.
	Shell string
	// WorkspaceRoot is the directory, as this process sees it, that holds
	// <id>/workspace and <id>/state for each sandbox. Default
	// DefaultWorkspaceRoot.
	WorkspaceRoot string
	// DaemonWorkspaceRoot is the same directory as the Docker daemon sees
	// it, for bind mounts. It differs from WorkspaceRoot when the engine
	// runs in a container with the directory mounted elsewhere. Default
	// WorkspaceRoot.
	DaemonWorkspaceRoot string
	// DefaultLimits fill the zero fields of a spec's Limits. Zero fields
	// here fall back to 1 CPU, 512 MiB of memory (no swap) and 256
	// processes. DiskGiB limits the workspace (package diskimage), not the
	// image's own writable layer: overlay2 quotas need XFS with project
	// quotas.
	DefaultLimits sandbox.Limits
	// CheckpointPool, when set, is the directory of a checkpoint pool
	// (package checkpoint, on btrfs): new sandboxes keep their workspace
	// and shell state there, and have checkpoints (see checkpoint.go).
	// Their disk limit is a quota there. It needs the engine on the
	// daemon's host, seeing the workspace root where the daemon does.
	CheckpointPool string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Default DefaultStopTimeout. The container's main process exits at
	// once on SIGTERM, so this only matters when the daemon is slow.
	StopTimeout time.Duration
	// Logger receives failures that are not returned (cleanup, kills).
	// Default slog.Default().
	Logger *slog.Logger
	// AgentBinary is the path, as this process sees it, of a static
	// engine binary (CGO_ENABLED=0 go build ./cmd/engine): new containers
	// run its sandbox-agent command as their main process, from a
	// read-only bind mount, and commands go through it. It must be
	// static to run in any image; Fingerprint checks that, unless this
	// process cannot see the file (then only the daemon can judge it).
	// Default: this process's own executable when it is static; when it
	// is not (a cgo build, go run, a test binary), commands are Docker
	// execs and New logs a warning saying why. NoAgent selects Docker
	// execs without a warning. The agent's socket is reached through
	// WorkspaceRoot, so the daemon must run on this machine.
	AgentBinary string
	// DaemonAgentBinary is the same binary as the Docker daemon sees it,
	// for the bind mount. It differs from AgentBinary when the engine
	// runs in a container and the binary is mounted there from elsewhere
	// on the host (docker-compose.yml). Default: the agent binary's path
	// here.
	DaemonAgentBinary string
	// Egress is the engine's egress proxy, which serves the sandboxes
	// whose spec has an allowlist (sandbox.Spec.Egress) through their
	// agent; nil: such a spec fails to ensure.
	Egress *egress.Proxy
	// Runtime is the OCI runtime new containers run under, by the name
	// the daemon knows it by (docker info's Runtimes), such as runsc for
	// gVisor, which the daemon must have been given (daemon.json
	// "runtimes" or dockerd --add-runtime). Fingerprint, and the first
	// creation, say when the daemon lacks it. An existing container keeps
	// the runtime it was created with. Default: the daemon's default
	// runtime (runc).
	//
	// Under gVisor (the runtime's program or shim is runsc) the agent is
	// the container's PID 1, without Docker's init, and results do not
	// report exhaustion: gVisor shows the agent no cgroup counters, and
	// the memory and pids limits hold for the sandbox as a whole, whose
	// kernel a command past them takes down with it (the next Ensure
	// starts it again, with its files).
	Runtime string
	// DaemonPaths say where the Docker daemon sees the engine's
	// directories that sandboxes mount (sandbox.Spec.Mounts): a source
	// under a map's Engine directory is bound from the same place under
	// its Daemon directory, the longest Engine directory winning; a
	// source under none is bound as it is. They matter when the engine
	// runs in a container with its files directory mounted from
	// elsewhere on the host (docker-compose.yml). Default: none.
	DaemonPaths []PathMap
}

// NoAgent as Config.AgentBinary runs every command as a Docker exec.
const NoAgent = "none"

// Provider runs sandboxes as Docker containers. It is safe for concurrent
// use, also by several engine processes sharing one daemon.
type Provider struct {
	cfg Config
	cli *client.Client
	log *slog.Logger
	// agent is the agent binary new containers run, as the daemon sees
	// it; empty: they run none, and commands are Docker execs.
	agent string
	// unreachable is logged once: later fallbacks to Docker execs are
	// debug messages.
	unreachable sync.Once
	// rt is what the daemon said of Config.Runtime.
	rt struct {
		sync.Mutex
		known  bool
		gvisor bool
	}
	// pool keeps new sandboxes' files when Config.CheckpointPool is set.
	pool *checkpoint.Pool
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for cfg. It does not contact the daemon;
// Fingerprint does.
func New(cfg Config) (*Provider, error) { return newProvider(cfg, os.Executable) }

// newProvider is New with executable in place of os.Executable, the
// default agent binary.
func newProvider(cfg Config, executable func() (string, error)) (*Provider, error) {
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	if cfg.WorkspaceRoot == "" {
		cfg.WorkspaceRoot = DefaultWorkspaceRoot
	}
	if cfg.DaemonWorkspaceRoot == "" {
		cfg.DaemonWorkspaceRoot = cfg.WorkspaceRoot
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.DefaultLimits = cfg.DefaultLimits.Or(defaultLimits)
	agentBin, err := resolveAgent(cfg, executable)
	if err != nil {
		return nil, fmt.Errorf("docker sandbox: %w", err)
	}
	for _, dir := range []*string{&cfg.WorkspaceRoot, &cfg.DaemonWorkspaceRoot} {
		if !filepath.IsAbs(*dir) {
			return nil, fmt.Errorf("docker sandbox: the workspace root %q must be an absolute path", *dir)
		}
		*dir = filepath.Clean(*dir)
	}
	maps := make([]PathMap, 0, len(cfg.DaemonPaths))
	for _, m := range cfg.DaemonPaths {
		if !filepath.IsAbs(m.Engine) || !filepath.IsAbs(m.Daemon) {
			return nil, fmt.Errorf("docker sandbox: the daemon's view of %q is %q: both must be absolute paths", m.Engine, m.Daemon)
		}
		maps = append(maps, PathMap{Engine: filepath.Clean(m.Engine), Daemon: filepath.Clean(m.Daemon)})
	}
	cfg.DaemonPaths = maps

	// API version negotiation is on by default: the first request pings
	// the daemon and the client downgrades to the daemon's version.
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker sandbox: configure the Docker client: %w", err)
	}
	p := &Provider{cfg: cfg, cli: cli, log: cfg.Logger.With("provider", "docker"), agent: agentBin.daemon}
	if cfg.CheckpointPool != "" {
		if cfg.DaemonWorkspaceRoot != cfg.WorkspaceRoot {
			return nil, fmt.Errorf("docker sandbox: checkpoints need the engine on the Docker daemon's host, which would not see the files bound from the checkpoint pool " +
				"(FLOWBOX_DOCKER_DAEMON_WORKSPACE_ROOT is set); turn them off with FLOWBOX_CHECKPOINTS=off")
		}
		if p.pool, err = checkpoint.Open(cfg.CheckpointPool); err != nil {
			return nil, fmt.Errorf("docker sandbox: %w", err)
		}
	}
	if agentBin.fallback != nil {
		p.log.Warn("sandbox commands run as Docker execs, without the in-sandbox agent: slower, and background processes outlive their command",
			"reason", agentBin.fallback,
			"fix", "run an engine built with CGO_ENABLED=0 (go build ./cmd/engine), or set FLOWBOX_DOCKER_AGENT_BINARY to one; FLOWBOX_DOCKER_AGENT_BINARY=none silences this")
	}
	return p, nil
}

// Close releases the client's idle connections.
func (p *Provider) Close() error { return p.cli.Close() }

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "docker" }

// Capabilities implements sandbox.Provider.
func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		FilesystemIsolation: true,
		NetworkIsolation:    true,
		ResourceLimits:      true,
		Streaming:           true,
		// Through the agent only; a Docker exec's background processes
		// live on in the container.
		CommandProcessesEnd: p.agent != "",
		Stdin:               p.agent != "",
		// Through the agent only: a Docker exec's result carries no
		// counters of the container's cgroups, and gVisor shows the agent
		// none.
		ReportsExhaustion: p.agent != "" && !p.gvisor(),
		Checkpoints:       p.pool != nil,
	}
}

// ContainerName is the name of the container that holds sandbox id.
func ContainerName(id string) string { return "flowbox-" + id }

func (p *Provider) hostDir(id string) string { return filepath.Join(p.cfg.WorkspaceRoot, id) }

func (p *Provider) workspaceDir(id string) string {
	return filepath.Join(p.cfg.WorkspaceRoot, id, "workspace")
}

func (p *Provider) stateDir(id string) string { return filepath.Join(p.cfg.WorkspaceRoot, id, "state") }

// agentDir holds the agent's socket; the container sees it as agentRunDir.
func (p *Provider) agentDir(id string) string { return filepath.Join(p.cfg.WorkspaceRoot, id, "agent") }

// egressDir holds the egress proxy's socket; the container sees it
// read-only at egress.SocketDir.
func (p *Provider) egressDir(id string) string {
	return filepath.Join(p.cfg.WorkspaceRoot, id, "egress")
}

// Fingerprint says why sandboxes cannot run: the daemon is unreachable,
// the image is missing or the workspace root is not writable.
func (p *Provider) Fingerprint(ctx context.Context) error {
	if _, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("cannot reach the Docker daemon at %s: %v; start dockerd or set FLOWBOX_DOCKER_HOST: %w",
			p.cli.DaemonHost(), err, sandbox.ErrUnavailable)
	}
	if _, err := p.cli.ImageInspect(ctx, p.cfg.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("the sandbox image %s is not in the Docker daemon at %s; build it with images/sandbox/build.sh (no registry needed) or from images/sandbox/Dockerfile, or set FLOWBOX_DOCKER_IMAGE",
				p.cfg.Image, p.cli.DaemonHost())
		}
		return p.apiErr("inspect the sandbox image "+p.cfg.Image, err)
	}
	if err := os.MkdirAll(p.cfg.WorkspaceRoot, 0o755); err != nil {
		return fmt.Errorf("docker sandbox: the workspace root is not usable: %w", err)
	}
	if p.agent != "" && p.cfg.AgentBinary != "" {
		if err := checkAgentBinary(p.cfg.AgentBinary); err != nil {
			return fmt.Errorf("docker sandbox: %w", err)
		}
	}
	if _, err := p.runtime(ctx); err != nil {
		return fmt.Errorf("docker sandbox: %w", err)
	}
	return nil
}

// runtime asks the daemon, once, about Config.Runtime: whether it has
// it, and whether it is gVisor.
func (p *Provider) runtime(ctx context.Context) (gvisor bool, err error) {
	if p.cfg.Runtime == "" {
		return false, nil
	}
	p.rt.Lock()
	defer p.rt.Unlock()
	if p.rt.known {
		return p.rt.gvisor, nil
	}
	res, err := p.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, p.apiErr("ask the Docker daemon for its runtimes", err)
	}
	rt, ok := res.Info.Runtimes[p.cfg.Runtime]
	if !ok && strings.HasPrefix(p.cfg.Runtime, "io.containerd.") {
		// A containerd shim by its full name, which daemons from 23 on
		// run without a "runtimes" entry: the creation will tell.
		rt, ok = system.RuntimeWithStatus{Runtime: system.Runtime{Type: p.cfg.Runtime}}, true
	}
	if !ok {
		return false, fmt.Errorf("the Docker daemon at %s has no runtime %q (it has %s); register it with the daemon "+
			"(a \"runtimes\" entry in its daemon.json, or dockerd --add-runtime) and restart or reload it, or set FLOWBOX_DOCKER_RUNTIME to one it has",
			p.cli.DaemonHost(), p.cfg.Runtime, strings.Join(slices.Sorted(maps.Keys(res.Info.Runtimes)), ", "))
	}
	p.rt.known = true
	p.rt.gvisor = isGVisor(p.cfg.Runtime, rt.Path, rt.Type)
	return p.rt.gvisor, nil
}

// gvisor reports whether new containers run under gVisor: what the
// daemon said, or before it was asked, whether Config.Runtime is named
// runsc.
func (p *Provider) gvisor() bool {
	if p.cfg.Runtime == "" {
		return false
	}
	p.rt.Lock()
	defer p.rt.Unlock()
	if p.rt.known {
		return p.rt.gvisor
	}
	return isGVisor(p.cfg.Runtime, "", "")
}

// isGVisor reports whether the daemon's runtime name, with its program
// (path) or containerd shim (typ), is gVisor's runsc.
func isGVisor(name, path, typ string) bool {
	if path == "" && typ == "" {
		return name == "runsc" || strings.HasPrefix(name, "io.containerd.runsc.")
	}
	return filepath.Base(path) == "runsc" || strings.HasPrefix(typ, "io.containerd.runsc.")
}

// Status implements sandbox.Provider.
func (p *Provider) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	res, err := p.cli.ContainerInspect(ctx, ContainerName(id), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		if _, ok := p.poolID(id); ok && !p.adoptedAway(id) {
			// A fork's files, whose container Ensure creates.
			return sandbox.StatusStopped, nil
		}
		return sandbox.StatusMissing, nil
	}
	if err != nil {
		return "", p.apiErr("inspect sandbox "+id, err)
	}
	return statusOf(stateOf(res.Container)), nil
}

func stateOf(c container.InspectResponse) container.ContainerState {
	if c.State == nil {
		return ""
	}
	return c.State.Status
}

func statusOf(s container.ContainerState) sandbox.Status {
	switch s {
	case container.StateRunning, container.StatePaused, container.StateRestarting:
		return sandbox.StatusRunning
	}
	return sandbox.StatusStopped
}

// Stop implements sandbox.Provider. Stopping a missing or stopped sandbox
// is not an error.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	p.closeEgress(id)
	secs := int((p.cfg.StopTimeout + time.Second - 1) / time.Second)
	_, err := p.cli.ContainerStop(ctx, ContainerName(id), client.ContainerStopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return p.apiErr("stop sandbox "+id, err)
	}
	return nil
}

// Delete implements sandbox.Provider: the container, its anonymous volumes
// and the sandbox's host directory, with the link an adoption left at its
// pool id's place. A pool id that was adopted names nothing: the link
// stays for the sandbox it leads to.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	p.closeEgress(id)
	_, err := p.cli.ContainerRemove(ctx, ContainerName(id), client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return p.apiErr("delete sandbox "+id, err)
	}
	if p.adoptedAway(id) {
		if err := p.removeDanglingLink(id); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
		return nil
	}
	// The link first: the record that names it goes with the files.
	if err := p.removePoolLink(id); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	// The workspace's filesystem, if it has a disk limit, or its files
	// in the checkpoint pool, before its directory: removing the files
	// through the mount would leave the mount.
	if err := diskimage.Unmount(p.workspaceDir(id)); err != nil {
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	if pid, ok := p.poolID(id); ok {
		if err := p.unbindPool(id, true); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
		// The mark stays with the directory until this is done: a
		// retry finds them.
		if err := p.pool.Delete(pid); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	// RemoveAll does not follow links, so links the sandbox planted in its
	// workspace cannot make it delete anything outside.
	if err := os.RemoveAll(p.hostDir(id)); err != nil {
		return fmt.Errorf("delete sandbox %s: remove its files: %w", id, err)
	}
	return nil
}

// isRemovalInProgress reports a concurrent Delete of the same container.
func isRemovalInProgress(err error) bool {
	return cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// Files implements sandbox.Provider. The workspace is a host directory, so
// files are reachable while the sandbox is stopped, and so are its
// mounts' directories, at their targets, as its record has them (a
// container created before records shows the workspace alone).
func (p *Provider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	dir := p.workspaceDir(id)
	if p.adoptedAway(id) {
		return nil, fmt.Errorf("files of sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("files of sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("files of sandbox %s: %w", id, err)
	}
	files := sandbox.DirFiles{Dir: dir}
	rec, _, err := p.readRecord(id)
	if err != nil {
		p.log.Warn("the sandbox's mounts are unknown; its files are the workspace's alone", "sandbox", id, "err", err)
	}
	if len(rec.Mounts) == 0 {
		return files, nil
	}
	return sandbox.MountedFiles{Workspace: files, Mounts: rec.Mounts}, nil
}

// List implements sandbox.Provider: every container labelled as the
// product's, running or not. A warm pool's member is listed with Pool
// set; once adopted, as the sandbox it became, with its owner's labels.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true"),
	})
	if err != nil {
		return nil, p.apiErr("list sandboxes", err)
	}
	out := make([]sandbox.Resource, 0, len(res.Items))
	for _, c := range res.Items {
		label := c.Labels[LabelSandbox]
		if !sandbox.ValidID(label) {
			continue
		}
		id, pool, labels, ok := p.listedAs(c, label)
		if !ok {
			continue
		}
		out = append(out, sandbox.Resource{
			ID:        id,
			Status:    statusOf(c.State),
			CreatedAt: time.Unix(c.Created, 0).UTC(),
			Labels:    labels,
			Pool:      pool,
		})
	}
	return out, nil
}

func checkID(id string) error {
	if !sandbox.ValidID(id) {
		return fmt.Errorf("docker sandbox: %q is not a sandbox id: %w", id, sandbox.ErrNotFound)
	}
	return nil
}

// apiErr wraps an Engine API error, mapping a missing container to
// sandbox.ErrNotFound and an unreachable daemon to sandbox.ErrUnavailable.
func (p *Provider) apiErr(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", op, err)
	case unreachable(err):
		return fmt.Errorf("%s: cannot reach the Docker daemon at %s: %w: %w", op, p.cli.DaemonHost(), sandbox.ErrUnavailable, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", op, sandbox.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unreachable reports whether err means the daemon could not be reached,
// including for the hijacked connections that exec uses.
func unreachable(err error) bool {
	if client.IsErrConnectionFailed(err) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

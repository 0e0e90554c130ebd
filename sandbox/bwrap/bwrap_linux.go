package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/checkpoint"
)

// Provider runs sandboxes with bubblewrap.
type Provider struct {
	cfg   Config
	cg    cgroups
	bwrap string

	once     sync.Once
	ctls     []string // cgroup controllers in use
	probeErr error
	sysArgs  []string // read-only system mounts, computed once
	// nsFailed holds when a sandbox's namespace last failed to start.
	nsFailed sync.Map // id → time.Time
	// nsStarting holds the sandboxes whose namespace this process starts.
	nsStarting sync.Map // id → true
	// ids maps sandboxes' users to host users of their own; nil when
	// they run as the engine's user (see idmap_linux.go).
	ids *idMap
	// pool keeps new sandboxes' files when Config.CheckpointPool is set
	// (see checkpoint_linux.go).
	pool *checkpoint.Pool
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a bwrap provider. It does not touch the machine; Fingerprint
// says whether it can run here.
func New(cfg Config) (*Provider, error) {
	cfg.setDefaults()
	if !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("bwrap: root %q must be an absolute path", cfg.Root)
	}
	if cfg.ForwarderBinary == "" {
		// Only sandboxes with an allowlist need it: a failure here is
		// theirs, reported when one is ensured.
		if exe, err := os.Executable(); err == nil {
			cfg.ForwarderBinary, _ = filepath.EvalSymlinks(exe)
		}
	}
	p := &Provider{cfg: cfg, cg: cgroups{mount: cfg.CgroupMount, parent: cfg.CgroupParent}}
	return p, nil
}

func (p *Provider) Name() string { return "bwrap" }

func (p *Provider) log() *slog.Logger {
	if p.cfg.Logger != nil {
		return p.cfg.Logger
	}
	return slog.Default()
}

func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{FilesystemIsolation: true, NetworkIsolation: true, ResourceLimits: true, Streaming: true,
		CommandProcessesEnd: true, ReportsExhaustion: true, Stdin: true, Checkpoints: p.cfg.CheckpointPool != ""}
}

// probe finds bwrap and the cgroup controllers once.
func (p *Provider) probe() error {
	p.once.Do(func() {
		path, err := exec.LookPath(p.cfg.BwrapPath)
		if err != nil {
			p.probeErr = fmt.Errorf("%w: bubblewrap not found (%v); install it with: apt-get install -y bubblewrap", sandbox.ErrUnsupported, err)
			return
		}
		p.bwrap = path
		if p.ctls, p.probeErr = p.cg.available(); p.probeErr != nil {
			return
		}
		if p.probeErr = p.setUpIDMap(); p.probeErr != nil {
			return
		}
		if p.cfg.CheckpointPool != "" {
			if p.pool, p.probeErr = checkpoint.Open(p.cfg.CheckpointPool); p.probeErr != nil {
				return
			}
		}
		// Where the sandboxes' users reach it.
		etcRoot := p.cfg.Root
		if p.ids != nil {
			etcRoot = p.cfg.StageDir
		}
		etc, err := etcSnapshot(etcRoot, p.cfg.EtcEntries)
		if err != nil {
			p.probeErr = err
			return
		}
		p.sysArgs = systemMounts(etc)
	})
	return p.probeErr
}

// Fingerprint checks that bwrap runs here with every namespace unshared and
// that the cgroup controllers for limits are writable.
func (p *Provider) Fingerprint(ctx context.Context) error {
	if err := p.probe(); err != nil {
		return err
	}
	// The probe mounts what commands mount, not the whole host: a
	// recursive bind of / also takes in other software's mounts (Docker's
	// overlays) and fails when one changes under it.
	args := append([]string{"--unshare-all", "--die-with-parent"}, usrMounts()...)
	out, err := exec.CommandContext(ctx, p.bwrap, append(args, "/usr/bin/true")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: bwrap cannot create namespaces here: %v: %s", sandbox.ErrUnsupported, err, bytes.TrimSpace(out))
	}
	return nil
}

func (p *Provider) dir(id string) string { return filepath.Join(p.cfg.Root, id) }

// Layout of <Root>/<id>: workspace/ (→ /workspace), state/ (→ /.flowbox),
// home/ (→ /root), on the disk image when there is a disk limit (see
// disk_linux.go), meta.json, and the stopped marker. Only the first three
// are visible inside; the marker and meta are out of the sandbox's reach.

// egressDir holds the egress proxy's socket; the sandbox sees it
// read-only at egress.SocketDir.
func (p *Provider) egressDir(id string) string { return filepath.Join(p.dir(id), "egress") }
func (p *Provider) stoppedMark(id string) string {
	return filepath.Join(p.dir(id), "stopped")
}

type meta struct {
	CreatedAt time.Time         `json:"createdAt"`
	Labels    map[string]string `json:"labels,omitempty"`
	Network   bool              `json:"network"`
	// Egress is the allowlist the sandbox was created with: non-empty,
	// its commands get the egress forwarder. The proxy applies the
	// allowlist of the latest Ensure.
	Egress []string       `json:"egress,omitempty"`
	Limits sandbox.Limits `json:"limits"`
	// Mounts are the host directories the sandbox was created with; a
	// later Ensure's spec does not change them. Sandboxes created before
	// mounts existed have none.
	Mounts []sandbox.Mount `json:"mounts,omitempty"`
	// Pool: a warm pool's member that no chat has adopted yet
	// (sandbox.Spec.Pool; see pool_linux.go).
	Pool bool `json:"pool,omitempty"`
	// HostID is the host user the sandbox's root is (idmap_linux.go),
	// kept when the sandbox is adopted under another name; zero in
	// sandboxes made before.
	HostID uint32 `json:"hostId,omitempty"`
}

func checkID(id string) error {
	if !sandbox.ValidID(id) {
		return fmt.Errorf("bwrap: %w: invalid sandbox id %q", sandbox.ErrNotFound, id)
	}
	return nil
}

// Ensure creates the sandbox's directories and cgroups, or restarts a
// stopped one. Every step is idempotent, so concurrent callers (also in
// other processes) converge on one sandbox. The spec's mounts are checked
// every time but used only by the call that creates the sandbox: a
// sandbox keeps the mounts it was created with. A warm pool's member
// (spec.Pool) also has its namespace started, when there is an agent.
func (p *Provider) Ensure(ctx context.Context, spec sandbox.Spec) error {
	if err := checkID(spec.ID); err != nil {
		return err
	}
	// Never in the middle of an adoption of this name, nor of a stop.
	unlock, err := p.lockNamespace(spec.ID)
	if err != nil {
		return fmt.Errorf("bwrap ensure %s: %w: %w", spec.ID, sandbox.ErrUnavailable, err)
	}
	err = p.ensure(ctx, spec)
	unlock()
	if err != nil {
		return err
	}
	p.warmPoolMember(ctx, spec.ID)
	return nil
}

// ensure is Ensure under the sandbox's lock.
func (p *Provider) ensure(ctx context.Context, spec sandbox.Spec) (err error) {
	if err := p.probe(); err != nil {
		return fmt.Errorf("bwrap ensure %s: %w: %w", spec.ID, sandbox.ErrUnavailable, err)
	}
	id := spec.ID
	if err := p.checkNetwork(spec); err != nil {
		return fmt.Errorf("bwrap ensure %s: %w", id, err)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return fmt.Errorf("bwrap ensure %s: %w", id, err)
	}
	if err := os.MkdirAll(p.cfg.Root, 0o755); err != nil {
		return fmt.Errorf("bwrap ensure %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	// Whoever makes the directory is the creator, and only the creator
	// rolls back: concurrent callers must not undo each other's work.
	mkErr := os.Mkdir(p.dir(id), 0o755)
	fresh := mkErr == nil
	if mkErr != nil && !errors.Is(mkErr, fs.ErrExist) {
		return fmt.Errorf("bwrap ensure %s: %w: %w", id, sandbox.ErrUnavailable, mkErr)
	}

	var undo sandbox.Cleanup
	defer func() {
		if err != nil {
			err = fmt.Errorf("bwrap ensure %s: %w", id, errors.Join(err, undo.Run(context.WithoutCancel(ctx))))
		}
	}()
	if fresh {
		undo.Add("remove the sandbox's directory", func(context.Context) error { return os.RemoveAll(p.dir(id)) })
	}

	lim := p.cfg.limits(spec.Limits)
	if err := p.cg.create(p.ctls, id, lim); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	if fresh {
		undo.Add("remove the cgroups", func(context.Context) error { return p.cg.remove(id) })
	}
	// Every writable directory on a filesystem of its own when there is
	// a disk limit: made with the sandbox, mounted whenever it starts.
	var gib int64
	if fresh {
		gib = lim.DiskGiB
	}
	if fresh {
		undo.Add("unmount the disk", func(context.Context) error { return p.unmountDisk(id) })
	}
	if fresh && p.cfg.CheckpointPool != "" {
		undo.Add("delete the files from the checkpoint pool", func(context.Context) error { return p.pool.Delete(id) })
	}
	if err := p.mountDisk(id, gib, fresh); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	if _, err := os.Stat(filepath.Join(p.dir(id), "meta.json")); errors.Is(err, fs.ErrNotExist) {
		m := meta{CreatedAt: time.Now().UTC(), Labels: spec.Labels, Network: spec.Network, Egress: spec.Egress, Limits: lim, Mounts: mounts, Pool: spec.Pool, HostID: p.newHostID(id)}
		// The mount points, before anything else can put a file where one
		// goes: bwrap cannot bind a directory onto it.
		for _, mnt := range mounts {
			dir := filepath.Join(p.workspace(id), strings.TrimPrefix(mnt.Target, sandbox.WorkspaceDir+"/"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%w: create the mount point of %s: %w", sandbox.ErrUnavailable, mnt.Target, err)
			}
		}
		if err := writeJSONAtomic(filepath.Join(p.dir(id), "meta.json"), m); err != nil {
			return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
		}
	}
	if err := p.openEgress(id, spec); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	if fresh {
		undo.Add("close the egress socket", func(context.Context) error { return p.closeEgress(id) })
	}
	// After the disk's mount, which the stage takes in.
	m, err := p.readMeta(id)
	if err == nil {
		err = p.stageLocked(id, m)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	if fresh {
		undo.Add("unstage the root", func(context.Context) error { return p.unstage(id) })
	}
	if err := os.Remove(p.stoppedMark(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err)
	}
	// A namespace that failed before a stop may start now.
	p.nsFailed.Delete(id)
	return nil
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

// writeFileAtomic replaces path with data by a rename.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (p *Provider) readMeta(id string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(p.dir(id), "meta.json"))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

// Status reads the sandbox's state from its directory.
func (p *Provider) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if err := checkID(id); err != nil {
		return sandbox.StatusMissing, nil
	}
	if ok, err := p.exists(id); err != nil {
		return "", fmt.Errorf("bwrap status %s: %w", id, err)
	} else if !ok {
		return sandbox.StatusMissing, nil
	}
	if _, err := os.Stat(p.stoppedMark(id)); err == nil {
		return sandbox.StatusStopped, nil
	}
	return sandbox.StatusRunning, nil
}

// Stop kills every process of the sandbox and marks it stopped; files stay.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := os.Stat(p.dir(id)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Never in the middle of a namespace's start (see lockNamespace).
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return fmt.Errorf("bwrap stop %s: %w", id, err)
	}
	defer unlock()
	if _, err := os.Stat(p.dir(id)); errors.Is(err, fs.ErrNotExist) {
		return nil // deleted or adopted under another name meanwhile
	}
	if err := os.WriteFile(p.stoppedMark(id), nil, 0o600); err != nil {
		return fmt.Errorf("bwrap stop %s: %w", id, err)
	}
	if err := p.closeEgress(id); err != nil {
		return fmt.Errorf("bwrap stop %s: %w", id, err)
	}
	if err := p.cg.killAll(id, 10*time.Second); err != nil {
		return fmt.Errorf("bwrap stop %s: %w", id, err)
	}
	if err := p.unstage(id); err != nil {
		return fmt.Errorf("bwrap stop %s: %w", id, err)
	}
	return nil
}

// Delete kills the sandbox's processes and removes its cgroups and files.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return fmt.Errorf("bwrap delete %s: %w", id, err)
	}
	defer unlock()
	errs := []error{p.closeEgress(id)}
	if err := p.cg.killAll(id, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, p.cg.remove(id))
	if err := p.unstage(id); err != nil {
		return fmt.Errorf("bwrap delete %s: %w", id, errors.Join(append(errs, err)...))
	}
	if err := p.unmountDisk(id); err != nil {
		// Removing the directory now would empty the image's files
		// through the mount and leave the mount behind.
		return fmt.Errorf("bwrap delete %s: %w", id, errors.Join(append(errs, err)...))
	}
	if pid, ok := p.poolID(id); ok {
		checkpoint.SetImmutable(p.diskDir(id), false)
		if err := p.probe(); err != nil {
			return fmt.Errorf("bwrap delete %s: %w", id, errors.Join(append(errs, err)...))
		}
		if err := p.pool.Delete(pid); err != nil {
			// The mark stays with the directory: a retry finds them.
			return fmt.Errorf("bwrap delete %s: %w", id, errors.Join(append(errs, err)...))
		}
	}
	if err := os.RemoveAll(p.dir(id)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bwrap delete %s: %w", id, err)
	}
	return nil
}

// Files gives access to the sandbox's workspace directory, and to its
// mounts' directories at their targets.
func (p *Provider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if _, err := os.Stat(p.workspace(id)); err != nil {
		return nil, fmt.Errorf("bwrap files %s: %w", id, sandbox.ErrNotFound)
	}
	files := sandbox.DirFiles{Dir: p.workspace(id)}
	m, err := p.readMeta(id)
	if err != nil || len(m.Mounts) == 0 {
		return files, nil
	}
	return sandbox.MountedFiles{Workspace: files, Mounts: m.Mounts}, nil
}

// List returns every sandbox directory under Root.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	entries, err := os.ReadDir(p.cfg.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bwrap list: %w", err)
	}
	var out []sandbox.Resource
	for _, e := range entries {
		if !e.IsDir() || !sandbox.ValidID(e.Name()) {
			continue
		}
		st, err := p.Status(ctx, e.Name())
		if err != nil || st == sandbox.StatusMissing {
			continue
		}
		r := sandbox.Resource{ID: e.Name(), Status: st}
		if m, err := p.readMeta(e.Name()); err == nil {
			r.CreatedAt, r.Labels, r.Pool = m.CreatedAt, m.Labels, m.Pool
		} else if fi, err := e.Info(); err == nil {
			r.CreatedAt = fi.ModTime().UTC()
		}
		out = append(out, r)
	}
	return out, nil
}

// Processes returns the PIDs currently in the sandbox's cgroup; tests use
// it to prove nothing outlives a command.
func (p *Provider) Processes(id string) ([]int, error) { return p.cg.pids(id) }

// CommandProcesses is Processes without the long-lived namespace's own
// (its bwrap, bwrap's init inside, the agent and its spare shell): what
// commands started.
// Told apart by their command lines, which a command could imitate; it is
// for tests and operators, not for decisions.
func (p *Provider) CommandProcesses(id string) ([]int, error) {
	pids, err := p.cg.pids(id)
	if err != nil {
		return nil, err
	}
	out := pids[:0]
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if len(b) == 0 {
			continue // a zombie its parent is about to reap
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if p.usesAgent() && (argv[0] == p.bwrap && slices.Contains(argv[1:], agentBinPath) || argv[0] == agentBinPath || agent.IsSpareShell(argv)) {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}

// forwarderPath is where a sandbox with an allowlist sees the forwarder
// binary (Config.ForwarderBinary), read-only.
const forwarderPath = "/.flowbox-forward"

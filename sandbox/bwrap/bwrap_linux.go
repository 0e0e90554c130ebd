package bwrap

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/seccomp"
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
		CommandProcessesEnd: true, ReportsExhaustion: true, Stdin: true}
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
	if err := p.mountDisk(id, gib); err != nil {
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

// statusEvent is one JSON document bwrap writes to --json-status-fd.
type statusEvent struct {
	ChildPid *int `json:"child-pid"`
	ExitCode *int `json:"exit-code"`
}

// Exec runs one command in a fresh bwrap inside the sandbox's cgroups.
func (p *Provider) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := checkID(id); err != nil {
		return sandbox.ExecResult{}, err
	}
	if err := p.probe(); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: %w", sandbox.ErrUnavailable, err)
	}
	switch st, err := p.Status(ctx, id); {
	case err != nil:
		return sandbox.ExecResult{}, err
	case st == sandbox.StatusMissing:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", id, sandbox.ErrNotFound)
	case st == sandbox.StatusStopped:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w", id, sandbox.ErrNotRunning)
	}
	m, err := p.readMeta(id)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: read meta: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	timeout := req.Timeout
	switch {
	case req.LongLived():
		timeout = 0 // none
	case timeout <= 0:
		timeout = 30 * time.Second
	}
	if err := p.leaveHostNetwork(id, m); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	if p.usesAgent() {
		if res, handled, err := p.execAgent(ctx, id, m, req, timeout); handled {
			return res, err
		}
		defer p.startInBackground(id, m)
	}
	// The namespace's start stages the sandbox itself.
	if err := checkSources(m.Mounts); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	if err := p.stage(id, m); err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}

	// fd 3: bwrap reports the sandbox's init PID, then the exit code.
	// fd 4: bwrap's init waits for a byte on it before it starts the
	// command; meanwhile the engine moves bwrap and its init into the
	// sandbox's cgroups, so everything the command forks is inside them.
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
	}
	defer statusR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
	}
	defer blockW.Close()

	tctx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		tctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	if m.proxied() {
		// The bind needs the directory; without the proxy's socket in it
		// the forwarder answers 502.
		if err := os.MkdirAll(p.egressDir(id), 0o755); err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("bwrap exec %s: %w: %w", id, sandbox.ErrUnavailable, err)
		}
	}
	argv, err := p.argv(id, m, req)
	var files []*os.File
	if err == nil {
		argv, files, err = bwrapFiles(argv)
	}
	if err != nil {
		statusW.Close()
		blockR.Close()
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: %w", sandbox.ErrUnavailable, err)
	}
	defer closeAll(files)
	cmd := exec.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = append([]*os.File{statusW, blockR}, files...)
	cmd.SysProcAttr = p.procAttr(&syscall.SysProcAttr{Setpgid: true}, id, m)
	// Killing bwrap kills the sandboxed command (--die-with-parent), and with
	// it the PID namespace and every process in it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	col := sandbox.NewCollector(0, req.OnOutput)
	var stderrBuf tailBuffer
	cmd.Stdout = col.Stdout()
	cmd.Stderr = io.MultiWriter(col.Stderr(), &stderrBuf)
	if req.LongLived() {
		// bwrap passes its standard input to the command: a pipe fed
		// from Stdin, which Wait does not wait for (a Read of Stdin may
		// block until the caller closes it).
		inR, inW, err := os.Pipe()
		if err != nil {
			return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", err)
		}
		defer inW.Close()
		cmd.Stdin = inR
		defer inR.Close()
		go func() {
			_, _ = io.Copy(inW, req.Stdin)
			inW.Close()
		}()
	}

	// The sandbox's counters of exhaustion, read around the command: with
	// other commands running in the sandbox meanwhile, what they hit is
	// reported for this one too.
	before := p.cg.exhaustion(id)
	result := func(exitCode int, timedOut bool, duration time.Duration) sandbox.ExecResult {
		res := col.Result(exitCode, timedOut, timeout, duration)
		res.OOMKilled, res.PidsLimited = before.During(p.cg.exhaustion(id))
		return res
	}
	start := time.Now()
	err = cmd.Start()
	statusW.Close()
	blockR.Close()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: start: %w: %w", sandbox.ErrUnavailable, err)
	}
	events := make(chan statusEvent, 4)
	go func() {
		defer close(events)
		dec := json.NewDecoder(bufio.NewReader(statusR))
		for {
			var ev statusEvent
			if dec.Decode(&ev) != nil {
				return
			}
			events <- ev
		}
	}()
	started, exitCode := false, -1
	var joinErr error
	for ev := range events {
		if ev.ChildPid != nil {
			started = true
			if joinErr = p.cg.join(p.ctls, id, cmd.Process.Pid, *ev.ChildPid); joinErr != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_, joinErr = blockW.Write([]byte{1})
			}
			blockW.Close()
			break
		}
	}
	waitErr := cmd.Wait()
	duration := time.Since(start)
	for ev := range events {
		if ev.ExitCode != nil {
			exitCode = *ev.ExitCode
		}
	}
	timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	switch {
	case ctx.Err() != nil:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w", ctx.Err())
	case joinErr != nil:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: put the command in the sandbox's cgroups: %w", sandbox.ErrUnavailable, joinErr)
	case timedOut:
		return result(-1, true, duration), nil
	case !started:
		return sandbox.ExecResult{}, fmt.Errorf("bwrap exec: %w: bwrap failed before the command started (%v): %s",
			sandbox.ErrUnavailable, waitErr, strings.TrimSpace(stderrBuf.String()))
	}
	if exitCode < 0 && cmd.ProcessState != nil {
		exitCode = cmd.ProcessState.ExitCode()
	}
	return result(exitCode, false, duration), nil
}

// bwrapFiles are bwrap's descriptors 5 and 6: the seccomp filter
// (--seccomp 5) and its options up to "--" (--args 6), each a pipe holding
// it whole. The options travel there rather than on the command line so
// that the sandbox's PID 1, bwrap's init, shows no host path in
// /proc/1/cmdline; the program after "--" stays on it.
func bwrapFiles(argv []string) (cmdArgv []string, files []*os.File, err error) {
	prog, err := seccomp.Program()
	if err != nil {
		return nil, nil, err
	}
	end := slices.Index(argv, "--")
	if end < 0 {
		end = len(argv)
	}
	var opts []byte
	for _, a := range argv[1:end] {
		opts = append(append(opts, a...), 0)
	}
	for _, data := range [][]byte{prog, opts} {
		f, err := pipeHolding(data)
		if err != nil {
			closeAll(files)
			return nil, nil, err
		}
		files = append(files, f)
	}
	return append([]string{argv[0], "--args", "6"}, argv[end:]...), files, nil
}

// pipeHolding is the read end of a pipe holding data, its write end
// closed. data must fit the pipe (64 KiB).
func pipeHolding(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// argv returns the bwrap command line for req in the sandbox that m
// describes.
func (p *Provider) argv(id string, m meta, req sandbox.ExecRequest) ([]string, error) {
	argv, err := p.namespaceArgs(id, m, true)
	if err != nil {
		return nil, err
	}
	// The state is read here, on the host, as data (T3).
	shell := sandbox.ArgvFor(req, p.cfg.Shell, sandbox.StateDir, sandbox.WorkspaceDir, sandbox.ReadShellState(p.stateDir(id)))
	if !m.proxied() {
		return append(append(argv, "--"), shell...), nil
	}
	// Each command has a network namespace of its own: its forwarder
	// listens there before the command starts, and ends with it.
	argv = append(argv, "--", forwarderPath, "egress-forward",
		"-listen", egress.ListenAddr, "-socket", egress.SocketPath, "--")
	return append(argv, shell...), nil
}

// procAttr is attr for a bwrap of the sandbox that m describes: started
// as its host user when sandboxes have their own (idmap_linux.go).
func (p *Provider) procAttr(attr *syscall.SysProcAttr, id string, m meta) *syscall.SysProcAttr {
	switch {
	case p.ids == nil:
		return attr
	case p.ids.userns:
		return idProcAttr(attr, m.hostUser(id))
	}
	return hostProcAttr(attr, m.hostUser(id))
}

// namespaceArgs are bwrap's options for the sandbox that m describes: its
// namespaces, mounts and environment, up to the program to run. A
// command's bwrap dies with the engine (dieWithParent); the long-lived
// namespace of the agent outlives it, as a container does.
func (p *Provider) namespaceArgs(id string, m meta, dieWithParent bool) ([]string, error) {
	// Never --share-net, whatever m.Network says: see network_linux.go.
	withEgress := m.proxied()
	// A user namespace of its own in which no further one can be made
	// (--disable-userns), and the seccomp filter on descriptor 5 (T2).
	argv := []string{p.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--seccomp", "5"}
	if p.ids != nil && !p.ids.userns {
		// bwrap runs as the sandbox's host user: its root inside.
		argv = append(argv, "--uid", "0", "--gid", "0")
	}
	if dieWithParent {
		argv = append(argv, "--die-with-parent")
	}
	argv = append(argv,
		"--new-session", "--cap-drop", "ALL",
		"--json-status-fd", "3", "--block-fd", "4",
		"--hostname", "sandbox",
	)
	argv = append(argv, p.sysArgs...)
	argv = append(argv,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(p.cfg.TmpSizeMiB<<20, 10), "--tmpfs", "/tmp",
		"--bind", p.source(id, p.workspace(id)), sandbox.WorkspaceDir,
	)
	// Inside /workspace, so after its bind.
	argv = append(argv, mountArgs(p.stagedMounts(id, m.Mounts))...)
	argv = append(argv,
		"--bind", p.source(id, p.stateDir(id)), sandbox.StateDir,
		"--bind", p.source(id, p.homeDir(id)), "/root",
	)
	if withEgress {
		forwarder, err := p.reachable(p.cfg.ForwarderBinary)
		if err != nil {
			return nil, err
		}
		argv = append(argv,
			"--ro-bind", p.source(id, p.egressDir(id)), egress.SocketDir,
			"--ro-bind", forwarder, forwarderPath,
		)
	}
	argv = append(argv,
		"--chdir", sandbox.WorkspaceDir,
		"--clearenv",
		"--setenv", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--setenv", "HOME", "/root",
		"--setenv", "USER", "root",
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "TERM", "dumb",
	)
	if withEgress {
		for _, kv := range egress.Env() {
			k, v, _ := strings.Cut(kv, "=")
			argv = append(argv, "--setenv", k, v)
		}
	}
	return argv, nil
}

// systemMounts binds the host's /usr read-only, mirrors the top-level
// links into it (/bin → usr/bin on merged-/usr systems), and binds the
// snapshot of the allowed /etc entries: no shadow, no host secrets.
func systemMounts(etcDir string) []string {
	return append(usrMounts(), "--ro-bind", etcDir, "/etc")
}

// usrMounts binds /usr read-only and mirrors the top-level directories and
// links into it.
func usrMounts() []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(top)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(top); err == nil {
				args = append(args, "--symlink", target, top)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", top, top)
		}
	}
	return args
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

// tailBuffer keeps the last 4 KiB written, for bwrap's own error message.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// forwarderPath is where a sandbox with an allowlist sees the forwarder
// binary (Config.ForwarderBinary), read-only.
const forwarderPath = "/.flowbox-forward"

package bwrap

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox's root is not the host's (T2). When the engine runs as root,
// bwrap runs as an unprivileged user of the host, the sandbox's host user
// (a number of its own per sandbox, kept in meta.json), and makes the
// sandbox's user namespace, whose only user, root, is that host user
// (--uid 0). A process that escaped every namespace would be that user:
// no capability on the host, none of root's files to write, no other
// sandbox's process to signal or trace.
//
// The engine keeps every file as it always has, owned by root. The
// sandbox sees its directories through ID-mapped mounts (mount_setattr
// with MOUNT_ATTR_IDMAP, Linux 5.12): root's files there are its root's,
// and what it writes lands as root's on disk. Nothing is chowned, for old
// sandboxes either, and the engine's writes (uploads, the file API, the
// agent's token) need no step of their own.
//
// bwrap reads its mount sources by path with the sandbox's host user's
// rights, so every source must be reachable by that user: the sandbox's
// directory and its mounts' sources are mounted, ID-mapped, under
// Config.StageDir (the stage, stage_linux.go), and the /etc
// snapshot and the agent's and forwarder's binaries are copied there when
// their own paths are not.
//
// An engine that is not root runs bwrap as itself: the sandbox's root is
// then that user already. A filesystem without ID-mapped mounts leaves
// the sandboxes as the host's root, with a warning at start.

const (
	// hostIDBase and hostIDRange are the host users of sandboxes: past
	// the ranges distributions give users and subordinate IDs
	// (/etc/subuid starts at 100000 and rarely reaches 2^30).
	hostIDBase  = 1 << 30
	hostIDRange = 1 << 24
)

// hostID is the host user (and group) of a sandbox made before host
// users were kept in its meta.json: a hash of its id. A sandbox keeps the
// one it was created with (meta.HostID; idMap.newHostID), also when
// adopted under another name.
func hostID(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return hostIDBase + h.Sum32()%hostIDRange
}

// newHostID is the host user of the new sandbox id.
func (p *Provider) newHostID(id string) uint32 {
	if p.ids == nil {
		return hostID(id) // kept for when the engine runs as root
	}
	return p.ids.newHostID(p)
}

// hostUser is the host user the sandbox that m describes runs as.
func (m meta) hostUser(id string) uint32 {
	if m.HostID != 0 {
		return m.HostID
	}
	return hostID(id) // made before host users were kept
}

// idMap is how the provider maps sandboxes' users: nil while the engine
// is not root or the filesystem cannot.
type idMap struct {
	// stage holds one directory per running sandbox (Config.StageDir
	// and a digest of Root, so that providers with other roots do not
	// meet), reachable by every user.
	stage string
	// userns: the engine makes bwrap's user namespace (idProcAttr), on
	// a machine where bwrap started as an unprivileged user cannot make
	// one itself. Otherwise bwrap runs as the host user (hostProcAttr),
	// which costs nothing: making the namespace in Go's child forks the
	// engine's whole address space, milliseconds a command.
	userns bool
	// unshare is util-linux's unshare, which makes the user namespaces
	// of stages (userNamespace).
	unshare string

	// spare is a user namespace made ahead for the next new sandbox,
	// with a host user of its own (newHostID), once the provider made
	// one: making it costs a few execs (milliseconds on a new chat's
	// first command).
	mu        sync.Mutex
	spare     *spareNS
	refilling bool
	// taken are spares given to new sandboxes, until their stage.
	taken map[uint32]*os.File
}

// refillDelay is how long after a new sandbox took the spare namespace
// the next is made.
const refillDelay = 250 * time.Millisecond

// spareNS is a user namespace whose root is host user uid.
type spareNS struct {
	uid uint32
	ns  *os.File
}

// newHostID is a new sandbox's host user: the spare namespace's when
// there is one (kept for the sandbox's stage, and a new spare made in the
// background), else a random one of the range.
func (m *idMap) newHostID(p *Provider) uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer func() {
		if m.spare == nil && !m.refilling {
			m.refilling = true
			// Later, not beside the new sandbox's first command, which
			// it would slow by as much as it costs.
			time.AfterFunc(refillDelay, func() { m.refill(p) })
		}
	}()
	if sp := m.spare; sp != nil {
		m.spare = nil
		if m.taken == nil {
			m.taken = map[uint32]*os.File{}
		}
		if old, ok := m.taken[sp.uid]; ok {
			old.Close()
		}
		m.taken[sp.uid] = sp.ns
		return sp.uid
	}
	return randomHostID()
}

// randomHostID is a host user of the range, at random: two sandboxes
// share one only by chance (among the 200 sandboxes of a full machine, a
// chance of about 1 in 840).
func randomHostID() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hostIDBase + binary.LittleEndian.Uint32(b[:])%hostIDRange
}

// namespaceFor is a user namespace whose root is host user uid: the one
// newHostID kept for it, else a new one.
func (m *idMap) namespaceFor(p *Provider, uid uint32) (*os.File, error) {
	m.mu.Lock()
	ns, ok := m.taken[uid]
	delete(m.taken, uid)
	m.mu.Unlock()
	if ok {
		return ns, nil
	}
	return p.userNamespace(uid)
}

// refill makes the next spare namespace.
func (m *idMap) refill(p *Provider) {
	uid := randomHostID()
	ns, err := p.userNamespace(uid)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refilling = false
	if err != nil {
		p.log().Warn("bwrap: make a spare user namespace", "err", err)
		return
	}
	if m.spare != nil {
		ns.Close()
		return
	}
	m.spare = &spareNS{uid: uid, ns: ns}
}

// setUpIDMap decides whether sandboxes get host users of their own, and
// prepares the stage. Called once, by probe.
func (p *Provider) setUpIDMap() error {
	if os.Geteuid() != 0 {
		return nil
	}
	// The root is made here if it is new (a first start): the check
	// below maps it.
	if err := os.MkdirAll(p.cfg.Root, 0o755); err != nil {
		return fmt.Errorf("create the sandboxes' directory: %w", err)
	}
	stage := stageRoot(p.cfg.StageDir, p.cfg.Root)
	for _, dir := range []string{p.cfg.StageDir, stage} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return fmt.Errorf("create the stage directory: %w", err)
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return fmt.Errorf("create the stage directory: %w", err)
		}
	}
	if err := privateMount(p.cfg.StageDir); err != nil {
		return fmt.Errorf("make the stage directory a private mount: %w", err)
	}
	// Can this machine map the root's filesystem? Tried on the root
	// itself, onto a mount point of the stage.
	try, err := os.MkdirTemp(stage, ".try-")
	if err != nil {
		return fmt.Errorf("create the stage directory: %w", err)
	}
	defer os.Remove(try)
	ns, err := p.userNamespace(hostIDBase)
	if err == nil {
		err = idMapped(p.cfg.Root, try, ns)
		ns.Close()
	}
	if err != nil {
		p.log().Warn("bwrap: sandboxes run as the host's root user: this machine cannot give them a user of their own (ID-mapped mounts of "+p.cfg.Root+")", "err", err)
		return nil
	}
	if err := unix.Unmount(try, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", try, err)
	}
	p.ids = &idMap{stage: stage}
	// bwrap as an unprivileged user makes its own user namespace where
	// the kernel lets such users (Debian's default; not Ubuntu 24.04's
	// AppArmor restriction).
	probe := exec.Command(p.bwrap, append(append([]string{"--unshare-all", "--unshare-user", "--uid", "0", "--gid", "0", "--disable-userns", "--cap-drop", "ALL"},
		usrMounts()...), "/usr/bin/true")...)
	probe.Env, probe.Dir = []string{}, "/"
	probe.SysProcAttr = hostProcAttr(&syscall.SysProcAttr{}, hostIDBase)
	if out, err := probe.CombinedOutput(); err != nil {
		p.ids.userns = true
		p.log().Info("bwrap: an unprivileged user cannot make user namespaces here; the engine makes each command's (slower)", "err", err, "output", strings.TrimSpace(string(out)))
	} else if p.ids.unshare, err = exec.LookPath("unshare"); err != nil {
		p.ids.userns = true // the stage's namespaces the slow way
		p.log().Info("bwrap: no unshare (util-linux); a sandbox's stage takes longer to make", "err", err)
	}
	p.sweepStage()
	return nil
}

// hostProcAttr is the SysProcAttr that starts bwrap as the host user uid
// (and its group, with no other): bwrap makes its user namespace itself,
// the sandbox's root (--uid 0) mapped to uid.
func hostProcAttr(attr *syscall.SysProcAttr, uid uint32) *syscall.SysProcAttr {
	attr.Credential = &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}
	return attr
}

// idProcAttr is the SysProcAttr that starts bwrap as root of a new user
// namespace whose root is the host user uid.
func idProcAttr(attr *syscall.SysProcAttr, uid uint32) *syscall.SysProcAttr {
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: 1}}
	attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	return attr
}

// userNamespace opens a user namespace whose root is the host user uid:
// the mapping of an ID-mapped mount. A program started in it, as that
// user, waits for its input meanwhile; the namespace outlives it for as
// long as the returned file (or a mount) holds it.
//
// Where unprivileged users may make user namespaces, that program is
// unshare's (util-linux) child, started as uid: Go then starts it the
// cheap way (vfork). Otherwise (ids.userns) Go's child makes the
// namespace, which forks the engine's whole address space: tens of
// milliseconds in a large process.
func (p *Provider) userNamespace(uid uint32) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var cmd *exec.Cmd
	if p.ids == nil || p.ids.userns || p.ids.unshare == "" {
		cmd = exec.Command(p.cfg.Shell) // reads its script from standard input
		cmd.SysProcAttr = idProcAttr(&syscall.SysProcAttr{}, uid)
	} else {
		cmd = exec.Command(p.ids.unshare, "--user", "--map-root-user", "cat")
		cmd.SysProcAttr = hostProcAttr(&syscall.SysProcAttr{}, uid)
	}
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.Dir = "/"
	err = cmd.Start()
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("make a user namespace for host user %d: %w", uid, err)
	}
	defer func() {
		w.Close()
		_ = cmd.Wait()
	}()
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)
	// unshare maps its new namespace's root to uid, then runs the shell:
	// until then the process shows the host's map, or none.
	want := fmt.Sprintf("0 %d 1", uid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		b, err := os.ReadFile(proc + "/uid_map")
		if err != nil {
			return nil, fmt.Errorf("make a user namespace for host user %d: %w", uid, err)
		}
		if strings.Join(strings.Fields(string(b)), " ") == want {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("make a user namespace for host user %d: no mapping after 5 s (%q)", uid, b)
		}
	}
	ns, err := os.Open(proc + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("make a user namespace for host user %d: %w", uid, err)
	}
	return ns, nil
}

// idMapped mounts the tree at src (its submounts included) on dst, with
// the host's root shown as the root of the user namespace ns (and the
// reverse for what is written).
func idMapped(src, dst string, ns *os.File) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone the mount of %s: %w", src, err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("map %s to a host user: %w", src, err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s on %s: %w", src, dst, err)
	}
	return nil
}

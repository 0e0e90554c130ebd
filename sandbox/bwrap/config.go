// Package bwrap runs sandboxes with bubblewrap: no daemon, one fresh set of
// namespaces per command (or, with Config.AgentBinary, one long-lived
// namespace per running sandbox with the command agent in it), the host's
// system mounted read-only, a private
// /tmp, no network unless asked, and memory, process-count and CPU limits
// through a per-sandbox cgroup (v1). When the engine is root, the
// sandbox's root is an unprivileged host user of its own (idmap_linux.go).
// The sandbox's workspace, shell state and home are host directories
// under Config.Root; the engine's
// directories in the spec's mounts are bound inside /workspace, those
// marked read-only read-only.
//
// It must never expose the host's /etc wholesale, its network, or any
// process outside the sandbox's PID namespace. Processes a command leaves
// in the background end with it: on the per-command path with its PID
// namespace, in the long-lived namespace by the agent's hand. A disk limit makes the workspace a filesystem of that size
// (package diskimage).
package bwrap

import (
	"log/slog"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// Config configures the provider. Zero values have the documented defaults.
type Config struct {
	// Root holds one directory per sandbox. Default /var/lib/flowbox/bwrap.
	Root string
	// BwrapPath is the bwrap binary. Default "bwrap" from PATH.
	BwrapPath string
	// Shell interprets commands. Default /bin/bash.
	Shell string
	// CgroupMount is where cgroup v1 controllers are mounted. Default
	// /sys/fs/cgroup.
	CgroupMount string
	// CgroupParent is the group under each controller that holds the
	// sandboxes' groups. Default "flowbox".
	CgroupParent string
	// DefaultLimits apply field by field where a sandbox's Spec sets none.
	// Default 1 CPU, 512 MiB, 256 processes.
	DefaultLimits sandbox.Limits
	// TmpSizeMiB bounds the private /tmp of each command. Default 256.
	TmpSizeMiB int64
	// EtcEntries are the names under the host's /etc that sandboxes see.
	// Default: what programs need to run (alternatives, ssl, ld.so.cache,
	// passwd, group, ...), never shadow or other secrets.
	EtcEntries []string
	// Egress is the engine's egress proxy, which serves the sandboxes
	// whose spec has an allowlist (sandbox.Spec.Egress); nil: such a
	// spec fails to ensure.
	Egress *egress.Proxy
	// ForwarderBinary is an engine binary, as this process sees it, that
	// runs the egress forwarder (engine egress-forward) inside sandboxes
	// with an allowlist. The host's libraries are visible in the sandbox,
	// so it need not be static. Default: this process's executable.
	ForwarderBinary string
	// AgentBinary is an engine binary, as this process sees it, whose
	// sandbox-agent command runs a running sandbox's commands in one
	// long-lived namespace (see agent_linux.go); it need not be static.
	// Empty: every command is a bwrap of its own. The engine sets its own
	// executable.
	AgentBinary string
	// StageDir is where, when the engine runs as root, each running
	// sandbox's directories are mounted for bwrap to bind, mapped to the
	// sandbox's host user (see idmap_linux.go), and where the files
	// every sandbox binds are copied when their own paths do not let
	// other users through. Default /run/flowbox.
	StageDir string
	// CheckpointPool, when set, is a directory on btrfs where new
	// sandboxes keep their writable files, so that they have checkpoints
	// (see checkpoint_linux.go); their disk limit is a quota there
	// instead of an image. Empty: no checkpoints.
	CheckpointPool string
	// Logger receives what is not returned (a namespace out of reach).
	// Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Root == "" {
		c.Root = "/var/lib/flowbox/bwrap"
	}
	if c.StageDir == "" {
		c.StageDir = "/run/flowbox"
	}
	if c.BwrapPath == "" {
		c.BwrapPath = "bwrap"
	}
	if c.Shell == "" {
		c.Shell = "/bin/bash"
	}
	if c.CgroupMount == "" {
		c.CgroupMount = "/sys/fs/cgroup"
	}
	if c.CgroupParent == "" {
		c.CgroupParent = "flowbox"
	}
	if c.DefaultLimits == (sandbox.Limits{}) {
		c.DefaultLimits = sandbox.Limits{CPUCount: 1, MemoryMiB: 512, Pids: 256}
	}
	if c.TmpSizeMiB <= 0 {
		c.TmpSizeMiB = 256
	}
	if c.EtcEntries == nil {
		c.EtcEntries = []string{
			"alternatives", "ssl", "ca-certificates", "ca-certificates.conf",
			"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
			"nsswitch.conf", "passwd", "group", "hosts", "resolv.conf", "host.conf",
			"profile", "bash.bashrc", "inputrc", "mime.types", "debian_version",
			"os-release", "gitconfig", "python3", "python3.11", "perl",
		}
	}
}

// limits fills the unset fields of l from the defaults.
func (c *Config) limits(l sandbox.Limits) sandbox.Limits {
	d := c.DefaultLimits
	if l.CPUCount > 0 {
		d.CPUCount = l.CPUCount
	}
	if l.MemoryMiB > 0 {
		d.MemoryMiB = l.MemoryMiB
	}
	if l.Pids > 0 {
		d.Pids = l.Pids
	}
	if l.DiskGiB > 0 {
		d.DiskGiB = l.DiskGiB
	}
	return d
}

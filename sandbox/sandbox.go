package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Sentinel errors. Callers check them with errors.Is; the edges (web,
// nodes/toolcall) turn them into HTTP statuses or tool results.
var (
	// ErrNotFound: the sandbox, its record or a file in it does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the provider cannot serve now (daemon down, create
	// failed). The agent sees exitCode -1 and may retry later.
	ErrUnavailable = errors.New("sandbox service temporarily unavailable, retry later")
	// ErrNotRunning: Exec met a sandbox that exists but is stopped; the
	// command did not start. Callers ensure the sandbox and retry.
	ErrNotRunning = errors.New("sandbox is not running")
	// ErrInvalidPath: a path leaves /workspace or names something that is
	// not a regular file or directory.
	ErrInvalidPath = errors.New("invalid path")
	// ErrTooLarge: a file or body is over the configured bound.
	ErrTooLarge = errors.New("too large")
	// ErrUnsupported: the provider cannot run on this machine.
	ErrUnsupported = errors.New("unsupported")
	// ErrRefused: a policy refused the call before it ran. The error is a
	// *RefusedError that names the rule.
	ErrRefused = errors.New("refused by policy")
	// ErrReadOnly: a write to a read-only mount (the skills).
	ErrReadOnly = errors.New("read-only")
	// ErrNoStdin: a command with standard input (ExecRequest.Stdin) met a
	// provider, or a sandbox, that cannot give it one.
	ErrNoStdin = errors.New("this sandbox cannot give a command standard input")
)

// RefusedError is a policy's refusal: the rule that decided, why, and
// what is allowed instead. It matches ErrRefused.
type RefusedError struct {
	// Rule names the rule (its id in the policy).
	Rule string
	// Justification is the rule's reason, written for the model and the
	// user.
	Justification string
	// Hint says what the policy allows instead, when it can.
	Hint string
}

func (e *RefusedError) Error() string {
	msg := "refused by policy rule " + strconv.Quote(e.Rule)
	if e.Justification != "" {
		msg += ": " + e.Justification
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Status is a sandbox's lifecycle state as stored in sandbox_instances.
type Status string

const (
	StatusRunning Status = "running"
	// StatusStopped keeps the seed's spelling for data compatibility.
	StatusStopped Status = "stoped"
	// StatusMissing is reported by providers only: nothing exists.
	StatusMissing Status = "missing"
)

// WorkspaceDir is where the workspace appears inside every sandbox.
const WorkspaceDir = "/workspace"

// StateDir is where the persistent shell keeps its state inside the
// sandbox (cwd and exported variables), out of the user's workspace.
const StateDir = "/.flowbox"

// ValidID reports whether id has the shape IDFor produces. Providers use it
// to refuse ids that could name paths or containers they do not own.
func ValidID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Limits are the resources one sandbox may use. Zero means "provider
// default" for each field.
type Limits struct {
	CPUCount  float64 `bson:"cpuCount" json:"cpuCount"`
	MemoryMiB int64   `bson:"memoryMiB" json:"memoryMiB"`
	DiskGiB   int64   `bson:"diskGiB" json:"diskGiB"`
	Pids      int64   `bson:"pids,omitempty" json:"pids,omitempty"`
}

// Or fills the zero (or negative) fields of l from def.
func (l Limits) Or(def Limits) Limits {
	if l.CPUCount <= 0 {
		l.CPUCount = def.CPUCount
	}
	if l.MemoryMiB <= 0 {
		l.MemoryMiB = def.MemoryMiB
	}
	if l.DiskGiB <= 0 {
		l.DiskGiB = def.DiskGiB
	}
	if l.Pids <= 0 {
		l.Pids = def.Pids
	}
	return l
}

// Spec is what a provider needs to create a sandbox.
type Spec struct {
	ID     string
	Limits Limits
	// Network allows outbound network; off unless the operator opts in.
	Network bool
	// Egress, when not empty, is the allowlist of host names (patterns of
	// sandbox/egress: "pypi.org", "*.pythonhosted.org") the sandbox may
	// reach through the engine's egress proxy. The sandbox still has no
	// network interface. Exclusive with Network.
	Egress []string
	// Labels identify the owner (appId, userId, chatId) on the provider's
	// resources so that orphans can be traced.
	Labels map[string]string
	// Mounts are host directories the sandbox sees (the chat's uploads
	// and intermediate files, the skills), fixed when the sandbox is
	// created.
	Mounts []Mount
	// Pool marks a warm pool's member (B2): a started sandbox that no
	// chat owns yet, named by a pool id of IDFor's shape. List reports it
	// with Resource.Pool, so that reconciliation does not take it for an
	// orphan; Adopter.Adopt gives it to a chat.
	Pool bool
}

// Mount is a host directory a sandbox sees at Target.
type Mount struct {
	// Source is the directory as the engine sees it; a provider whose
	// daemon sees the engine's files at other paths maps it.
	Source string `json:"source"`
	// Target is the absolute path inside the sandbox: UploadsDir,
	// IntermediateDir or SkillsDir.
	Target string `json:"target"`
	// ReadOnly: a write to it fails inside the sandbox.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// The workspace's mounts inside every sandbox (K1): the chat's uploads
// and intermediate files (read-write) and the skills (read-only).
const (
	UploadsDir      = WorkspaceDir + "/uploads"
	IntermediateDir = WorkspaceDir + "/intermediate"
	SkillsDir       = WorkspaceDir + "/skills"
)

// Capabilities are fixed facts about a provider; callers read them instead
// of type-switching on providers.
type Capabilities struct {
	FilesystemIsolation bool `json:"filesystemIsolation"`
	NetworkIsolation    bool `json:"networkIsolation"`
	ResourceLimits      bool `json:"resourceLimits"`
	Streaming           bool `json:"streaming"`
	// CommandProcessesEnd: every process a command starts ends with the
	// command, those it left in the background or detached with setsid
	// included. Without it, some of them may keep running after the
	// command returned, until the sandbox stops: a server started with &
	// can still be there for the next command.
	CommandProcessesEnd bool `json:"commandProcessesEnd"`
	// ReportsExhaustion: results say when a command met the sandbox's
	// memory or process limit (ExecResult.OOMKilled, PidsLimited).
	ReportsExhaustion bool `json:"reportsExhaustion"`
	// Stdin: commands may have standard input (ExecRequest.Stdin).
	Stdin bool `json:"stdin"`
	// Checkpoints: the provider keeps checkpoints of its sandboxes' files
	// and shell state, restores and forks them (CheckpointProvider).
	// Without it, the chat pages offer no rewind and no branch.
	Checkpoints bool `json:"checkpoints"`
	// Unsafe marks a provider that gives commands the engine's own
	// privileges (host). Prompts and logs must say so.
	Unsafe bool `json:"unsafe"`
}

// Stream names an output stream in live output callbacks.
type Stream int

const (
	Stdout Stream = 1
	Stderr Stream = 2
)

// ExecRequest is one shell command.
type ExecRequest struct {
	Command string
	// Timeout is enforced by the provider: when it passes, every process
	// the command started is killed. The manager clamps it to 1s–300s.
	Timeout time.Duration
	// OnOutput, when set, receives output as it is produced (B5). It is
	// called from one goroutine at a time, never after Exec returned, and
	// must not retain p. Middleware may wrap it (see Middleware).
	OnOutput func(s Stream, p []byte)
	// Actor is who asks for the command; the zero value is an unknown
	// caller. The manager's middleware reads it, providers ignore it.
	Actor Actor
	// Approved is the command line a person approved (P10), set by the
	// caller that asked them. The command policy lets a command its ask
	// rules match run when Approved is exactly Command; a forbid still
	// refuses it.
	Approved string
	// Stdin, when set, is the command's standard input, for a program
	// the caller talks to (an MCP server on stdio). Such a command is
	// long-lived: it has no timeout (Timeout is ignored, and middleware
	// sets none), its live output is neither cut nor held back beyond a
	// redaction's lookahead, and it runs until it exits, ctx ends or the
	// sandbox stops. The manager does not refresh the sandbox's record
	// while it runs: the caller counts its own use (Manager.Ensure), so
	// that an idle sandbox still stops. Providers whose Capabilities lack
	// Stdin refuse it with ErrNoStdin, as a sandbox may that cannot give
	// one (a container without the agent). The provider reads Stdin from
	// a goroutine of its own that may outlive Exec: the caller ends it
	// (closes it) once Exec returned.
	Stdin io.Reader
	// Background, when set, starts the command as a background process
	// of the sandbox (Processes.StartProcess) instead of running it: it
	// passes the same middleware as any command (policy, approvals,
	// audit), and the result names the process (ExecResult.Process). A
	// sandbox that keeps none answers it as a failed command saying why.
	Background bool
}

// LongLived reports whether the command runs with standard input and no
// timeout (see Stdin).
func (r ExecRequest) LongLived() bool { return r.Stdin != nil }

// ExecResult is what a command produced. Stdout and Stderr are valid UTF-8
// and capped (head and tail kept, the cut marked).
type ExecResult struct {
	Stdout    string        `json:"stdout"`
	Stderr    string        `json:"stderr"`
	ExitCode  int           `json:"exitCode"`
	Duration  time.Duration `json:"-"`
	TimedOut  bool          `json:"timedOut,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
	// OOMKilled: the OOM killer of the sandbox's memory limit killed a
	// process while the command ran. PidsLimited: a fork failed at the
	// sandbox's process limit meanwhile. Both are read from counters of
	// the whole sandbox, so a command running at the same time in the
	// same sandbox may be the one that caused them. Set only by providers
	// whose Capabilities say ReportsExhaustion.
	OOMKilled   bool `json:"oomKilled,omitempty"`
	PidsLimited bool `json:"pidsLimited,omitempty"`
	// Process is the background process a Background request started.
	Process *Process `json:"process,omitempty"`
}

// Resource is one sandbox a provider holds, as found by List.
type Resource struct {
	ID        string
	Status    Status
	CreatedAt time.Time
	Labels    map[string]string
	// Pool: a warm pool's member not yet adopted (Spec.Pool).
	Pool bool
}

// Adopter is a provider that can give a running warm pool member to a
// chat (B2) instead of creating the chat's sandbox.
type Adopter interface {
	// Adopt makes the running pool member poolID the sandbox spec.ID.
	// Afterwards poolID names nothing, and spec.ID is in every way a
	// sandbox Ensure(spec) created: its labels (List), its mounts across
	// a stop and start, Delete leaving nothing of either name. The member
	// was created with the same limits, network and egress as spec; its
	// mounts had other sources, which the caller has moved: each
	// writable mount's directory now is spec's source for the same
	// target, and the member's old source path still leads to it (a
	// symbolic link), for providers whose restart finds sources by path.
	// Adopt fails with ErrNotFound when poolID does not exist or does not
	// run, and with an error, touching nothing, when spec.ID exists.
	Adopt(ctx context.Context, poolID string, spec Spec) error
}

// Provider runs sandboxes. Implementations: sandbox/docker, sandbox/bwrap,
// sandbox/host. All methods are safe for concurrent use; Ensure, Stop and
// Delete are idempotent, also across engine processes.
type Provider interface {
	// Name is the provider's name as stored in records ("docker", ...).
	Name() string
	Capabilities() Capabilities
	// Fingerprint says why the provider cannot run here (nil when it can).
	Fingerprint(ctx context.Context) error
	// Ensure makes the sandbox run: missing → create, stopped → start,
	// running → nothing.
	Ensure(ctx context.Context, spec Spec) error
	// Exec runs a command through the persistent shell. A command that
	// fails or times out is a result, not an error; errors mean the
	// sandbox could not run it at all: ErrNotFound when the sandbox does
	// not exist, ErrNotRunning when it is stopped. Exec never creates or
	// starts a sandbox.
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)
	// Stop ends every process of the sandbox and keeps its files.
	Stop(ctx context.Context, id string) error
	// Delete removes everything the sandbox owns. Deleting a missing
	// sandbox is not an error.
	Delete(ctx context.Context, id string) error
	Status(ctx context.Context, id string) (Status, error)
	// Files gives access to the sandbox's /workspace as its commands see
	// it, its mounts included (MountedFiles). It does not start the
	// sandbox; ErrNotFound when the sandbox does not exist.
	Files(ctx context.Context, id string) (Files, error)
	// List returns every sandbox this provider holds, for reconciliation.
	List(ctx context.Context) ([]Resource, error)
}

// FileInfo describes one entry of the workspace. Path is absolute inside
// the sandbox (/workspace/...).
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"` // "file" | "directory" | "symlink" | "other"
	Size    int64     `json:"size"`
	ModTime time.Time `json:"modTime"`
	// ReadOnly: the entry is in a read-only mount (the skills), or is
	// one (E4).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Files are the operations on a sandbox's workspace. Paths are absolute
// inside the sandbox (/workspace/...) or relative to /workspace; nothing
// outside /workspace is reachable, whatever links the sandbox plants.
type Files interface {
	List(ctx context.Context, path string) ([]FileInfo, error)
	Stat(ctx context.Context, path string) (FileInfo, error)
	// Open opens a regular file for streaming.
	Open(ctx context.Context, path string) (io.ReadCloser, FileInfo, error)
	// ReadFile reads a regular file of at most max bytes.
	ReadFile(ctx context.Context, path string, max int64) ([]byte, error)
	// WriteFile replaces a file atomically, creating parent directories.
	WriteFile(ctx context.Context, path string, data []byte) error
	// Zip writes the directory (or file) at path to w as a ZIP archive,
	// streaming.
	Zip(ctx context.Context, path string, w io.Writer) error
}

// CheckNetwork says why spec's network or egress allowlist cannot be
// served by a provider that has the engine's egress proxy (proxy) or not:
// both go through it (T1), and through the forwarder inside the sandbox.
// noForwarder, when set, says why the provider cannot run that forwarder.
func CheckNetwork(spec Spec, proxy bool, noForwarder error) error {
	switch {
	case !spec.Network && len(spec.Egress) == 0:
		return nil
	case spec.Network && len(spec.Egress) > 0:
		return errors.New("a sandbox has either the network or an egress allowlist, not both")
	case !proxy && spec.Network:
		return fmt.Errorf("%w: the spec asks for the network, which goes through the engine's egress proxy, and the provider has none", ErrUnavailable)
	case !proxy:
		return fmt.Errorf("%w: the spec has an egress allowlist but the provider has no egress proxy", ErrUnavailable)
	case noForwarder != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, noForwarder)
	}
	return nil
}

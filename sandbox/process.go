package sandbox

import (
	"context"
	"errors"
	"time"
)

// Background processes (docs/WORKSPACE.md, "Background processes"): a
// process the agent starts for a sandbox that outlives the command or
// call that started it (a server the agent built, a watcher), until it
// exits, is stopped, or the sandbox stops. A plain command's stray
// background children still end with it.

// Bounds of background processes, per sandbox.
const (
	// MaxProcesses bounds the background processes running at once.
	MaxProcesses = 8
	// KeptProcesses bounds the processes listed, the ended ones included:
	// the oldest ended one is forgotten first.
	KeptProcesses = 32
	// ProcessOutputKept is how much of a process's latest output (its
	// standard output and error, as they came) is kept to be read.
	ProcessOutputKept = 1 << 20
)

// ErrTooManyProcesses: MaxProcesses run already.
var ErrTooManyProcesses = errors.New("too many background processes")

// Process is a background process as the sandbox's agent keeps it.
type Process struct {
	// ID names it in the sandbox ("p1", "p2", ...).
	ID      string `json:"id"`
	Command string `json:"command"`
	Running bool   `json:"running"`
	// ExitCode is set once it ended: 128+n when signal n ended it (a
	// stop is SIGKILL: 137).
	ExitCode  *int      `json:"exitCode,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	// Stopped: it ended because it was stopped.
	Stopped bool `json:"stopped,omitempty"`
	// Output is how many bytes it has written so far, the next offset
	// to read from.
	Output int64 `json:"output"`
}

// ProcessOutput is a part of a process's output.
type ProcessOutput struct {
	Process Process `json:"process"`
	// Offset is where Data starts in the process's output: the offset
	// asked for, or the oldest byte still kept when that was dropped.
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// Processes are the background processes of a provider's sandboxes. A
// provider whose sandboxes have an agent implements it; id is the
// sandbox, which must run (ErrNotRunning otherwise), and pid a process of
// it (ErrNotFound when it has no such process).
type Processes interface {
	// StartProcess starts command through the persistent shell: it
	// begins in the directory and with the variables the last command
	// left, and saves none of its own.
	StartProcess(ctx context.Context, id, command string) (Process, error)
	ListProcesses(ctx context.Context, id string) ([]Process, error)
	// ReadProcess reads at most max bytes of the output from offset on.
	ReadProcess(ctx context.Context, id, pid string, offset int64, max int) (ProcessOutput, error)
	// WriteProcess writes data to the process's standard input and, with
	// end, closes it.
	WriteProcess(ctx context.Context, id, pid string, data []byte, end bool) error
	// StopProcess kills the process and everything it started.
	StopProcess(ctx context.Context, id, pid string) (Process, error)
}

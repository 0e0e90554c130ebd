package sandbox

import (
	"context"
	"errors"
	"fmt"
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

// Errors of background processes.
var (
	// ErrTooManyProcesses: MaxProcesses run already.
	ErrTooManyProcesses = errors.New("too many background processes")
	// ErrNoProcess: the sandbox has no process of that ID (never had, or
	// forgot it, or it ended with the sandbox's stop).
	ErrNoProcess = errors.New("no such background process")
	// ErrProcessEnded: the process has ended; it takes no more input.
	ErrProcessEnded = errors.New("the background process has ended")
)

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
// sandbox, which must run (ErrNotRunning otherwise; ErrNotFound when it
// does not exist), and pid a process of it (ErrNoProcess when it has no
// such process).
type Processes interface {
	// StartProcess starts command through the persistent shell: it
	// begins in the directory and with the variables the last command
	// left, and saves none of its own.
	StartProcess(ctx context.Context, id, command string) (Process, error)
	ListProcesses(ctx context.Context, id string) ([]Process, error)
	// ReadProcess reads at most max bytes of the output from offset on.
	// A pid the sandbox does not have is ErrNoProcess.
	ReadProcess(ctx context.Context, id, pid string, offset int64, max int) (ProcessOutput, error)
	// WriteProcess writes data to the process's standard input and, with
	// end, closes it; ErrProcessEnded once it ended.
	WriteProcess(ctx context.Context, id, pid string, data []byte, end bool) error
	// StopProcess kills the process and everything it started.
	StopProcess(ctx context.Context, id, pid string) (Process, error)
}

// ProcessProvider is a provider whose sandboxes can keep background
// processes. Background's calls fail with ErrUnsupported for a sandbox that
// cannot (a Docker container created without an agent).
type ProcessProvider interface {
	Background() Processes
}

// startBackground starts a Background request's command as a background
// process. What the model can act on (no room for another, a sandbox that
// keeps none) is a failed command's result, not an error.
func (m *Manager) startBackground(ctx context.Context, call *Call) (ExecResult, error) {
	start := time.Now()
	pp, ok := m.cfg.Provider.(ProcessProvider)
	if !ok {
		return ExecResult{ExitCode: -1, Stderr: fmt.Sprintf("the %s sandboxes keep no background processes; run the command in the foreground", m.cfg.Provider.Name())}, nil
	}
	p, err := pp.Background().StartProcess(ctx, call.SandboxID, call.Request.Command)
	switch {
	case errors.Is(err, ErrTooManyProcesses), errors.Is(err, ErrUnsupported):
		return ExecResult{ExitCode: -1, Stderr: err.Error(), Duration: time.Since(start)}, nil
	case err != nil:
		return ExecResult{}, err
	}
	return ExecResult{Stdout: "started background process " + p.ID + "\n", Process: &p, Duration: time.Since(start)}, nil
}

// processes is the provider's background processes, or an error saying
// it keeps none.
func (m *Manager) processes() (Processes, error) {
	pp, ok := m.cfg.Provider.(ProcessProvider)
	if !ok {
		return nil, fmt.Errorf("%w: the %s sandboxes keep no background processes", ErrUnsupported, m.cfg.Provider.Name())
	}
	return pp.Background(), nil
}

// gone is the error for a process of a sandbox that does not run: its
// processes ended with it.
func gone(pid string) error {
	return fmt.Errorf("%w %q: the sandbox is not running, and its processes ended when it stopped", ErrNoProcess, pid)
}

// ListProcesses lists the background processes of the scope's sandbox,
// oldest first: none when it does not run. It starts nothing.
func (m *Manager) ListProcesses(ctx context.Context, scope Scope) ([]Process, error) {
	if err := scope.validate(); err != nil {
		return nil, err
	}
	procs, err := m.processes()
	if err != nil {
		return nil, nil // a provider that keeps none has none
	}
	list, err := procs.ListProcesses(ctx, scope.SandboxID())
	if errors.Is(err, ErrNotRunning) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnsupported) {
		return nil, nil // a sandbox that runs none, or can keep none, has none
	}
	return list, err
}

// ReadProcess reads a background process's output (Processes.ReadProcess).
func (m *Manager) ReadProcess(ctx context.Context, scope Scope, pid string, offset int64, max int) (ProcessOutput, error) {
	var out ProcessOutput
	err := m.onProcess(scope, pid, func(procs Processes, id string) (err error) {
		out, err = procs.ReadProcess(ctx, id, pid, offset, max)
		return err
	})
	return out, err
}

// WriteProcess writes to a background process's standard input.
func (m *Manager) WriteProcess(ctx context.Context, scope Scope, pid string, data []byte, end bool) error {
	return m.onProcess(scope, pid, func(procs Processes, id string) error {
		return procs.WriteProcess(ctx, id, pid, data, end)
	})
}

// StopProcess stops a background process.
func (m *Manager) StopProcess(ctx context.Context, scope Scope, pid string) (Process, error) {
	var out Process
	err := m.onProcess(scope, pid, func(procs Processes, id string) (err error) {
		out, err = procs.StopProcess(ctx, id, pid)
		return err
	})
	return out, err
}

// onProcess runs f on the scope's sandbox's processes; a sandbox that
// does not run has none (ErrNotFound).
func (m *Manager) onProcess(scope Scope, pid string, f func(procs Processes, id string) error) error {
	if err := scope.validate(); err != nil {
		return err
	}
	procs, err := m.processes()
	if err != nil {
		return err
	}
	err = f(procs, scope.SandboxID())
	if errors.Is(err, ErrNotRunning) || errors.Is(err, ErrNotFound) {
		return gone(pid)
	}
	return err
}

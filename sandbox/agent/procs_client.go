package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// Procs are a sandbox's background processes, kept by its agent (see
// Background processes). Dial returns a new connection to the agent for
// each operation.
type Procs struct {
	Dial func(ctx context.Context) (*Conn, error)
}

// call runs op and decodes its JSON answer into out (nil: no answer).
func (p Procs) call(ctx context.Context, req wireRequest, upload []byte, out any) error {
	data, err := Files(p).collectAfter(ctx, req, upload, maxListing)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("agent %s: %w: %v", req.Op, ErrProtocol, err)
	}
	return nil
}

// Start starts command in the background.
func (p Procs) Start(ctx context.Context, command string) (sandbox.Process, error) {
	var out sandbox.Process
	err := p.call(ctx, wireRequest{Op: opProcStart, Command: command}, nil, &out)
	return out, err
}

// List lists the processes the agent keeps, oldest first.
func (p Procs) List(ctx context.Context) ([]sandbox.Process, error) {
	var out []sandbox.Process
	err := p.call(ctx, wireRequest{Op: opProcList}, nil, &out)
	return out, err
}

// Read reads at most max bytes of process id's output from offset on.
func (p Procs) Read(ctx context.Context, id string, offset int64, max int) (sandbox.ProcessOutput, error) {
	var out sandbox.ProcessOutput
	err := p.call(ctx, wireRequest{Op: opProcRead, Proc: id, Offset: offset, Max: int64(max)}, nil, &out)
	return out, err
}

// Write writes data to process id's standard input, and closes it with
// end.
func (p Procs) Write(ctx context.Context, id string, data []byte, end bool) error {
	if len(data) > MaxStdinQueue {
		return fmt.Errorf("%w: %d bytes at once, over %d", sandbox.ErrTooLarge, len(data), MaxStdinQueue)
	}
	return p.call(ctx, wireRequest{Op: opProcWrite, Proc: id, End: end}, data, nil)
}

// Stop kills process id and what it started.
func (p Procs) Stop(ctx context.Context, id string) (sandbox.Process, error) {
	var out sandbox.Process
	err := p.call(ctx, wireRequest{Op: opProcStop, Proc: id}, nil, &out)
	return out, err
}

// Processes is sandbox.Processes for a provider that reaches a sandbox's
// agent with this function.
type Processes func(ctx context.Context, id string) (*Conn, error)

var _ sandbox.Processes = Processes(nil)

func (d Processes) of(id string) Procs {
	return Procs{Dial: func(ctx context.Context) (*Conn, error) { return d(ctx, id) }}
}

func (d Processes) StartProcess(ctx context.Context, id, command string) (sandbox.Process, error) {
	return d.of(id).Start(ctx, command)
}

func (d Processes) ListProcesses(ctx context.Context, id string) ([]sandbox.Process, error) {
	return d.of(id).List(ctx)
}

func (d Processes) ReadProcess(ctx context.Context, id, pid string, offset int64, max int) (sandbox.ProcessOutput, error) {
	return d.of(id).Read(ctx, pid, offset, max)
}

func (d Processes) WriteProcess(ctx context.Context, id, pid string, data []byte, end bool) error {
	return d.of(id).Write(ctx, pid, data, end)
}

func (d Processes) StopProcess(ctx context.Context, id, pid string) (sandbox.Process, error) {
	return d.of(id).Stop(ctx, pid)
}

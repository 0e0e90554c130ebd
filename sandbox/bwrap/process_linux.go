package bwrap

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

var _ sandbox.ProcessProvider = (*Provider)(nil)

// Background processes are kept by the agent of the sandbox's namespace.
// A start starts the namespace when it has none (as a long-lived command
// does); the other operations start nothing: a sandbox without a
// namespace has no processes.
func (p *Provider) Background() sandbox.Processes {
	return namespaceProcs{
		Processes: agent.Processes(func(ctx context.Context, id string) (*agent.Conn, error) { return p.processConn(ctx, id, true) }),
		reach:     agent.Processes(func(ctx context.Context, id string) (*agent.Conn, error) { return p.processConn(ctx, id, false) }),
	}
}

// namespaceProcs starts processes through one connection and reaches
// them through another that starts nothing.
type namespaceProcs struct {
	agent.Processes
	reach agent.Processes
}

// noNamespace: the sandbox runs, but its namespace, and so any process
// of its own, does not: nothing listens at the agent's socket, or no
// token was ever written for one (the first commands ran in a bwrap
// each).
func noNamespace(err error) bool {
	return errors.Is(err, agent.ErrNotListening) || errors.Is(err, errUntrusted)
}

func (n namespaceProcs) ListProcesses(ctx context.Context, id string) ([]sandbox.Process, error) {
	list, err := n.reach.ListProcesses(ctx, id)
	if noNamespace(err) {
		return nil, nil
	}
	return list, err
}

func (n namespaceProcs) ReadProcess(ctx context.Context, id, pid string, offset int64, max int) (sandbox.ProcessOutput, error) {
	out, err := n.reach.ReadProcess(ctx, id, pid, offset, max)
	return out, gone(pid, err)
}

func (n namespaceProcs) WriteProcess(ctx context.Context, id, pid string, data []byte, end bool) error {
	return gone(pid, n.reach.WriteProcess(ctx, id, pid, data, end))
}

func (n namespaceProcs) StopProcess(ctx context.Context, id, pid string) (sandbox.Process, error) {
	out, err := n.reach.StopProcess(ctx, id, pid)
	return out, gone(pid, err)
}

// gone is err, or ErrNoProcess when the namespace does not run.
func gone(pid string, err error) error {
	if noNamespace(err) {
		return fmt.Errorf("%w %q: the sandbox's namespace, which keeps them, is not running", sandbox.ErrNoProcess, pid)
	}
	return err
}

// processConn connects to the running sandbox's agent; with start, its
// namespace is started when it has none.
func (p *Provider) processConn(ctx context.Context, id string, start bool) (*agent.Conn, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if !p.usesAgent() {
		return nil, fmt.Errorf("bwrap sandbox %s: background processes need the agent, which FLOWBOX_BWRAP_AGENT_BINARY=none turned off: %w", id, sandbox.ErrUnsupported)
	}
	if err := sandbox.Running(ctx, p, id); err != nil {
		return nil, err
	}
	if !start {
		return p.dial(ctx, id)
	}
	m, err := p.readMeta(id)
	if err != nil {
		return nil, fmt.Errorf("bwrap sandbox %s: read meta: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	if err := checkSources(m.Mounts); err != nil {
		return nil, fmt.Errorf("bwrap sandbox %s: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	return p.agentConn(ctx, id, m)
}

var _ sandbox.PortProvider = (*Provider)(nil)

// Ports are reached through the agent of the sandbox's namespace, which
// the servers of its background processes share. A sandbox without a
// namespace runs no server: nothing listens on its ports.
func (p *Provider) Ports() sandbox.Ports { return namespacePorts{p} }

type namespacePorts struct{ p *Provider }

func (n namespacePorts) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	conn, err := agent.Ports(func(ctx context.Context, id string) (*agent.Conn, error) {
		return n.p.processConn(ctx, id, false)
	}).DialPort(ctx, id, port)
	if noNamespace(err) {
		return nil, fmt.Errorf("%w: nothing listens on port %d: the sandbox's namespace, where its background processes run, is not running", sandbox.ErrPortClosed, port)
	}
	return conn, err
}

var _ sandbox.TerminalProvider = (*Provider)(nil)

// Terminals run in the sandbox's namespace, which a terminal starts when
// it has none (as a background process does).
func (p *Provider) Terminals() sandbox.Terminals {
	return agent.Terminals(func(ctx context.Context, id string) (*agent.Conn, error) { return p.processConn(ctx, id, true) })
}

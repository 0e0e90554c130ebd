package docker

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

var _ sandbox.ProcessProvider = (*Provider)(nil)

// Processes are kept by the container's agent; a container created
// without one cannot keep any.
func (p *Provider) Background() sandbox.Processes { return agent.Processes(p.processConn) }

// processConn connects to the running container's agent.
func (p *Provider) processConn(ctx context.Context, id string) (*agent.Conn, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	conn, err := p.dialAgent(ctx, id, agentStartup)
	if err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, fmt.Errorf("docker sandbox %s runs no agent, which background processes need: %w", id, sandbox.ErrUnsupported)
	}
	return conn, nil
}

var _ sandbox.PortProvider = (*Provider)(nil)

// Ports are reached through the container's agent, from inside its
// network namespace.
func (p *Provider) Ports() sandbox.Ports { return agent.Ports(p.processConn) }

var _ sandbox.TerminalProvider = (*Provider)(nil)

// Terminals are started by the container's agent.
func (p *Provider) Terminals() sandbox.Terminals { return agent.Terminals(p.processConn) }

package kubernetes

import (
	"context"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

var _ sandbox.ProcessProvider = (*Provider)(nil)

// Processes are kept by the agent of the sandbox's run-mode pod.
func (p *Provider) Background() sandbox.Processes { return agent.Processes(p.checkedDial) }

// checkedDial connects to the agent of sandbox id's pod.
func (p *Provider) checkedDial(ctx context.Context, id string) (*agent.Conn, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return p.dial(ctx, id)
}

var _ sandbox.PortProvider = (*Provider)(nil)

// Ports are reached through the agent of the sandbox's run-mode pod,
// from inside the pod: nothing of the pod listens on the cluster's
// network for them.
func (p *Provider) Ports() sandbox.Ports { return agent.Ports(p.checkedDial) }

var _ sandbox.TerminalProvider = (*Provider)(nil)

// Terminals are started by the agent of the sandbox's run-mode pod.
func (p *Provider) Terminals() sandbox.Terminals { return agent.Terminals(p.checkedDial) }

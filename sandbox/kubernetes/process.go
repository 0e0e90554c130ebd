package kubernetes

import (
	"context"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

var _ sandbox.ProcessProvider = (*Provider)(nil)

// Processes are kept by the agent of the sandbox's run-mode pod.
func (p *Provider) Background() sandbox.Processes {
	return agent.Processes(func(ctx context.Context, id string) (*agent.Conn, error) {
		if err := checkID(id); err != nil {
			return nil, err
		}
		return p.dial(ctx, id)
	})
}

package bwrap

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

var _ sandbox.ProcessProvider = (*Provider)(nil)

// Processes are kept by the agent of the sandbox's namespace, which is
// started when it has none (as for a long-lived command).
func (p *Provider) Background() sandbox.Processes { return agent.Processes(p.processConn) }

// processConn connects to the running sandbox's agent.
func (p *Provider) processConn(ctx context.Context, id string) (*agent.Conn, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if !p.usesAgent() {
		return nil, fmt.Errorf("bwrap sandbox %s: background processes need the agent, which FLOWBOX_BWRAP_AGENT_BINARY=none turned off: %w", id, sandbox.ErrUnsupported)
	}
	switch st, err := p.Status(ctx, id); {
	case err != nil:
		return nil, err
	case st == sandbox.StatusMissing:
		return nil, fmt.Errorf("bwrap sandbox %s: %w", id, sandbox.ErrNotFound)
	case st == sandbox.StatusStopped:
		return nil, fmt.Errorf("bwrap sandbox %s: %w", id, sandbox.ErrNotRunning)
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

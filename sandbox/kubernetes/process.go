package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

var _ sandbox.MetricsProvider = (*Provider)(nil)

// Metrics asks the agent of the sandbox's run-mode pod, which reads its
// container's cgroups and the workspace's files (the sandbox's word, for
// display); the disk limit is its claim's request.
func (p *Provider) Metrics(ctx context.Context, id string) (sandbox.Metrics, error) {
	if err := sandbox.Running(ctx, p, id); err != nil {
		return sandbox.Metrics{}, err
	}
	m, err := agent.Usage(p.checkedDial).Metrics(ctx, id)
	if err != nil {
		return sandbox.Metrics{}, fmt.Errorf("metrics of kubernetes sandbox %s: %w", id, err)
	}
	pvc, err := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if err == nil {
		if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			m.DiskLimitBytes = q.Value()
		}
	}
	return m, nil
}

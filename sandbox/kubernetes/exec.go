package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

// Exec runs a command through the sandbox's agent. A pod the provider
// already reached costs no API call: the handshake proves the address
// still belongs to the sandbox.
func (p *Provider) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := checkID(id); err != nil {
		return sandbox.ExecResult{}, err
	}
	started := time.Now()
	conn, err := p.dial(ctx, id)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	col := sandbox.NewCollector(0, req.OnOutput)
	if req.LongLived() {
		req.Timeout = 0 // none
	}
	r, err := conn.Exec(ctx, agent.Request{Command: req.Command, Timeout: req.Timeout, Stdin: req.Stdin}, col.Stdout(), col.Stderr())
	if err != nil {
		if ctx.Err() != nil {
			return col.Result(-1, false, req.Timeout, time.Since(started)), fmt.Errorf("exec in sandbox %s: %w", id, ctx.Err())
		}
		if req.LongLived() {
			// The pod went away under it: that is how a long-lived
			// command ends.
			return sandbox.AgentGone(col, time.Since(started), err), nil
		}
		p.forget(id)
		// The command may have run: this is no ErrNotRunning.
		return sandbox.ExecResult{}, fmt.Errorf("exec in sandbox %s through its agent: %w: %w", id, sandbox.ErrUnavailable, err)
	}
	res := col.Result(r.ExitCode, r.TimedOut, req.Timeout, time.Since(started))
	res.OOMKilled, res.PidsLimited = r.OOMKilled, r.PidsLimited
	return res, nil
}

// dial connects to the running sandbox's agent: at the address it was
// last reached at, else at its pod's. No run-mode pod is ErrNotRunning
// when the claim exists, ErrNotFound when it does not.
func (p *Provider) dial(ctx context.Context, id string) (*agent.Conn, error) {
	p.mu.Lock()
	ep, ok := p.conns[id]
	p.mu.Unlock()
	if ok {
		conn, err := agent.DialTCP(ctx, ep.addr, ep.token)
		if err == nil {
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Stopped, moved or replaced by another engine: ask the cluster.
		p.forget(id)
	}
	ep, err := p.waitAgent(ctx, id, modeRun)
	if errors.Is(err, sandbox.ErrNotRunning) {
		return nil, p.notRunning(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return agent.DialTCP(ctx, ep.addr, ep.token)
}

// notRunning is the error for a sandbox without a run-mode pod:
// ErrNotRunning when its claim exists, ErrNotFound otherwise.
func (p *Provider) notRunning(ctx context.Context, id string) error {
	pvc, err := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if gone(err, &pvcMeta(pvc).ObjectMeta) {
		return fmt.Errorf("kubernetes sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return apiErr("status of "+id, err)
	}
	return fmt.Errorf("kubernetes sandbox %s: %w", id, sandbox.ErrNotRunning)
}

// Files serves the workspace through the sandbox's agent. A stopped
// sandbox's files are served by a files-mode pod, started here and left
// to end by itself (its deadline) or to be replaced by the next Ensure.
func (p *Provider) Files(ctx context.Context, id string) (sandbox.Files, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	ep, err := p.filesEndpoint(ctx, id)
	if err != nil {
		return nil, err
	}
	return agent.Files{Dial: func(ctx context.Context) (*agent.Conn, error) {
		return agent.DialTCP(ctx, ep.addr, ep.token)
	}}, nil
}

// filesEndpoint finds an agent that serves the sandbox's files: its
// running pod's, or a files-mode pod's, which it starts when there is
// none.
func (p *Provider) filesEndpoint(ctx context.Context, id string) (endpoint, error) {
	p.mu.Lock()
	ep, ok := p.conns[id]
	p.mu.Unlock()
	if ok {
		return ep, nil
	}
	pods := p.cli.CoreV1().Pods(p.cfg.Namespace)
	pod, err := pods.Get(ctx, name(id), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return endpoint{}, apiErr("files of "+id, err)
	}
	if err == nil && live(pod) {
		return p.waitAgent(ctx, id, pod.Annotations[annotationMode])
	}
	pvc, err := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if gone(err, &pvcMeta(pvc).ObjectMeta) {
		return endpoint{}, fmt.Errorf("kubernetes sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return endpoint{}, apiErr("files of "+id, err)
	}
	rec, err := recordOf(pvc)
	if err != nil {
		return endpoint{}, fmt.Errorf("kubernetes sandbox: %w", err)
	}
	if pod != nil && pod.Name != "" {
		// An ended pod holds the name.
		if err := p.deletePod(ctx, id); err != nil {
			return endpoint{}, err
		}
	}
	if err := p.createPod(ctx, id, rec, modeFiles); err != nil {
		return endpoint{}, err
	}
	// Another engine's Ensure may have created a run-mode pod meanwhile.
	if pod, err := pods.Get(ctx, name(id), metav1.GetOptions{}); err == nil && pod.Annotations[annotationMode] == modeRun {
		return p.waitAgent(ctx, id, modeRun)
	}
	return p.waitAgent(ctx, id, modeFiles)
}

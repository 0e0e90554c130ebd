// Package kubernetes is the sandbox provider that runs sandboxes on a
// Kubernetes cluster, for deployments that outgrow one machine (B8).
//
// A sandbox is three objects in the provider's namespace, all named
// flowbox-<sandbox id> and labelled flowbox.managed=true and
// flowbox.sandbox=<id>:
//
//   - a PersistentVolumeClaim, the sandbox's lasting part: its /workspace
//     and its shell's state (/.flowbox) on one volume, and in its
//     annotations what the sandbox was created with (limits, network,
//     mounts, the owner's labels), so that a start after a stop needs no
//     spec. The provider lists sandboxes by their claims.
//   - a Secret holding the sandbox's token, which the engine and the
//     sandbox's agent prove to each other on every connection.
//   - a Pod while the sandbox runs: an init container copies the command
//     agent (the flowbox-agent image) into the pod, and the sandbox image's
//     container runs it as its main process, serving on TCP. Commands and
//     file operations go to the agent over the cluster's network, with no
//     Kubernetes exec round trip. The pod has no service-account token,
//     the sandbox's limits as its container's limits, and
//     runtimeClassName when configured (gVisor, Kata).
//
// Stop deletes the pod and keeps the claim (files, current directory and
// variables survive, as on the other providers); Delete removes all three.
// A stopped sandbox's files are served by a short-lived pod of the same
// shape whose agent is not asked to run commands ("files" mode), which
// ends by itself after filesPodLifetime and which the next Ensure replaces.
//
// The engine's directories a sandbox mounts (uploads, intermediate
// files, skills) must be on a volume the pods can mount too: a claim
// (ReadWriteMany, shared with the engine's pods) or, on a single node, a
// host path; each mount is that volume's subPath.
//
// Outbound network: a pod always has an interface, through which the
// engine reaches its agent, so the provider cannot take the network away
// as the others do. Pods of sandboxes without network carry the label
// flowbox.io/network=off, which the NetworkPolicy of deploy/kubernetes
// cuts off from everything but the engine; the cluster's network plugin
// must enforce NetworkPolicies. Capabilities reports no network isolation
// for that reason.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flowbox/flowbox/sandbox"
)

// Labels and annotations of the provider's objects.
const (
	LabelManaged = "flowbox.managed"
	LabelSandbox = "flowbox.sandbox"
	// LabelNetwork is "off" on the pods of sandboxes without network,
	// which the deployment's NetworkPolicy isolates, "on" otherwise.
	LabelNetwork = "flowbox.io/network"
	// annotationSpec holds the creation spec on the claim (specRecord).
	annotationSpec = "flowbox.io/spec"
	// annotationMode is the pod's mode: modeRun or modeFiles.
	annotationMode = "flowbox.io/mode"
)

// Pod modes.
const (
	modeRun   = "run"
	modeFiles = "files"
)

// Fixed parts of the pod.
const (
	containerName   = "sandbox"
	agentVolume     = "flowbox-agent"
	agentDir        = "/.flowbox-agent"
	agentInPod      = agentDir + "/flowbox-agent"
	workspaceVolume = "workspace"
	filesVolume     = "engine-files"
	tokenKey        = "token"
	// filesPodLifetime bounds a files-mode pod's life.
	filesPodLifetime = 10 * time.Minute
)

var defaultLimits = sandbox.Limits{CPUCount: 1, MemoryMiB: 512, DiskGiB: 1}

// Config configures the provider. Zero values have the defaults named.
type Config struct {
	// Client talks to the cluster. Default: built from Kubeconfig, or
	// in-cluster when Kubeconfig is empty.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file; empty: the pod's own
	// service account (in-cluster).
	Kubeconfig string
	// Namespace holds the sandboxes; required: one per deployment.
	Namespace string
	// Image is the sandbox image (default flowbox-sandbox:bookworm); it
	// needs a shell and nothing of the engine.
	Image string
	// AgentImage holds the static command agent at /flowbox-agent
	// (default flowbox-agent:latest; images/agent/build.sh builds it).
	AgentImage string
	// PullPolicy of both images (default IfNotPresent).
	PullPolicy corev1.PullPolicy
	// Shell interprets commands (default /bin/bash).
	Shell string
	// AgentPort is the agent's TCP port in the pod (default 7070).
	AgentPort int
	// StorageClass of the claims; empty: the cluster's default class.
	StorageClass string
	// RuntimeClass is the pods' runtimeClassName (gVisor, Kata); empty:
	// the cluster's default runtime.
	RuntimeClass string
	// HostUsers runs the pods in the node's user namespace, for clusters
	// whose runtime cannot give a pod one of its own: root in a sandbox
	// is then uid 0 of the node (without capabilities). By default
	// (false) every pod has a user namespace of its own
	// (spec.hostUsers: false, Kubernetes 1.33 or later with containerd
	// 2.0+ and runc 1.2+, or CRI-O 1.25+), so that its root is an
	// unprivileged uid of the node.
	HostUsers bool
	// DefaultLimits fill the zero fields of a spec's Limits; DiskGiB is
	// the claim's size. Limits.Pids is not set per pod (Kubernetes has no
	// such field): the kubelet's podPidsLimit bounds every pod.
	DefaultLimits sandbox.Limits
	// FilesRoot is the directory under which every mount's source lies,
	// as the engine sees it; mounts are refused when it is empty. Each
	// mount is the files volume's subPath of the source's path below it.
	FilesRoot string
	// FilesClaim is a claim in Namespace whose volume is FilesRoot, for
	// the pods' mounts (ReadWriteMany, mounted by the engine's pods at
	// FilesRoot). FilesHostPath instead is FilesRoot's path on the node,
	// for a single-node cluster whose engine runs on the node. One of
	// them is needed for mounts.
	FilesClaim    string
	FilesHostPath string
	// StartTimeout bounds a pod's start: scheduling, the volume, the
	// images and the agent (default 3 minutes).
	StartTimeout time.Duration
	Logger       *slog.Logger
}

// Provider runs sandboxes as pods.
type Provider struct {
	cfg Config
	cli kubernetes.Interface
	log *slog.Logger

	// mu guards conns: how to reach each running sandbox's agent, kept
	// so that a command costs no API call; checked by the handshake.
	mu    sync.Mutex
	conns map[string]endpoint
}

// endpoint is where a running sandbox's agent listens and its token.
type endpoint struct {
	addr  string
	token []byte
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for cfg. It does not contact the cluster;
// Fingerprint does.
func New(cfg Config) (*Provider, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes sandbox: no namespace; set one for the sandboxes of this deployment")
	}
	if cfg.Image == "" {
		cfg.Image = "flowbox-sandbox:bookworm"
	}
	if cfg.AgentImage == "" {
		cfg.AgentImage = "flowbox-agent:latest"
	}
	if cfg.PullPolicy == "" {
		cfg.PullPolicy = corev1.PullIfNotPresent
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/bash"
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = 7070
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.DefaultLimits = cfg.DefaultLimits.Or(defaultLimits)
	if cfg.FilesRoot != "" {
		if !filepath.IsAbs(cfg.FilesRoot) {
			return nil, fmt.Errorf("kubernetes sandbox: the files root %q must be an absolute path", cfg.FilesRoot)
		}
		cfg.FilesRoot = filepath.Clean(cfg.FilesRoot)
		if (cfg.FilesClaim == "") == (cfg.FilesHostPath == "") {
			return nil, errors.New("kubernetes sandbox: a files root needs either the claim that holds it or its host path on the node, not both")
		}
	}
	cli := cfg.Client
	if cli == nil {
		rc, err := restConfig(cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes sandbox: %w", err)
		}
		if cli, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubernetes sandbox: %w", err)
		}
	}
	return &Provider{cfg: cfg, cli: cli, log: cfg.Logger, conns: map[string]endpoint{}}, nil
}

// restConfig loads the client configuration: the kubeconfig at path, or
// the pod's service account when path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster (%w); set the kubeconfig's path", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	// The provider's calls are small and frequent; the defaults (5 per
	// second) would throttle a busy engine.
	rc.QPS, rc.Burst = 100, 200
	return rc, nil
}

func (p *Provider) Name() string { return "kubernetes" }

func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		FilesystemIsolation: true,
		// See the package comment: the cluster's NetworkPolicy does it.
		NetworkIsolation:    false,
		ResourceLimits:      true,
		Streaming:           true,
		CommandProcessesEnd: true,
		// The pids limit is the pod's, outside the container's cgroup
		// that the agent reads.
		ReportsExhaustion: false,
		Stdin:             true,
	}
}

// Fingerprint says what is missing for the provider to work: the
// cluster, the namespace, the rights on pods, claims and secrets in it,
// the storage class.
func (p *Provider) Fingerprint(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := p.cli.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("kubernetes sandbox: the cluster does not answer: %w: %v", sandbox.ErrUnavailable, err)
	}
	ns := p.cfg.Namespace
	if _, err := p.cli.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes sandbox: the namespace %q does not exist; create it (deploy/kubernetes does)", ns)
		}
		return fmt.Errorf("kubernetes sandbox: namespace %q: %w", ns, err)
	}
	opts := metav1.ListOptions{Limit: 1, LabelSelector: LabelManaged + "=true"}
	for _, c := range []struct {
		what string
		list func() error
	}{
		{"pods", func() error { _, err := p.cli.CoreV1().Pods(ns).List(ctx, opts); return err }},
		{"persistentvolumeclaims", func() error {
			_, err := p.cli.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
			return err
		}},
		{"secrets", func() error { _, err := p.cli.CoreV1().Secrets(ns).List(ctx, opts); return err }},
	} {
		if err := c.list(); err != nil {
			if apierrors.IsForbidden(err) {
				return fmt.Errorf("kubernetes sandbox: no right to list %s in %q; apply the Role of deploy/kubernetes: %v", c.what, ns, err)
			}
			return fmt.Errorf("kubernetes sandbox: list %s in %q: %w", c.what, ns, err)
		}
	}
	// Storage classes are the cluster's: without the right to read them
	// (the shipped Role has none), the claims' binding tells.
	if sc := p.cfg.StorageClass; sc != "" {
		if _, err := p.cli.StorageV1().StorageClasses().Get(ctx, sc, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes sandbox: the storage class %q does not exist; name one the cluster has (kubectl get storageclass)", sc)
		}
	} else if classes, err := p.cli.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{}); err == nil {
		def := false
		for _, c := range classes.Items {
			def = def || c.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
		}
		if !def {
			return errors.New("kubernetes sandbox: the cluster has no default storage class for the sandboxes' claims; name one (kubectl get storageclass)")
		}
	}
	return nil
}

// name is the name of a sandbox's pod, claim and secret.
func name(id string) string { return "flowbox-" + id }

func checkID(id string) error {
	if !sandbox.ValidID(id) {
		return fmt.Errorf("kubernetes sandbox: %q is not a sandbox id: %w", id, sandbox.ErrNotFound)
	}
	return nil
}

// specRecord is what a sandbox was created with, kept on its claim.
type specRecord struct {
	Limits  sandbox.Limits    `json:"limits"`
	Network bool              `json:"network,omitempty"`
	Mounts  []sandbox.Mount   `json:"mounts,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

func recordOf(pvc *corev1.PersistentVolumeClaim) (specRecord, error) {
	var rec specRecord
	raw, ok := pvc.Annotations[annotationSpec]
	if !ok {
		return rec, fmt.Errorf("the claim %s has no %s annotation", pvc.Name, annotationSpec)
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, fmt.Errorf("the claim %s: annotation %s: %w", pvc.Name, annotationSpec, err)
	}
	return rec, nil
}

// gone reports whether an object is absent or on its way out.
func gone(err error, meta *metav1.ObjectMeta) bool {
	return apierrors.IsNotFound(err) || (err == nil && meta.DeletionTimestamp != nil)
}

// apiErr wraps an error of the cluster's API: unreachable is
// ErrUnavailable.
func apiErr(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("kubernetes sandbox: %s: %w: %v", what, sandbox.ErrUnavailable, err)
	}
	return fmt.Errorf("kubernetes sandbox: %s: %w", what, err)
}

// Status reads the sandbox's pod and claim: a run-mode pod that is
// starting or running is running; a claim alone, or with a files-mode or
// ended pod, is stopped.
func (p *Provider) Status(ctx context.Context, id string) (sandbox.Status, error) {
	if !sandbox.ValidID(id) {
		return sandbox.StatusMissing, nil
	}
	pod, err := p.cli.CoreV1().Pods(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", apiErr("status of "+id, err)
	}
	if err == nil && live(pod) && pod.Annotations[annotationMode] == modeRun {
		return sandbox.StatusRunning, nil
	}
	pvc, err := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if gone(err, &pvcMeta(pvc).ObjectMeta) {
		return sandbox.StatusMissing, nil
	}
	if err != nil {
		return "", apiErr("status of "+id, err)
	}
	return sandbox.StatusStopped, nil
}

// pvcMeta tolerates the nil claim of a failed Get.
func pvcMeta(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if pvc == nil {
		return &corev1.PersistentVolumeClaim{}
	}
	return pvc
}

// live reports whether a pod is starting or running, not ended nor
// being deleted.
func live(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	return pod.Status.Phase == corev1.PodPending || pod.Status.Phase == corev1.PodRunning
}

// List returns every sandbox, from the claims.
func (p *Provider) List(ctx context.Context) ([]sandbox.Resource, error) {
	sel := metav1.ListOptions{LabelSelector: LabelManaged + "=true"}
	pvcs, err := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return nil, apiErr("list sandboxes", err)
	}
	pods, err := p.cli.CoreV1().Pods(p.cfg.Namespace).List(ctx, sel)
	if err != nil {
		return nil, apiErr("list sandboxes", err)
	}
	running := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if live(pod) && pod.Annotations[annotationMode] == modeRun {
			running[pod.Labels[LabelSandbox]] = true
		}
	}
	out := make([]sandbox.Resource, 0, len(pvcs.Items))
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		id := pvc.Labels[LabelSandbox]
		if !sandbox.ValidID(id) || pvc.Name != name(id) || pvc.DeletionTimestamp != nil {
			continue
		}
		r := sandbox.Resource{ID: id, Status: sandbox.StatusStopped, CreatedAt: pvc.CreationTimestamp.UTC()}
		if running[id] {
			r.Status = sandbox.StatusRunning
		}
		if rec, err := recordOf(pvc); err == nil {
			r.Labels = rec.Labels
		}
		out = append(out, r)
	}
	return out, nil
}

// Stop deletes the pod and waits until it is gone; the claim stays.
func (p *Provider) Stop(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	p.forget(id)
	return p.deletePod(ctx, id)
}

// deletePod deletes the sandbox's pod, whatever its mode, and waits until
// it is gone, so that its processes have ended and its claim is free.
func (p *Provider) deletePod(ctx context.Context, id string) error {
	pods := p.cli.CoreV1().Pods(p.cfg.Namespace)
	grace := int64(1)
	err := pods.Delete(ctx, name(id), metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiErr("stop "+id, err)
	}
	return p.waitGone(ctx, "the pod of "+id, func() error {
		_, err := pods.Get(ctx, name(id), metav1.GetOptions{})
		return err
	})
}

// waitGone polls get until it finds nothing.
func (p *Provider) waitGone(ctx context.Context, what string, get func() error) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, 500*time.Millisecond) {
		err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return apiErr("wait for "+what+" to go", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes sandbox: %s is still there after %s: %w", what, p.cfg.StartTimeout, sandbox.ErrUnavailable)
		case <-time.After(wait):
		}
	}
}

// Delete removes the pod, then the secret and the claim (whose volume the
// cluster deletes by its reclaim policy), and waits until they are gone.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if !sandbox.ValidID(id) {
		return nil
	}
	if err := p.deletePod(ctx, id); err != nil {
		return err
	}
	p.forget(id)
	core := p.cli.CoreV1()
	ns := p.cfg.Namespace
	if err := core.Secrets(ns).Delete(ctx, name(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete "+id, err)
	}
	if err := core.PersistentVolumeClaims(ns).Delete(ctx, name(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return apiErr("delete "+id, err)
	}
	return p.waitGone(ctx, "the claim of "+id, func() error {
		_, err := core.PersistentVolumeClaims(ns).Get(ctx, name(id), metav1.GetOptions{})
		return err
	})
}

// forget drops what the provider knows of a sandbox's agent.
func (p *Provider) forget(id string) {
	p.mu.Lock()
	delete(p.conns, id)
	p.mu.Unlock()
}

// addr is the agent's address in pod.
func (p *Provider) addr(pod *corev1.Pod) string {
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.cfg.AgentPort))
}

// mountSubPath is a mount source's path in the files volume.
func (p *Provider) mountSubPath(source string) (string, error) {
	rel, err := filepath.Rel(p.cfg.FilesRoot, source)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("mount of %q: the source is outside the files root %s, the only directory the sandboxes' pods can mount", source, p.cfg.FilesRoot)
	}
	return rel, nil
}

// Namespace is the namespace of the provider's sandboxes.
func (p *Provider) Namespace() string { return p.cfg.Namespace }

// ObjectName is the name of a sandbox's pod, claim and secret.
func ObjectName(id string) string { return name(id) }

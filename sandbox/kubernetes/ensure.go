package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
)

// Ensure makes the sandbox run: it creates the claim and the secret when
// they are missing, replaces a files-mode or ended pod, creates the pod,
// and waits until its agent answers.
func (p *Provider) Ensure(ctx context.Context, spec sandbox.Spec) error {
	id := spec.ID
	if err := checkID(id); err != nil {
		return err
	}
	if spec.Pool {
		return fmt.Errorf("kubernetes sandbox: %w: no warm pool on Kubernetes; set the pool size to 0", sandbox.ErrUnsupported)
	}
	if len(spec.Egress) > 0 {
		return fmt.Errorf("kubernetes sandbox: %w: an egress allowlist (%s); on Kubernetes the cluster's NetworkPolicy says what sandboxes reach: leave the allowlist empty and allow the hosts there", sandbox.ErrUnsupported, strings.Join(spec.Egress, ", "))
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return fmt.Errorf("kubernetes sandbox: %w", err)
	}
	for _, m := range mounts {
		if p.cfg.FilesRoot == "" {
			return fmt.Errorf("kubernetes sandbox: mount of %q at %q: no volume holds the engine's files for the pods; configure the files root with its claim or host path", m.Source, m.Target)
		}
		if _, err := p.mountSubPath(m.Source); err != nil {
			return fmt.Errorf("kubernetes sandbox: %w", err)
		}
	}

	pods := p.cli.CoreV1().Pods(p.cfg.Namespace)
	pod, err := pods.Get(ctx, name(id), metav1.GetOptions{})
	switch {
	case err == nil && live(pod) && pod.Annotations[annotationMode] == modeRun:
		return p.waitReady(ctx, id)
	case err == nil:
		// A files-mode pod, or one that ended: a new one replaces it.
		if err := p.deletePod(ctx, id); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return apiErr("ensure "+id, err)
	}
	rec := specRecord{Limits: spec.Limits.Or(p.cfg.DefaultLimits), Network: spec.Network, Mounts: mounts, Labels: spec.Labels}
	pvc, err := p.claim(ctx, id, rec)
	if err != nil {
		return err
	}
	if rec, err = recordOf(pvc); err != nil {
		return fmt.Errorf("kubernetes sandbox: %w", err)
	}
	if err := p.secret(ctx, id, pvc); err != nil {
		return err
	}
	if err := p.createPod(ctx, id, rec, modeRun); err != nil {
		return err
	}
	return p.waitReady(ctx, id)
}

// claim gets the sandbox's claim, creating it with rec when it is
// missing.
func (p *Provider) claim(ctx context.Context, id string, rec specRecord) (*corev1.PersistentVolumeClaim, error) {
	pvcs := p.cli.CoreV1().PersistentVolumeClaims(p.cfg.Namespace)
	pvc, err := pvcs.Get(ctx, name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		raw, _ := json.Marshal(rec)
		want := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name(id),
				Labels:      map[string]string{LabelManaged: "true", LabelSandbox: id},
				Annotations: map[string]string{annotationSpec: string(raw)},
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(rec.Limits.DiskGiB<<30, resource.BinarySI)},
				},
			},
		}
		if p.cfg.StorageClass != "" {
			want.Spec.StorageClassName = &p.cfg.StorageClass
		}
		pvc, err = pvcs.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // another engine's Ensure
			pvc, err = pvcs.Get(ctx, name(id), metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, apiErr("create the claim of "+id, err)
	}
	if pvc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("kubernetes sandbox: %s is being deleted: %w", id, sandbox.ErrUnavailable)
	}
	return pvc, nil
}

// secret makes sure the sandbox's token exists, owned by its claim so
// that the cluster deletes it with the claim if nothing else does.
func (p *Provider) secret(ctx context.Context, id string, pvc *corev1.PersistentVolumeClaim) error {
	secrets := p.cli.CoreV1().Secrets(p.cfg.Namespace)
	_, err := secrets.Get(ctx, name(id), metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return apiErr("read the token of "+id, err)
	}
	_, err = secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name(id),
			Labels: map[string]string{LabelManaged: "true", LabelSandbox: id},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: pvc.Name, UID: pvc.UID,
			}},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{tokenKey: string(agent.NewToken())},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr("create the token of "+id, err)
	}
	return nil
}

// createPod creates the sandbox's pod in mode; one that exists already
// (another engine's Ensure) is fine.
func (p *Provider) createPod(ctx context.Context, id string, rec specRecord, mode string) error {
	pod, err := p.podFor(id, rec, mode)
	if err != nil {
		return fmt.Errorf("kubernetes sandbox: %w", err)
	}
	_, err = p.cli.CoreV1().Pods(p.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return apiErr("create the pod of "+id, err)
	}
	return nil
}

// podFor is the sandbox's pod.
func (p *Provider) podFor(id string, rec specRecord, mode string) (*corev1.Pod, error) {
	lim := rec.Limits.Or(p.cfg.DefaultLimits)
	network := "off"
	if rec.Network {
		network = "on"
	}
	memory := resource.NewQuantity(lim.MemoryMiB<<20, resource.BinarySI)
	cpu := resource.NewMilliQuantity(int64(lim.CPUCount*1000), resource.DecimalSI)
	// Requests are what the scheduler counts: an idle sandbox uses a
	// fraction of its limits, and a node holds hundreds of them.
	memRequest := resource.NewQuantity(min(lim.MemoryMiB, 32)<<20, resource.BinarySI)
	cpuRequest := resource.NewMilliQuantity(10, resource.DecimalSI)
	no := false
	grace := int64(1)
	secure := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		AllowPrivilegeEscalation: &no,
	}
	mounts := []corev1.VolumeMount{
		{Name: workspaceVolume, MountPath: sandbox.WorkspaceDir, SubPath: "workspace"},
		{Name: workspaceVolume, MountPath: sandbox.StateDir, SubPath: "state"},
		{Name: agentVolume, MountPath: agentDir, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name(id)},
		}},
		{Name: agentVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if len(rec.Mounts) > 0 {
		if p.cfg.FilesRoot == "" {
			return nil, errors.New("the sandbox has mounts and no files volume is configured")
		}
		src := corev1.VolumeSource{}
		if p.cfg.FilesClaim != "" {
			src.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.cfg.FilesClaim}
		} else {
			dir := corev1.HostPathDirectory
			src.HostPath = &corev1.HostPathVolumeSource{Path: p.cfg.FilesHostPath, Type: &dir}
		}
		volumes = append(volumes, corev1.Volume{Name: filesVolume, VolumeSource: src})
		for _, m := range rec.Mounts {
			sub, err := p.mountSubPath(m.Source)
			if err != nil {
				return nil, err
			}
			mounts = append(mounts, corev1.VolumeMount{Name: filesVolume, MountPath: m.Target, SubPath: sub, ReadOnly: m.ReadOnly})
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name(id),
			Labels:      map[string]string{LabelManaged: "true", LabelSandbox: id, LabelNetwork: network},
			Annotations: map[string]string{annotationMode: mode},
		},
		Spec: corev1.PodSpec{
			// The runtime's default system-call filter, whatever the
			// kubelet's seccompDefault says.
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Hostname:                      "sandbox",
			InitContainers: []corev1.Container{{
				Name:            "agent-install",
				Image:           p.cfg.AgentImage,
				ImagePullPolicy: p.cfg.PullPolicy,
				Command:         []string{"/flowbox-agent", "install", agentInPod},
				VolumeMounts:    []corev1.VolumeMount{{Name: agentVolume, MountPath: agentDir}},
				SecurityContext: secure,
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
				},
			}},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           p.cfg.Image,
				ImagePullPolicy: p.cfg.PullPolicy,
				Command: []string{agentInPod, "sandbox-agent",
					"-listen", ":" + strconv.Itoa(p.cfg.AgentPort),
					"-shell", p.cfg.Shell,
					"-state-dir", sandbox.StateDir,
					"-workdir", sandbox.WorkspaceDir,
				},
				Env: []corev1.EnvVar{{Name: agent.TokenEnv, ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name(id)}, Key: tokenKey},
				}}},
				WorkingDir:      sandbox.WorkspaceDir,
				Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: int32(p.cfg.AgentPort)}},
				VolumeMounts:    mounts,
				SecurityContext: secure,
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: *memory, corev1.ResourceCPU: *cpu},
					Requests: corev1.ResourceList{corev1.ResourceMemory: *memRequest, corev1.ResourceCPU: *cpuRequest},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: volumes,
		},
	}
	if p.cfg.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = &p.cfg.RuntimeClass
	}
	if !p.cfg.HostUsers {
		// A user namespace of the pod's own: root in the sandbox is an
		// unprivileged uid of the node, and the volumes reach it as
		// ID-mapped mounts (files keep their owners on disk).
		pod.Spec.HostUsers = &no
	}
	if mode == modeFiles {
		// Nothing stops a files pod but its deadline: the stop scan
		// sees a stopped sandbox.
		deadline := int64(filesPodLifetime / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &deadline
	}
	return pod, nil
}

// failedStart is why a pod that has not started never will without a
// change of configuration, or "" while it may still start.
func failedStart(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		msg := "the pod ended (" + string(pod.Status.Phase)
		if pod.Status.Reason != "" {
			msg += ", " + pod.Status.Reason
		}
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if t := cs.State.Terminated; t != nil && (t.ExitCode != 0 || t.Message != "") {
				msg += fmt.Sprintf("; container %s exited %d: %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Message))
			}
		}
		return msg + ")"
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("container %s cannot start: %s: %s", cs.Name, w.Reason, w.Message) + usernsAdvice(pod, w.Message)
			}
		}
	}
	// An unschedulable pod may still be placed: the scheduler tries
	// again, and the deadline's error says why it was not.
	return ""
}

// hostUsersSetting is the setting that turns the pods' user namespaces
// off, named in the errors that ask for it.
const hostUsersSetting = "FLOWBOX_KUBE_HOST_USERS=true"

// usernsAdvice, for a pod in a user namespace of its own whose start
// failed with msg, says what to do when msg is about user namespaces or
// ID-mapped mounts; otherwise "".
func usernsAdvice(pod *corev1.Pod, msg string) string {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return ""
	}
	m := strings.ToLower(msg)
	if !strings.Contains(m, "user namespace") && !strings.Contains(m, "userns") &&
		!strings.Contains(m, "hostusers") && !strings.Contains(m, "idmap") && !strings.Contains(m, "id-map") {
		return ""
	}
	return ". Sandbox pods run in a user namespace of their own (spec.hostUsers: false), so that root in a " +
		"sandbox is not root on the node, and this node cannot give it one: that needs Kubernetes 1.33 or later " +
		"with containerd 2.0+ and runc 1.2+ (or CRI-O 1.25+) on the node, and volumes on file systems that support " +
		"ID-mapped mounts (Linux 6.3+ for tmpfs). Upgrade the nodes' runtime, or set " + hostUsersSetting +
		" (Config.HostUsers) to run sandbox pods without user namespaces: their root is then the node's uid 0, " +
		"without capabilities"
}

// sandboxRefusal is why the kubelet could not create the pod's sandbox
// because of its user namespace, from the pod's FailedCreatePodSandBox
// events, with what to do; "" when there is no such event, or when the
// provider may not list events.
func (p *Provider) sandboxRefusal(ctx context.Context, pod *corev1.Pod) string {
	evs, err := p.cli.CoreV1().Events(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.uid": string(pod.UID), "reason": "FailedCreatePodSandBox"}.String(),
	})
	if err != nil {
		return ""
	}
	for _, e := range evs.Items {
		if advice := usernsAdvice(pod, e.Message); advice != "" {
			return "the node cannot create the pod: " + strings.TrimSuffix(e.Message, ".") + advice
		}
	}
	return ""
}

// pending says why a pod is not running yet, for the timeout's error.
func pending(pod *corev1.Pod) string {
	var why []string
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			why = append(why, string(c.Type)+": "+c.Message)
		}
	}
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			why = append(why, cs.Name+": "+w.Reason+" "+w.Message)
		}
	}
	if len(why) == 0 {
		return "phase " + string(pod.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// waitReady waits until the sandbox's run-mode pod runs and its agent
// answers the handshake, and keeps its endpoint.
func (p *Provider) waitReady(ctx context.Context, id string) error {
	_, err := p.waitAgent(ctx, id, modeRun)
	return err
}

// waitAgent waits until the sandbox's pod in mode runs and its agent
// answers, and returns its endpoint. A pod of another mode, or none, is
// ErrNotRunning.
func (p *Provider) waitAgent(ctx context.Context, id, mode string) (endpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	pods := p.cli.CoreV1().Pods(p.cfg.Namespace)
	var token []byte
	var last *corev1.Pod
	// When the pod's sandbox is not made, its events may say why; read
	// them at most once a second.
	var eventsRead time.Time
	for wait := 10 * time.Millisecond; ; wait = min(wait*3/2, 250*time.Millisecond) {
		pod, err := pods.Get(ctx, name(id), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && (!live(pod) && failedStart(pod) == "" || pod.Annotations[annotationMode] != mode)):
			return endpoint{}, fmt.Errorf("kubernetes sandbox %s: %w", id, sandbox.ErrNotRunning)
		case err != nil:
			if ctx.Err() != nil {
				break
			}
			return endpoint{}, apiErr("wait for "+id, err)
		default:
			last = pod
			if why := failedStart(pod); why != "" {
				return endpoint{}, fmt.Errorf("kubernetes sandbox %s: %w: %s", id, sandbox.ErrUnavailable, why)
			}
			if pod.Status.PodIP == "" && pod.Spec.NodeName != "" && pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers &&
				time.Since(eventsRead) >= time.Second {
				eventsRead = time.Now()
				if why := p.sandboxRefusal(ctx, pod); why != "" {
					// The pod never starts on its node: remove it, so that
					// the next start makes one with the settings of then.
					if err := p.deletePod(ctx, id); err != nil {
						p.log.Warn("kubernetes sandbox: delete a pod that cannot start", "sandbox", id, "err", err)
					}
					return endpoint{}, fmt.Errorf("kubernetes sandbox %s: %w: %s", id, sandbox.ErrUnavailable, why)
				}
			}
			// The agent answers as soon as its container started, which
			// the kubelet reports a relist (about a second) later: an
			// address is enough to try.
			if pod.Status.PodIP != "" {
				if token == nil {
					if token, err = p.token(ctx, id); err != nil {
						return endpoint{}, err
					}
				}
				ep := endpoint{addr: p.addr(pod), token: token}
				conn, err := agent.DialTCP(ctx, ep.addr, ep.token)
				if err == nil {
					conn.Close()
					if mode == modeRun {
						p.mu.Lock()
						p.conns[id] = ep
						p.mu.Unlock()
					}
					return ep, nil
				}
				if errors.Is(err, agent.ErrAuth) {
					return endpoint{}, fmt.Errorf("kubernetes sandbox %s: the agent at %s does not hold the sandbox's token: %w", id, ep.addr, sandbox.ErrUnavailable)
				}
			}
		}
		select {
		case <-ctx.Done():
			why := "no pod"
			if last != nil {
				why = pending(last)
			}
			if parent := context.Cause(ctx); parent != nil && !errors.Is(parent, context.DeadlineExceeded) {
				return endpoint{}, parent
			}
			return endpoint{}, fmt.Errorf("kubernetes sandbox %s: not running after %s (%s): %w", id, p.cfg.StartTimeout, why, sandbox.ErrUnavailable)
		case <-time.After(wait):
		}
	}
}

// token reads the sandbox's token from its secret.
func (p *Provider) token(ctx context.Context, id string) ([]byte, error) {
	s, err := p.cli.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubernetes sandbox %s: its token is gone: %w", id, sandbox.ErrNotRunning)
	}
	if err != nil {
		return nil, apiErr("read the token of "+id, err)
	}
	t := s.Data[tokenKey]
	if len(t) < agent.MinToken {
		return nil, fmt.Errorf("kubernetes sandbox %s: its secret holds no token of at least %d bytes", id, agent.MinToken)
	}
	return t, nil
}

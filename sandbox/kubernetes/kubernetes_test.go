package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/kubernetes"
	"github.com/flowbox/flowbox/sandbox/kubernetes/kubetest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// skips are the conformance tests a pod cannot pass, and why.
var skips = map[string]string{
	"ForkBombContained": "Kubernetes has no per-pod pids limit in the pod's spec (Limits.Pids): the kubelet's podPidsLimit " +
		"bounds every pod alike, and the test asks for 64; TestForkBombContainedByTheNode runs the bomb against the node's limit",
}

func TestConformance(t *testing.T) {
	cli := kubetest.Client(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return kubetest.Provider(t, nil) },
		Processes: func(t *testing.T, p sandbox.Provider, id string) []string {
			return processes(t, cli, p.(*kubernetes.Provider), id)
		},
		Leftovers: func(t *testing.T, p sandbox.Provider, id string) []string {
			return leftovers(t, cli, p.(*kubernetes.Provider).Namespace(), id)
		},
		Skip: skips,
	})
}

// processes lists the command lines of the processes in the sandbox's
// pod as the node sees them: the members of the pod's cgroups.
func processes(t *testing.T, cli *k8s.Clientset, p *kubernetes.Provider, id string) []string {
	t.Helper()
	var out []string
	for _, pid := range podPIDs(t, cli, p, id) {
		line, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err == nil && len(line) > 0 {
			out = append(out, strings.TrimSpace(string(bytes.ReplaceAll(line, []byte{0}, []byte{' '}))))
		}
	}
	return out
}

// podPIDs lists the node's process ids of the processes in the
// sandbox's pod: the members of the pod's cgroups.
func podPIDs(t *testing.T, cli *k8s.Clientset, p *kubernetes.Provider, id string) []string {
	t.Helper()
	pod, err := cli.CoreV1().Pods(p.Namespace()).Get(context.Background(), kubernetes.ObjectName(id), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup/pids", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(path, "pod"+string(pod.UID)) {
			dirs = append(dirs, path)
			return filepath.SkipDir
		}
		return nil
	})
	if len(dirs) == 0 {
		return nil
	}
	var out []string
	_ = filepath.WalkDir(dirs[0], func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(path)
		out = append(out, strings.Fields(string(data))...)
		return nil
	})
	return out
}

// leftovers names the sandbox's objects still in the cluster: its pod,
// claim and secret, and a volume bound to the claim (which the cluster
// deletes shortly after the claim).
func leftovers(t *testing.T, cli *k8s.Clientset, ns, id string) []string {
	t.Helper()
	ctx := context.Background()
	name := kubernetes.ObjectName(id)
	var left []string
	if _, err := cli.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("pod %s (%v)", name, err))
	}
	if _, err := cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("claim %s (%v)", name, err))
	}
	if _, err := cli.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("secret %s (%v)", name, err))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		pvs, err := cli.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var bound []string
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && ref.Name == name {
				bound = append(bound, "volume "+pv.Name+" ("+string(pv.Status.Phase)+")")
			}
		}
		if len(bound) == 0 || time.Now().After(deadline) {
			return append(left, bound...)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// started ensures a new sandbox on p.
func started(t *testing.T, p *kubernetes.Provider, spec sandbox.Spec) string {
	t.Helper()
	spec.ID = sandboxtest.NewID(t)
	if err := p.Ensure(testCtx(t), spec); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), spec.ID) })
	return spec.ID
}

func run(t *testing.T, p sandbox.Provider, id, command string) sandbox.ExecResult {
	t.Helper()
	res, err := p.Exec(testCtx(t), id, sandbox.ExecRequest{Command: command, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", command, err)
	}
	return res
}

func podOf(t *testing.T, cli *k8s.Clientset, p *kubernetes.Provider, id string) *corev1.Pod {
	t.Helper()
	pod, err := cli.CoreV1().Pods(p.Namespace()).Get(testCtx(t), kubernetes.ObjectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's pod: %v", err)
	}
	return pod
}

// TestPodShape: the pod is what the package promises: the owner's
// labels on the claim, no service-account token, the limits, the agent
// from its own image, the token from the secret, network label off.
func TestPodShape(t *testing.T) {
	cli := kubetest.Client(t)
	p := kubetest.Provider(t, nil)
	labels := map[string]string{"appId": "app 1", "userId": "user/1", "chatId": "chat1"}
	id := started(t, p, sandbox.Spec{Limits: sandbox.Limits{CPUCount: 0.5, MemoryMiB: 96}, Labels: labels})
	pod := podOf(t, cli, p, id)
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service-account token")
	}
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		t.Error("the pod shares the node's user namespace; want spec.hostUsers: false")
	}
	if got := pod.Labels[kubernetes.LabelNetwork]; got != "off" {
		t.Errorf("label %s = %q, want off", kubernetes.LabelNetwork, got)
	}
	c := pod.Spec.Containers[0]
	if got := c.Resources.Limits.Memory().Value(); got != 96<<20 {
		t.Errorf("memory limit = %d, want 96 MiB", got)
	}
	if got := c.Resources.Limits.Cpu().MilliValue(); got != 500 {
		t.Errorf("cpu limit = %dm, want 500m", got)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("security context = %+v, want no privilege escalation and every capability dropped", sc)
	}
	// Inside: the limit applies, the token is not in commands' reach
	// through the environment, no service account files.
	res := run(t, p, id, `cat /sys/fs/cgroup/memory/memory.limit_in_bytes; echo "token=${FLOWBOX_AGENT_TOKEN:-none}"; ls /var/run/secrets 2>&1 | head -1; grep -c FLOWBOX_AGENT_TOKEN /proc/1/environ; grep Seccomp: /proc/self/status`)
	if !strings.HasPrefix(res.Stdout, fmt.Sprint(96<<20)+"\ntoken=none\n") || !strings.Contains(res.Stdout, "No such file") {
		t.Errorf("inside the pod: %q (stderr %q), want the 96 MiB limit, no token and no secrets directory", res.Stdout, res.Stderr)
	}
	// The agent's environment held the token: commands cannot read it.
	if !strings.Contains(res.Stderr, "/proc/1/environ: Permission denied") {
		t.Errorf("reading the agent's environment: stdout %q stderr %q; want it refused", res.Stdout, res.Stderr)
	}
	if !strings.Contains(res.Stdout, "Seccomp:\t2") {
		t.Errorf("commands run without the runtime's seccomp filter: %q", res.Stdout)
	}
	list, err := p.List(testCtx(t))
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Status != sandbox.StatusRunning || list[0].Labels["userId"] != "user/1" {
		t.Errorf("List = %+v, %v; want the sandbox, running, with its owner's labels", list, err)
	}
}

// TestStopStartAcrossPods: stop deletes the pod; the next start is a new
// pod on the same claim, with the files, the current directory and the
// exported variables of before.
func TestStopStartAcrossPods(t *testing.T) {
	cli := kubetest.Client(t)
	p := kubetest.Provider(t, nil)
	id := started(t, p, sandbox.Spec{})
	ctx := testCtx(t)
	run(t, p, id, "mkdir -p deep/er && cd deep/er && export KEPT=yes && echo data > f.txt")
	first := podOf(t, cli, p, id).UID
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.CoreV1().Pods(p.Namespace()).Get(ctx, kubernetes.ObjectName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod after Stop: %v, want it gone", err)
	}
	if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "true", Timeout: time.Second}); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("Exec on a stopped sandbox: %v, want ErrNotRunning", err)
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	if second := podOf(t, cli, p, id).UID; second == first {
		t.Fatal("the pod after a restart is the same pod")
	}
	if res := run(t, p, id, `echo "$KEPT $(pwd) $(cat f.txt)"`); res.Stdout != "yes /workspace/deep/er data\n" {
		t.Errorf("after a new pod: %q (stderr %q), want the variable, the directory and the file of before", res.Stdout, res.Stderr)
	}
}

// TestEngineRestart: an engine that starts in the middle (a new
// provider, nothing cached) runs commands in a sandbox another created;
// the first engine finds the sandbox again after the second restarted
// it on a new pod at a new address.
func TestEngineRestart(t *testing.T) {
	cli := kubetest.Client(t)
	first := kubetest.Provider(t, nil)
	id := started(t, first, sandbox.Spec{})
	run(t, first, id, "export WHO=first")
	second, err := kubernetes.New(kubetest.Config(first.Namespace()))
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, second, id, `echo "$WHO"`); res.Stdout != "first\n" {
		t.Fatalf("the second engine: %q, want the first's variable", res.Stdout)
	}
	ctx := testCtx(t)
	oldIP := podOf(t, cli, first, id).Status.PodIP
	if err := second.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := second.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod address %s, then %s", oldIP, podOf(t, cli, first, id).Status.PodIP)
	if res := run(t, first, id, `echo "$WHO again"`); res.Stdout != "first again\n" {
		t.Fatalf("the first engine after the second restarted the sandbox: %q", res.Stdout)
	}
}

// TestEngineDiesInEnsure: an engine that dies in the middle of a
// sandbox's creation (here: its context ends once the pod is asked for)
// leaves what the next engine's Ensure finishes.
func TestEngineDiesInEnsure(t *testing.T) {
	cli := kubetest.Client(t)
	first := kubetest.Provider(t, nil)
	id := sandboxtest.NewID(t)
	t.Cleanup(func() { _ = first.Delete(context.Background(), id) })
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// End the first engine's Ensure as soon as its pod exists.
		for ctx.Err() == nil {
			if _, err := cli.CoreV1().Pods(first.Namespace()).Get(ctx, kubernetes.ObjectName(id), metav1.GetOptions{}); err == nil {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := first.Ensure(ctx, sandbox.Spec{ID: id, Labels: map[string]string{"chatId": "c"}})
	cancel()
	if err == nil {
		t.Log("the first Ensure finished before its context ended")
	}
	second, err := kubernetes.New(kubetest.Config(first.Namespace()))
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Ensure(testCtx(t), sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("the next engine's Ensure: %v", err)
	}
	if res := run(t, second, id, "echo finished"); res.Stdout != "finished\n" {
		t.Fatalf("after the next Ensure: %+v", res)
	}
	if list, err := second.List(testCtx(t)); err != nil || len(list) != 1 || list[0].Labels["chatId"] != "c" {
		t.Fatalf("List: %+v, %v; want the sandbox with the first engine's labels", list, err)
	}
}

// TestFilesOfAStoppedSandbox: the files of a stopped sandbox are served
// by a files-mode pod, which does not make the sandbox running, and
// which the next start replaces.
func TestFilesOfAStoppedSandbox(t *testing.T) {
	cli := kubetest.Client(t)
	p := kubetest.Provider(t, nil)
	id := started(t, p, sandbox.Spec{})
	ctx := testCtx(t)
	run(t, p, id, "echo before > note.txt")
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files of a stopped sandbox: %v", err)
	}
	if err := files.WriteFile(ctx, "from-engine.txt", []byte("written while stopped")); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Status(ctx, id); err != nil || st != sandbox.StatusStopped {
		t.Fatalf("Status while its files are served: %q, %v; want stopped", st, err)
	}
	if _, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "true", Timeout: time.Second}); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("Exec while its files are served: %v, want ErrNotRunning", err)
	}
	if got := podOf(t, cli, p, id).Spec.ActiveDeadlineSeconds; got == nil {
		t.Error("the files pod has no deadline")
	}
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatal(err)
	}
	if res := run(t, p, id, "cat note.txt from-engine.txt"); res.Stdout != "before\nwritten while stopped" {
		t.Errorf("after the start: %q", res.Stdout)
	}
	if podOf(t, cli, p, id).Spec.ActiveDeadlineSeconds != nil {
		t.Error("the running sandbox's pod has the files pod's deadline")
	}
}

// TestBadImage: a pod that cannot start fails Ensure with the reason,
// quickly, instead of waiting for the deadline.
func TestBadImage(t *testing.T) {
	p := kubetest.Provider(t, func(c *kubernetes.Config) { c.Image = "flowbox-no-such-image:none" })
	id := sandboxtest.NewID(t)
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	err := p.Ensure(testCtx(t), sandbox.Spec{ID: id})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Fatalf("Ensure with a missing image: %v; want ErrUnavailable naming ErrImageNeverPull", err)
	}
}

// TestRefusals: what the provider cannot do is refused before anything
// is created, with an error that says so.
func TestRefusals(t *testing.T) {
	p := kubetest.Provider(t, func(c *kubernetes.Config) { c.FilesRoot, c.FilesHostPath = "", "" })
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"egress", sandbox.Spec{Egress: []string{"pypi.org"}}, "NetworkPolicy"},
		{"pool", sandbox.Spec{Pool: true}, "no warm pool"},
		{"mounts without a files volume", sandbox.Spec{Mounts: []sandbox.Mount{{Source: dir, Target: sandbox.UploadsDir}}}, "no volume holds the engine's files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.ID = sandboxtest.NewID(t)
			err := p.Ensure(ctx, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure: %v; want an error saying %q", err, tc.want)
			}
			if st, _ := p.Status(ctx, tc.spec.ID); st != sandbox.StatusMissing {
				t.Errorf("Status after the refusal: %q, want missing", st)
			}
		})
	}
	outside := kubetest.Provider(t, func(c *kubernetes.Config) { c.FilesRoot, c.FilesHostPath = "/var/empty", "/var/empty" })
	err := outside.Ensure(ctx, sandbox.Spec{ID: sandboxtest.NewID(t), Mounts: []sandbox.Mount{{Source: dir, Target: sandbox.UploadsDir}}})
	if err == nil || !strings.Contains(err.Error(), "outside the files root") {
		t.Fatalf("a mount outside the files root: %v", err)
	}
}

// TestFingerprint: what is missing is named.
func TestFingerprint(t *testing.T) {
	cli := kubetest.Client(t)
	ns := kubetest.Namespace(t, cli)
	for _, tc := range []struct {
		name   string
		change func(*kubernetes.Config)
		want   string
	}{
		{"no namespace", func(c *kubernetes.Config) { c.Namespace = "flowbox-no-such-namespace" }, `namespace "flowbox-no-such-namespace" does not exist`},
		{"no storage class", func(c *kubernetes.Config) { c.StorageClass = "no-such-class" }, `storage class "no-such-class" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kubetest.Config(ns)
			tc.change(&cfg)
			p, err := kubernetes.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fingerprint(testCtx(t)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Fingerprint: %v; want it to say %q", err, tc.want)
			}
		})
	}
	cfg := kubetest.Config(ns)
	cfg.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	if _, err := kubernetes.New(cfg); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("New with a missing kubeconfig: %v", err)
	}
	cfg.Kubeconfig = ""
	if _, err := kubernetes.New(cfg); err == nil || !strings.Contains(err.Error(), "not in a cluster") {
		t.Fatalf("New out of a cluster without a kubeconfig: %v", err)
	}
}

// TestForkBombContainedByTheNode: the node's pids limit per pod
// contains a fork bomb, and the sandbox runs commands afterwards.
func TestForkBombContainedByTheNode(t *testing.T) {
	p := kubetest.Provider(t, nil)
	id := started(t, p, sandbox.Spec{})
	res := run(t, p, id, "bomb() { bomb | bomb & }; bomb; sleep 5")
	t.Logf("the bomb: exit %d, timed out %v", res.ExitCode, res.TimedOut)
	ctx := testCtx(t)
	for {
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: "echo contained", Timeout: 10 * time.Second})
		if err == nil && res.Stdout == "contained\n" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("after a fork bomb: %+v, %v", res, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

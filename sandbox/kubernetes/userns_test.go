package kubernetes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/kubernetes"
	"github.com/flowbox/flowbox/sandbox/kubernetes/kubetest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// noUsernsClass is the test cluster's RuntimeClass whose runtime (runc
// 1.1) cannot give pods user namespaces (scripts/kube-up).
const noUsernsClass = "flowbox-nouserns"

// identityMap is /proc/self/uid_map in the node's user namespace.
const identityMap = "0 0 4294967295"

// uidMap reads the sandbox's /proc/self/uid_map, fields separated by
// single spaces.
func uidMap(t *testing.T, p sandbox.Provider, id string) string {
	t.Helper()
	res := run(t, p, id, "cat /proc/self/uid_map")
	if res.ExitCode != 0 {
		t.Fatalf("cat /proc/self/uid_map: %+v", res)
	}
	return strings.Join(strings.Fields(res.Stdout), " ")
}

// hostUID is the real uid, as the node sees it, of process pid.
func hostUID(t *testing.T, pid string) (int, bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false // gone meanwhile
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("/proc/%s/status: %q", pid, line)
			}
			return uid, true
		}
	}
	t.Fatalf("/proc/%s/status has no Uid line", pid)
	return 0, false
}

// TestRootIsNotTheNodesRoot: a sandbox's root is uid 0 of a user
// namespace of the pod's own, an unprivileged uid of the node; the
// workspace volume reaches it as an ID-mapped mount, so files keep their
// owners on disk and root in the sandbox reads and writes them.
func TestRootIsNotTheNodesRoot(t *testing.T) {
	cli := kubetest.Client(t)
	p := kubetest.Provider(t, nil)
	id := started(t, p, sandbox.Spec{})
	ctx := testCtx(t)

	// Inside: root, in a user namespace that is not the node's.
	if res := run(t, p, id, "id -u"); res.Stdout != "0\n" {
		t.Fatalf("id -u in the sandbox: %+v; want 0", res)
	}
	m := uidMap(t, p, id)
	f := strings.Fields(m)
	if m == identityMap || len(f) != 3 || f[0] != "0" || f[1] == "0" {
		t.Fatalf("uid_map in the sandbox: %q; want uid 0 mapped to a uid of the node other than 0", m)
	}
	outside, _ := strconv.Atoi(f[1])
	t.Logf("uid_map: %s", m)

	// Outside: every process of the pod runs as a uid of the node that
	// is not 0, the one the map names for root.
	pids := podPIDs(t, cli, p, id)
	if len(pids) == 0 {
		t.Fatal("no processes found in the pod's cgroups")
	}
	for _, pid := range pids {
		uid, ok := hostUID(t, pid)
		if !ok {
			continue
		}
		if uid == 0 {
			t.Errorf("process %s of the pod runs as the node's root", pid)
		} else if uid < outside || uid >= outside+65536 {
			t.Errorf("process %s of the pod runs as uid %d of the node, outside the pod's range %d+65536", pid, uid, outside)
		}
	}

	// The workspace volume: a file the sandbox's root writes is root's on
	// disk (ID-mapped mount), and one the node's root writes is root's in
	// the sandbox, writable by it.
	run(t, p, id, "echo from-sandbox > /workspace/mine.txt")
	pvc, err := cli.CoreV1().PersistentVolumeClaims(p.Namespace()).Get(ctx, kubernetes.ObjectName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := cli.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.HostPath == nil {
		t.Skipf("volume %s is not a host path; the node's view of its files is not at hand", pv.Name)
	}
	ws := filepath.Join(pv.Spec.HostPath.Path, "workspace")
	st, err := os.Stat(filepath.Join(ws, "mine.txt"))
	if err != nil {
		t.Fatalf("the sandbox's file on the node: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 {
		t.Errorf("the file the sandbox's root wrote belongs to uid %d on disk; want 0 (an ID-mapped mount keeps owners)", uid)
	}
	if err := os.WriteFile(filepath.Join(ws, "nodes.txt"), []byte("from-node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, id, "stat -c %u /workspace/nodes.txt && echo more >> /workspace/nodes.txt && cat /workspace/nodes.txt")
	if res.Stdout != "0\nfrom-node\nmore\n" {
		t.Errorf("the node's file in the sandbox: %+v; want it owned by root there and writable", res)
	}
}

// TestNoUserNamespacesOnTheNode: on a runtime that cannot give pods user
// namespaces, the start fails at once with an error that says so and
// names the setting that turns them off, with only the shipped Role's
// rights; with the setting, the sandbox starts, in the node's user
// namespace.
func TestNoUserNamespacesOnTheNode(t *testing.T) {
	admin := kubetest.Client(t)
	ns := kubetest.Namespace(t, admin)
	if _, err := admin.NodeV1().RuntimeClasses().Get(testCtx(t), noUsernsClass, metav1.GetOptions{}); err != nil {
		t.Skipf("the cluster has no RuntimeClass %s (scripts/kube-up makes it): %v", noUsernsClass, err)
	}
	cfg := kubetest.Config(ns)
	cfg.Client = engineClient(t, admin, ns)
	cfg.RuntimeClass = noUsernsClass
	p, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := sandboxtest.NewID(t)
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	err = p.Ensure(testCtx(t), sandbox.Spec{ID: id})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "does not support user namespaces") ||
		!strings.Contains(err.Error(), "FLOWBOX_KUBE_HOST_USERS=true") || strings.Contains(err.Error(), "not running after") {
		t.Fatalf("Ensure on a runtime without user namespaces: %v; want ErrUnavailable at once, saying why and naming FLOWBOX_KUBE_HOST_USERS", err)
	}
	t.Logf("the error: %v", err)

	cfg.HostUsers = true
	p, err = kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Ensure(testCtx(t), sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure with HostUsers: %v", err)
	}
	if pod := podOf(t, admin, p, id); pod.Spec.HostUsers != nil {
		t.Errorf("spec.hostUsers with HostUsers: %v; want it unset", *pod.Spec.HostUsers)
	}
	if m := uidMap(t, p, id); m != identityMap {
		t.Errorf("uid_map with HostUsers: %q; want the node's, %q", m, identityMap)
	}
}

package kubernetes_test

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/kubernetes"
	"github.com/flowbox/flowbox/sandbox/kubernetes/kubetest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// rbacFile holds the Role the engine's service account gets.
const rbacFile = "../../deploy/kubernetes/rbac.yaml"

// shippedRole reads the Role named flowbox-sandboxes from rbacFile.
func shippedRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	f, err := os.Open(rbacFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var role rbacv1.Role
		err := dec.Decode(&role)
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s holds no Role named flowbox-sandboxes", rbacFile)
		}
		if err != nil {
			t.Fatalf("%s: %v", rbacFile, err)
		}
		if role.Kind == "Role" && role.Name == "flowbox-sandboxes" {
			return &role
		}
	}
}

// TestShippedRoleSuffices runs the provider with exactly the rights the
// shipped Role gives a service account, and no more: every operation of
// the provider works, and what the Role does not give is refused.
func TestShippedRoleSuffices(t *testing.T) {
	admin := kubetest.Client(t)
	ns := kubetest.Namespace(t, admin)
	ctx := testCtx(t)
	engine := engineClient(t, admin, ns)
	// What the Role does not give.
	if _, err := engine.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the service account lists pods in another namespace")
	}
	if _, err := engine.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the service account lists config maps, which the provider never uses")
	}
	if _, err := engine.CoreV1().Events(ns).Get(ctx, "any", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get events: %v; want it forbidden (the provider only lists them)", err)
	}

	cfg := kubetest.Config(ns)
	cfg.Client = engine
	p, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fingerprint(ctx); err != nil {
		t.Fatalf("Fingerprint with the shipped Role: %v", err)
	}
	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id}); err != nil {
		t.Fatalf("Ensure with the shipped Role: %v", err)
	}
	if res := run(t, p, id, "echo rbac > f.txt && cat f.txt"); res.Stdout != "rbac\n" {
		t.Fatalf("Exec: %+v", res)
	}
	if list, err := p.List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	files, err := p.Files(ctx, id)
	if err != nil {
		t.Fatalf("Files of the stopped sandbox: %v", err)
	}
	if data, err := files.ReadFile(ctx, "f.txt", 100); err != nil || string(data) != "rbac\n" {
		t.Fatalf("ReadFile: %q, %v", data, err)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("Delete with the shipped Role: %v", err)
	}
	if left := leftovers(t, admin, ns, id); len(left) > 0 {
		t.Fatalf("Delete left %q", left)
	}
	// Without the rights, Fingerprint says what is missing.
	if err := admin.RbacV1().RoleBindings(ns).Delete(ctx, "flowbox-engine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := p.Fingerprint(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "no right to list pods") {
				t.Errorf("Fingerprint without the Role: %v; want it to say which right is missing", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Fingerprint passes without the Role")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// engineClient gives the service account flowbox-engine of namespace ns
// the shipped Role there, and returns a client acting as that account
// once the Role is in force.
func engineClient(t *testing.T, admin *k8s.Clientset, ns string) *k8s.Clientset {
	t.Helper()
	ctx := testCtx(t)
	role := shippedRole(t)
	role.Namespace, role.ResourceVersion = ns, ""
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "flowbox-engine"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "flowbox-engine"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	rc = rest.CopyConfig(rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa.Name}
	engine, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// The role reaches the cluster once its binding is seen.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := engine.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service account cannot list pods with the shipped Role: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return engine
}

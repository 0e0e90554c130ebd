// Package kubetest gives tests the Kubernetes provider on the cluster
// that scripts/kube-up runs (KUBECONFIG names it), each test in a
// namespace of its own that is deleted when the test ends. Without a
// cluster the test skips, or fails when FLOWBOX_TEST_REQUIRE names
// kubernetes.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/kubernetes"
)

// Images the test pods run; scripts/test loads them into the cluster.
const (
	// Image is the tests' sandbox image (images/busybox/build.sh): a
	// few megabytes, with /bin/sh.
	Image = "flowbox-busybox:test"
	// AgentImage holds the agent (images/agent/build.sh).
	AgentImage = "flowbox-agent:latest"
)

// Client returns a client of the test cluster, or stops the test.
func Client(t testing.TB) *k8s.Clientset {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		testenv.Need(t, "kubernetes", errors.New("KUBECONFIG is not set: start a cluster with scripts/kube-up and source the env file it writes"))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		testenv.Need(t, "kubernetes", fmt.Errorf("kubeconfig %s: %w", path, err))
	}
	rc.QPS, rc.Burst = 100, 200
	cli, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Discovery().ServerVersion(); err != nil {
		testenv.Need(t, "kubernetes", fmt.Errorf("the cluster of %s does not answer: %w", path, err))
	}
	return cli
}

// Namespace creates a namespace for the test and deletes it, with what
// is left in it, when the test ends.
func Namespace(t testing.TB, cli *k8s.Clientset) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cli.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "flowbox-test-", Labels: map[string]string{"flowbox.test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cli.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	// Pods are refused until the controller manager gave the namespace
	// its default service account.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cli.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return ns.Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default service account after a minute: %v", ns.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Config is the provider's configuration for a test in namespace ns:
// the test images, never pulled, /bin/sh, and the temporary directory as
// the files root, mounted from the node (the tests run on it).
func Config(ns string) kubernetes.Config {
	return kubernetes.Config{
		Kubeconfig:    os.Getenv("KUBECONFIG"),
		Namespace:     ns,
		Image:         Image,
		AgentImage:    AgentImage,
		PullPolicy:    corev1.PullNever,
		Shell:         "/bin/sh",
		FilesRoot:     os.TempDir(),
		FilesHostPath: os.TempDir(),
		StartTimeout:  2 * time.Minute,
	}
}

// Provider returns a provider in a new namespace of the test's (cfg
// changes the default Config), checked with Fingerprint.
func Provider(t testing.TB, change func(*kubernetes.Config)) *kubernetes.Provider {
	t.Helper()
	cli := Client(t)
	cfg := Config(Namespace(t, cli))
	if change != nil {
		change(&cfg)
	}
	p, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Fingerprint(context.Background()); err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	return p
}

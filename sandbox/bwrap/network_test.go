//go:build linux

package bwrap_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/mongodb"
	"github.com/flowbox/flowbox/internal/redisconn"
	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// TestAttackNetworkBwrapFull: finding 1 of the attack run (T1). A sandbox
// with the full network reached every loopback listener of the host (the
// embedded Redis answered PING, the embedded FerretDB gave out every
// user), the host's private networks and the metadata address. Now it
// has a network namespace with loopback only: each of those fails at
// once (refused or unreachable, not a hang), directly and through the
// egress proxy, while a public server answers through the proxy.
func TestAttackNetworkBwrapFull(t *testing.T) {
	for _, namespace := range []bool{false, true} {
		name := "command"
		if namespace {
			name = "namespace"
		}
		t.Run(name, func(t *testing.T) { attackNetworkBwrap(t, namespace) })
	}
}

func attackNetworkBwrap(t *testing.T, namespace bool) {
	pub := egresstest.NewPublic(t)
	cfg := bwrap.Config{
		Root: t.TempDir(), CgroupParent: "flowbox-test",
		Egress:          pub.Proxy,
		ForwarderBinary: testenv.EngineBinary(t),
	}
	if namespace {
		cfg.AgentBinary = cfg.ForwarderBinary
	}
	p, err := bwrap.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()

	// What the attacker went for: a listener on the host's loopback, and
	// the engine's embedded Redis and database.
	hostAddr := egresstest.HostListener(t, "127.0.0.1:0", "host loopback listener")
	rds, err := redisconn.StartEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer rds.Close()
	dbctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := mongodb.StartEmbedded(dbctx, mongodb.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Network: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	run := func(t *testing.T, cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}

	t.Run("interfaces", func(t *testing.T) {
		res := run(t, `awk -F: 'NR>2{gsub(/ /,"",$1); print $1}' /proc/net/dev`)
		if res.Stdout != "lo\n" {
			t.Errorf("interfaces %q (stderr %q), want only lo: the host's network is shared", res.Stdout, res.Stderr)
		}
	})

	// Straight connections, as the attacker's were: bash's /dev/tcp,
	// bounded by timeout so that a hang shows as exit 124.
	direct := map[string]string{
		"host loopback listener": hostAddr.String(),
		"embedded Redis":         rds.Addr(),
		"private 10.x":           "10.1.2.3:80",
		"metadata":               "169.254.169.254:80",
	}
	dbHost, _ := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(db.URI(), "mongodb://"), "/"))
	if !strings.HasSuffix(dbHost, ".sock") {
		direct["embedded FerretDB"] = dbHost
	}
	for what, addr := range direct {
		t.Run("direct to "+what, func(t *testing.T) {
			host, port, _ := net.SplitHostPort(addr)
			res := run(t, fmt.Sprintf(`timeout 10 bash -c 'exec 3<>/dev/tcp/%s/%s && echo CONNECTED && head -c 100 <&3'; echo "exit=$?"`, host, port))
			out := res.Stdout + res.Stderr
			if strings.Contains(res.Stdout, "CONNECTED") {
				t.Fatalf("the sandbox connected to the %s at %s: %q", what, addr, out)
			}
			if strings.Contains(res.Stdout, "exit=124") || !(strings.Contains(out, "refused") || strings.Contains(out, "unreachable")) {
				t.Errorf("connect to %s: %q; want refused or unreachable at once, not a hang", addr, out)
			}
		})
	}
	t.Run("embedded FerretDB socket", func(t *testing.T) {
		if !strings.HasSuffix(dbHost, ".sock") {
			t.Fatalf("the embedded database listens at %q, not on a Unix socket", db.URI())
		}
		res := run(t, fmt.Sprintf(`test -e %q && echo VISIBLE; echo done`, dbHost))
		if res.Stdout != "done\n" {
			t.Errorf("the database's socket %s is visible in the sandbox: %q", dbHost, res.Stdout)
		}
	})

	// The same through the proxy, which must refuse them all.
	curl := `curl -sS -m 10 --noproxy '' -w '\ncode=%{http_code}' `
	for _, tc := range []struct{ what, url, code string }{
		{"host loopback listener", "http://" + hostAddr.String() + "/", "403"},
		{"embedded Redis", "http://" + rds.Addr() + "/", "403"},
		{"private 10.x", "http://10.1.2.3/", "403"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "403"},
		{"metadata by name", "http://" + egresstest.MetadataName + "/", "403"},
		{"IPv6 loopback", "-g http://[::1]/", "403"},
		// The test's resolver knows no localhost; the system's answer
		// (127.0.0.1, ::1) would be refused as the literals above are.
		{"localhost", "http://localhost/", "502"},
	} {
		t.Run("proxy to "+tc.what, func(t *testing.T) {
			res := run(t, curl+tc.url)
			if !strings.Contains(res.Stdout, "code="+tc.code) {
				t.Errorf("curl %s through the proxy: stdout %q, stderr %q; want %s", tc.url, res.Stdout, res.Stderr, tc.code)
			}
		})
	}

	// The legitimate use next to it: the public internet, by address and
	// by name, with the proxy variables the sandbox starts with.
	for _, u := range []string{pub.URL, "http://" + egresstest.PublicName + "/"} {
		t.Run("public "+u, func(t *testing.T) {
			res := run(t, "curl -sS -m 20 "+u)
			if res.ExitCode != 0 || res.Stdout != egresstest.PublicBody {
				t.Fatalf("curl %s: exit %d, stdout %q, stderr %q; want %q", u, res.ExitCode, res.Stdout, res.Stderr, egresstest.PublicBody)
			}
		})
	}
	// The proxy audits a connection when its side of it has ended, which
	// may be a moment after curl has its answer.
	var allowed int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		allowed = 0
		for _, ev := range pub.Events() {
			if ev.SandboxID == id && ev.Decision == egress.Allowed {
				allowed++
			}
		}
		if allowed >= 2 || time.Now().After(deadline) {
			break
		}
	}
	for _, ev := range pub.Events() {
		if a := ev.Addr; ev.SandboxID == id && ev.Decision == egress.Allowed && !strings.HasPrefix(a, pub.Addr.String()+":") {
			t.Errorf("the proxy dialed %s for the sandbox, want only the public server", a)
		}
	}
	if allowed < 2 {
		t.Errorf("%d allowed connections audited, want the 2 to the public server", allowed)
	}
}

// TestAttackNetworkBwrapLeftOnHostNetwork: a namespace an earlier engine
// started with --share-net outlives it, its agent on the host's network.
// Stood in for by a host process put in the sandbox's cgroup: the next
// command ends it, and runs in a namespace of the sandbox's own.
func TestAttackNetworkBwrapLeftOnHostNetwork(t *testing.T) {
	pub := egresstest.NewPublic(t)
	bin := testenv.AgentBinary(t)
	p, err := bwrap.New(bwrap.Config{Root: t.TempDir(), CgroupParent: "flowbox-test", Egress: pub.Proxy, ForwarderBinary: bin, AgentBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "bwrap", p.Fingerprint(context.Background()))
	ctx := context.Background()
	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Network: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })

	left := exec.Command("sleep", "300")
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	t.Cleanup(func() { left.Process.Kill() })
	procs := filepath.Join("/sys/fs/cgroup/pids/flowbox-test", id, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(left.Process.Pid)), 0o644); err != nil {
		t.Fatalf("put the stand-in in the sandbox's cgroup: %v", err)
	}

	res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: `awk -F: 'NR>2{gsub(/ /,"",$1); print $1}' /proc/net/dev`, Timeout: time.Minute})
	if err != nil || res.Stdout != "lo\n" {
		t.Fatalf("command after: %+v %v; want loopback only", res, err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the process on the host's network in the sandbox's cgroup still runs")
	}
}

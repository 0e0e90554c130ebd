package docker_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
)

// TestAttackNetworkDockerFull: finding 1 (T1) on Docker. A container with
// the full network was on the bridge, whose gateway is the host: services
// bound to all of the host's addresses, its private networks and the
// metadata address were in reach. Now it is on no Docker network (mode
// "none", loopback only): the host's addresses, 10.x and 169.254.169.254
// fail at once, the proxy refuses them too, and a public server answers
// through the proxy. (The test daemon runs with --bridge=none, so the
// old bridge itself cannot be shown here; the mode and the interfaces
// are checked instead.)
func TestAttackNetworkDockerFull(t *testing.T) {
	pub := egresstest.NewPublic(t)
	e := newEnv(t, docker.Config{AgentBinary: dockertest.AgentBinary(t), Egress: pub.Proxy})

	// A service bound to all the host's addresses, as those the bridge
	// exposed: the test reaches it at each of them.
	port := egresstest.HostListener(t, "0.0.0.0:0", "host service").(*net.TCPAddr).Port
	targets := []string{"127.0.0.1", "10.1.2.3", "169.254.169.254"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		// Not the test's own "public internet" (egresstest.NewPublic).
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !egresstest.PublicNet.Contains(netip.AddrFrom4([4]byte(n.IP.To4()))) {
			targets = append(targets, n.IP.String())
		}
	}

	id := e.started(t, sandbox.Spec{Network: true})
	if mode := e.inspect(t, id).HostConfig.NetworkMode; mode != "none" {
		t.Errorf("network mode %q, want none", mode)
	}
	t.Run("interfaces", func(t *testing.T) {
		res := e.run(t, id, `ls /sys/class/net; echo "$HTTP_PROXY"`, 10*time.Second)
		if want := "lo\n" + egress.ProxyURL + "\n"; res.Stdout != want {
			t.Errorf("got %q (stderr %q), want %q: loopback only, and the proxy", res.Stdout, res.Stderr, want)
		}
	})
	for _, host := range targets {
		t.Run("direct to "+host, func(t *testing.T) {
			res := e.run(t, id, fmt.Sprintf(`echo | timeout 10 nc -w 5 %s %d; echo "exit=$?"`, host, port), 30*time.Second)
			out := res.Stdout + res.Stderr
			if strings.Contains(res.Stdout, "host service") {
				t.Fatalf("the container reached the host's service at %s:%d: %q", host, port, out)
			}
			if !(strings.Contains(out, "refused") || strings.Contains(out, "unreachable")) {
				t.Errorf("nc %s: %q; want refused or unreachable at once", host, out)
			}
		})
		t.Run("proxy to "+host, func(t *testing.T) {
			res := e.run(t, id, fmt.Sprintf(`printf 'CONNECT %[1]s:443 HTTP/1.1\r\nHost: %[1]s\r\n\r\n' | nc -w 10 127.0.0.1 3128`, host), 30*time.Second)
			if !strings.HasPrefix(res.Stdout, "HTTP/1.1 403") {
				t.Errorf("CONNECT %s: %q (stderr %q), want 403", host, res.Stdout, res.Stderr)
			}
		})
	}
	t.Run("public", func(t *testing.T) {
		for _, host := range []string{pub.Addr.String(), egresstest.PublicName} {
			res := e.run(t, id, fmt.Sprintf(`printf 'GET http://%[1]s/ HTTP/1.1\r\nHost: %[1]s\r\nConnection: close\r\n\r\n' | nc -w 10 127.0.0.1 3128`, host), 30*time.Second)
			if !strings.HasPrefix(res.Stdout, "HTTP/1.1 200") || !strings.HasSuffix(res.Stdout, egresstest.PublicBody) {
				t.Errorf("GET http://%s/ through the proxy: %q (stderr %q), want %q", host, res.Stdout, res.Stderr, egresstest.PublicBody)
			}
		}
	})
}

package docker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/docker/dockertest"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
)

// A container with an allowlist reaches an allowed name through the
// forwarder its agent runs: a plain-HTTP request and a
// CONNECT tunnel (busybox nc); a denied name, IP literals and a name
// resolving to a private address are refused with 403, and audited. A
// container without one reaches nothing.
func TestEgressDocker(t *testing.T) {
	testEgress(t, docker.Config{AgentBinary: dockertest.AgentBinary(t)})
}

// TestEgressGVisor is TestEgressDocker under gVisor, whose agent reaches
// the proxy's socket in its bind mount only if runsc lets sandboxes open
// host sockets (--host-uds=open or all).
func TestEgressGVisor(t *testing.T) {
	testEgress(t, gvisorConfig(t))
}

func testEgress(t *testing.T, cfg docker.Config) {
	penv := egresstest.New(t)
	cfg.Egress = penv.Proxy
	e := newEnv(t, cfg)
	id := e.started(t, sandbox.Spec{Egress: penv.Allow})
	// busybox wget crashes when it goes through a proxy: the requests
	// are written out, as a client would send them.
	get := func(host string) string {
		return fmt.Sprintf(`printf 'GET http://%[1]s:%[2]d/ HTTP/1.1\r\nHost: %[1]s:%[2]d\r\nConnection: close\r\n\r\n' | nc -w 10 127.0.0.1 3128`, host, penv.HTTPPort)
	}
	// The tunnel carries a plain HTTP request: what matters is the
	// CONNECT, and busybox has no TLS client to spare.
	connect := func(host string) string {
		return fmt.Sprintf(`printf 'CONNECT %[1]s:%[2]d HTTP/1.1\r\nHost: %[1]s\r\n\r\nGET / HTTP/1.1\r\nHost: %[1]s\r\nConnection: close\r\n\r\n' | nc -w 10 127.0.0.1 3128`, host, penv.HTTPPort)
	}

	t.Run("environment", func(t *testing.T) {
		res := e.run(t, id, `echo "$HTTPS_PROXY $http_proxy $NO_PROXY"; ls /sys/class/net`, 10*time.Second)
		if want := egress.ProxyURL + " " + egress.ProxyURL + " localhost,127.0.0.1\nlo\n"; res.Stdout != want {
			t.Errorf("got %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
		}
	})
	t.Run("allowed http", func(t *testing.T) {
		res := e.run(t, id, get(egresstest.AllowedName), 30*time.Second)
		if !strings.HasPrefix(res.Stdout, "HTTP/1.1 200 OK") || !strings.HasSuffix(res.Stdout, egresstest.Body) {
			t.Fatalf("GET: %q (stderr %q), want %q", res.Stdout, res.Stderr, egresstest.Body)
		}
		ev := penv.WaitEvent(t, "GET", func(ev egress.Event) bool { return ev.Method == "GET" && ev.Host == egresstest.AllowedName })
		if ev.Decision != egress.Allowed || ev.SandboxID != id || ev.BytesDown == 0 {
			t.Errorf("event %+v, want allowed for sandbox %s with bytes", ev, id)
		}
	})
	t.Run("allowed CONNECT", func(t *testing.T) {
		res := e.run(t, id, connect(egresstest.AllowedName), 30*time.Second)
		if !strings.HasPrefix(res.Stdout, "HTTP/1.1 200 Connection established") || !strings.Contains(res.Stdout, egresstest.Body) {
			t.Fatalf("CONNECT: %q (stderr %q), want the tunnel and %q", res.Stdout, res.Stderr, egresstest.Body)
		}
		ev := penv.WaitEvent(t, "CONNECT", func(ev egress.Event) bool { return ev.Method == "CONNECT" && ev.Host == egresstest.AllowedName })
		if ev.Decision != egress.Allowed || ev.SandboxID != id || ev.BytesUp == 0 || ev.BytesDown == 0 {
			t.Errorf("event %+v, want allowed for sandbox %s with bytes both ways", ev, id)
		}
	})
	for _, tc := range []struct{ name, cmd, host, reason string }{
		{"denied name", get(egresstest.DeniedName), egresstest.DeniedName, "allowlist"},
		{"denied name CONNECT", connect(egresstest.DeniedName), egresstest.DeniedName, "allowlist"},
		{"IPv4 literal", connect("1.1.1.1"), "1.1.1.1", "not a host name"},
		{"loopback literal", connect("127.0.0.1"), "127.0.0.1", "not a host name"},
		{"decimal literal", connect("2130706433"), "2130706433", "not a host name"},
		{"IPv6 literal", connect("[::1]"), "::1", "not a host name"},
		{"private address", get(egresstest.PrivateName), egresstest.PrivateName, "10.0.0.0/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.run(t, id, tc.cmd, 30*time.Second)
			if strings.Contains(res.Stdout, egresstest.Body) || !strings.Contains(res.Stdout, "403") {
				t.Fatalf("%s: %q (stderr %q), want a 403 refusal", tc.cmd, res.Stdout, res.Stderr)
			}
			ev := penv.WaitEvent(t, tc.name, func(ev egress.Event) bool { return ev.Host == tc.host })
			if ev.Decision != egress.Refused || !strings.Contains(ev.Reason, tc.reason) || ev.SandboxID != id || ev.Addr != "" {
				t.Errorf("event %+v, want refused naming %q", ev, tc.reason)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		off := e.started(t, sandbox.Spec{})
		before := len(penv.Events())
		for _, cmd := range []string{
			get(egresstest.AllowedName) + `; echo " exit=$?"`,
			connect(egresstest.AllowedName) + `; echo " exit=$?"`,
			fmt.Sprintf(`nc -w 5 %s %d </dev/null; echo " exit=$?"`, egresstest.AllowedName, penv.HTTPPort),
			fmt.Sprintf(`nc -w 5 127.0.0.1 %d </dev/null; echo " exit=$?"`, penv.HTTPPort),
		} {
			res := e.run(t, off, cmd, 30*time.Second)
			if strings.Contains(res.Stdout, egresstest.Body) || strings.Contains(res.Stdout, "exit=0\n") {
				t.Errorf("%s without egress: %q (stderr %q), want a failure to connect", cmd, res.Stdout, res.Stderr)
			}
		}
		if n := len(penv.Events()); n != before {
			t.Errorf("%d connections reached the proxy from a sandbox without egress", n-before)
		}
	})
	t.Run("stop closes the socket", func(t *testing.T) {
		if err := e.p.Stop(testCtx(t), id); err != nil {
			t.Fatal(err)
		}
		if got := penv.Proxy.Allowlist(id); got != nil {
			t.Errorf("the proxy still serves a stopped sandbox: %q", got)
		}
	})
}

//go:build linux

package bwrap_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/bwrap"
	"github.com/flowbox/flowbox/sandbox/egress"
	"github.com/flowbox/flowbox/sandbox/egress/egresstest"
	"github.com/flowbox/flowbox/sandbox/sandboxtest"
)

// A sandbox with an allowlist reaches an allowed name over HTTP and
// HTTPS through the proxy, and nothing else: a denied name, IP literals
// and a name resolving to a private address are refused with 403, and
// every connection is audited. A sandbox without one reaches nothing.
func TestEgressBwrap(t *testing.T) { egressBwrap(t, false) }

// TestEgressBwrapNamespace: the same through the long-lived namespace,
// whose agent forwards its port to the proxy.
func TestEgressBwrapNamespace(t *testing.T) { egressBwrap(t, true) }

func egressBwrap(t *testing.T, namespace bool) {
	env := egresstest.New(t)
	cfg := bwrap.Config{
		Root: t.TempDir(), CgroupParent: "flowbox-test",
		Egress: env.Proxy,
		// The engine binary: the test binary has no egress-forward.
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
	id := sandboxtest.NewID(t)
	if err := p.Ensure(ctx, sandbox.Spec{ID: id, Egress: env.Allow}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	run := func(t *testing.T, id, cmd string) sandbox.ExecResult {
		t.Helper()
		res, err := p.Exec(ctx, id, sandbox.ExecRequest{Command: cmd, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	curl := "curl -sS -k -m 10 "

	t.Run("environment", func(t *testing.T) {
		res := run(t, id, `echo "$HTTPS_PROXY $http_proxy $NO_PROXY"; awk -F: 'NR>2{gsub(/ /,"",$1); print $1}' /proc/net/dev`)
		if want := egress.ProxyURL + " " + egress.ProxyURL + " localhost,127.0.0.1\nlo\n"; res.Stdout != want {
			t.Errorf("got %q (stderr %q), want %q: the proxy variables and no interface but lo", res.Stdout, res.Stderr, want)
		}
	})
	for _, tc := range []struct {
		name, url string
	}{
		{"http", fmt.Sprintf("http://%s:%d/", egresstest.AllowedName, env.HTTPPort)},
		{"https", fmt.Sprintf("https://%s:%d/", egresstest.AllowedName, env.HTTPSPort)},
	} {
		t.Run("allowed "+tc.name, func(t *testing.T) {
			res := run(t, id, curl+tc.url)
			if res.ExitCode != 0 || res.Stdout != egresstest.Body {
				t.Fatalf("curl %s: exit %d, stdout %q, stderr %q; want %q", tc.url, res.ExitCode, res.Stdout, res.Stderr, egresstest.Body)
			}
			ev := env.WaitEvent(t, tc.url, func(ev egress.Event) bool {
				return ev.Host == egresstest.AllowedName && ev.Decision == egress.Allowed && ev.BytesDown > 0
			})
			if ev.SandboxID != id {
				t.Errorf("event of sandbox %q, want %q", ev.SandboxID, id)
			}
		})
	}
	for _, tc := range []struct {
		name, cmd, host, reason string
	}{
		{"denied name", curl + fmt.Sprintf("https://%s:%d/", egresstest.DeniedName, env.HTTPSPort), egresstest.DeniedName, "allowlist"},
		{"denied name over http", curl + fmt.Sprintf("http://%s:%d/", egresstest.DeniedName, env.HTTPPort), egresstest.DeniedName, "allowlist"},
		{"IPv4 literal", curl + fmt.Sprintf("https://1.1.1.1:%d/", env.HTTPSPort), "1.1.1.1", "not a host name"},
		{"loopback literal", curl + fmt.Sprintf("--noproxy '' http://127.0.0.1:%d/", env.HTTPPort), "127.0.0.1", "not a host name"},
		{"IPv6 literal", curl + fmt.Sprintf("-g https://[::1]:%d/", env.HTTPSPort), "::1", "not a host name"},
		// curl would rewrite these forms to 127.0.0.1: bash sends them as they are.
		{"decimal literal", rawConnect("2130706433", env.HTTPSPort), "2130706433", "not a host name"},
		{"hex literal", rawConnect("0x7f.1", env.HTTPSPort), "0x7f.1", "not a host name"},
		{"private address", curl + fmt.Sprintf("https://%s:%d/", egresstest.PrivateName, env.HTTPSPort), egresstest.PrivateName, "10.0.0.0/8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := tc.cmd
			if strings.HasPrefix(cmd, "curl") {
				cmd += ` -w '\ncode=%{http_code}'`
			}
			res := run(t, id, cmd)
			if strings.Contains(res.Stdout, egresstest.Body) || !strings.Contains(res.Stdout+res.Stderr, "403") {
				t.Fatalf("%s: stdout %q, stderr %q; want a 403 refusal", tc.cmd, res.Stdout, res.Stderr)
			}
			ev := env.WaitEvent(t, tc.name, func(ev egress.Event) bool { return ev.Host == tc.host })
			if ev.Decision != egress.Refused || !strings.Contains(ev.Reason, tc.reason) || ev.SandboxID != id || ev.Addr != "" {
				t.Errorf("event %+v, want refused naming %q", ev, tc.reason)
			}
		})
	}

	t.Run("off", func(t *testing.T) {
		off := sandboxtest.NewID(t)
		if err := p.Ensure(ctx, sandbox.Spec{ID: off}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(context.Background(), off) })
		before := len(env.Events())
		for _, cmd := range []string{
			curl + fmt.Sprintf("http://%s:%d/", egresstest.AllowedName, env.HTTPPort),
			curl + fmt.Sprintf("-x %s http://%s:%d/", egress.ProxyURL, egresstest.AllowedName, env.HTTPPort),
			curl + fmt.Sprintf("http://127.0.0.1:%d/", env.HTTPPort),
		} {
			res := run(t, off, cmd)
			if res.ExitCode == 0 || strings.Contains(res.Stdout, egresstest.Body) {
				t.Errorf("%s without egress: exit %d, stdout %q; want a failure to connect", cmd, res.ExitCode, res.Stdout)
			}
		}
		if n := len(env.Events()); n != before {
			t.Errorf("%d connections reached the proxy from a sandbox without egress", n-before)
		}
	})

	t.Run("stop closes the socket", func(t *testing.T) {
		if err := p.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		if got := env.Proxy.Allowlist(id); got != nil {
			t.Errorf("the proxy still serves a stopped sandbox: %q", got)
		}
		if err := p.Ensure(ctx, sandbox.Spec{ID: id, Egress: []string{"other.test"}}); err != nil {
			t.Fatal(err)
		}
		// The allowlist of the latest Ensure applies.
		res := run(t, id, curl+fmt.Sprintf("http://%s:%d/", egresstest.AllowedName, env.HTTPPort)+` -w '\ncode=%{http_code}'`)
		if !strings.Contains(res.Stdout, "code=403") {
			t.Errorf("after narrowing the allowlist: stdout %q, stderr %q; want 403", res.Stdout, res.Stderr)
		}
	})
}

// rawConnect is a shell command that sends a CONNECT for host:port to the
// forwarder as it is, and prints the answer's status line.
func rawConnect(host string, port int) string {
	return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128 && printf 'CONNECT %s:%d HTTP/1.1\r\nHost: %s\r\n\r\n' >&3 && head -n 1 <&3`, host, port, host)
}

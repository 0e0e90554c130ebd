package egress_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox/egress"
)

func TestEgressParsePatterns(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []string
		wantErr bool
	}{
		{[]string{" PyPI.org ", "*.PythonHosted.org", ""}, []string{"pypi.org", "*.pythonhosted.org"}, false},
		{[]string{"*"}, nil, true},
		{[]string{"1.2.3.4"}, nil, true},
		{[]string{"::1"}, nil, true},
		{[]string{"pypi.org."}, nil, true},
		{[]string{"https://pypi.org"}, nil, true},
		{[]string{"pypi.org:443"}, nil, true},
		{[]string{"*.*.org"}, nil, true},
	} {
		got, err := egress.ParsePatterns(tc.in)
		if (err != nil) != tc.wantErr || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ParsePatterns(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestEgressMatch(t *testing.T) {
	allow := []string{"pypi.org", "*.pythonhosted.org"}
	for host, want := range map[string]bool{
		"pypi.org":                   true,
		"PyPI.ORG":                   true,
		"files.pythonhosted.org":     true,
		"a.b.pythonhosted.org":       true,
		"pythonhosted.org":           false,
		"evilpythonhosted.org":       false,
		"pypi.org.":                  false,
		"pypi.org.evil.com":          false,
		"www.pypi.org":               false,
		"pypi.org:443":               false,
		"127.0.0.1":                  false,
		"[::1]":                      false,
		"":                           false,
		"files.pythonhosted.org%00x": false,
	} {
		if got := egress.Match(allow, host); got != want {
			t.Errorf("Match(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestEgressNarrow(t *testing.T) {
	op := []string{"pypi.org", "*.pythonhosted.org", "*.github.com"}
	for _, tc := range []struct{ app, want []string }{
		{[]string{"pypi.org"}, []string{"pypi.org"}},
		{[]string{"files.pythonhosted.org", "*.x.github.com"}, []string{"files.pythonhosted.org", "*.x.github.com"}},
		{[]string{"evil.com", "*.org", "pythonhosted.org", "www.pypi.org"}, []string{}},
		{[]string{}, []string{}},
	} {
		if got := egress.Narrow(op, tc.app); fmt.Sprint(got) != fmt.Sprint(tc.want) || got == nil {
			t.Errorf("Narrow(%q) = %#v, want %q", tc.app, got, tc.want)
		}
	}
}

// proxyEnv is a proxy serving one sandbox on a socket in a temporary
// directory, with names resolved from a table and the events collected.
type proxyEnv struct {
	proxy  *egress.Proxy
	socket string
	mu     sync.Mutex
	events []egress.Event
}

func newProxyEnv(t *testing.T, names map[string][]string, permit []netip.Addr, ports []int) *proxyEnv {
	t.Helper()
	e := &proxyEnv{socket: filepath.Join(t.TempDir(), "egress", egress.SocketName)}
	e.proxy = egress.New(egress.Config{
		Ports:  ports,
		Logger: slog.New(slog.DiscardHandler),
		Audit: func(ctx context.Context, ev egress.Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, ev)
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, s := range names[host] {
				out = append(out, netip.MustParseAddr(s))
			}
			if len(out) == 0 {
				return nil, errors.New("no such host")
			}
			return out, nil
		},
		PermitAddr: func(a netip.Addr) bool {
			for _, p := range permit {
				if p == a {
					return true
				}
			}
			return false
		},
	})
	t.Cleanup(e.proxy.Shutdown)
	if err := e.proxy.Open("0123456789abcdef", e.socket, []string{"allowed.test", "*.wild.test"}); err != nil {
		t.Fatal(err)
	}
	return e
}

// lastEvent waits for the n-th event (the audit runs when the connection
// has ended on the proxy's side).
func (e *proxyEnv) event(t *testing.T, n int) egress.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		if len(e.events) >= n {
			ev := e.events[n-1]
			e.mu.Unlock()
			return ev
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no audit event #%d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connect sends a CONNECT for target and returns the status line and the
// connection.
func (e *proxyEnv) connect(t *testing.T, target string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", e.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.Status + ": " + string(body), c, br
	}
	return resp.Status, c, br
}

func TestEgressDecisions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	srvAddr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	port := int(srvAddr.Port())
	e := newProxyEnv(t, map[string][]string{
		"allowed.test":          {"127.0.0.1"},
		"a.wild.test":           {"127.0.0.1"},
		"loopback.wild.test":    {"127.0.0.2"},
		"private.wild.test":     {"10.1.2.3"},
		"cgnat.wild.test":       {"100.64.0.1"},
		"metadata.wild.test":    {"169.254.169.254"},
		"v6loop.wild.test":      {"::1"},
		"ula.wild.test":         {"fd00::1"},
		"mapped.wild.test":      {"::ffff:192.168.1.1"},
		"mixed.wild.test":       {"127.0.0.1", "192.168.0.1"},
		"nat64.wild.test":       {"64:ff9b::a00:1"},
		"unspecified.wild.test": {"0.0.0.0"},
	}, []netip.Addr{srvAddr.Addr()}, []int{port, 443})

	for i, tc := range []struct {
		target, decision, reason string
	}{
		{fmt.Sprintf("allowed.test:%d", port), egress.Allowed, ""},
		{fmt.Sprintf("ALLOWED.test:%d", port), egress.Allowed, ""},
		{fmt.Sprintf("a.wild.test:%d", port), egress.Allowed, ""},
		{fmt.Sprintf("denied.test:%d", port), egress.Refused, "not on this sandbox's allowlist"},
		{fmt.Sprintf("wild.test:%d", port), egress.Refused, "not on this sandbox's allowlist"},
		{fmt.Sprintf("allowed.test.:%d", port), egress.Refused, "not a host name"},
		{"allowed.test:8443", egress.Refused, "port 8443 is not allowed"},
		{fmt.Sprintf("127.0.0.1:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("2130706433:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("0x7f000001:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("0177.0.0.1:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("127.1:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("[::1]:%d", port), egress.Refused, "not a host name"},
		{fmt.Sprintf("[::ffff:127.0.0.1]:%d", port), egress.Refused, "not a host name"},
		{"loopback.wild.test:443", egress.Refused, "127.0.0.0/8"},
		{"private.wild.test:443", egress.Refused, "10.0.0.0/8"},
		{"cgnat.wild.test:443", egress.Refused, "100.64.0.0/10"},
		{"metadata.wild.test:443", egress.Refused, "169.254.0.0/16"},
		{"v6loop.wild.test:443", egress.Refused, "::1/128"},
		{"ula.wild.test:443", egress.Refused, "fc00::/7"},
		{"mapped.wild.test:443", egress.Refused, "192.168.0.0/16"},
		{"mixed.wild.test:443", egress.Refused, "192.168.0.0/16"},
		{"nat64.wild.test:443", egress.Refused, "which embeds 10.0.0.1"},
		{"unspecified.wild.test:443", egress.Refused, "0.0.0.0/8"},
		{"nxdomain.wild.test:443", egress.Failed, "cannot resolve"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			status, c, br := e.connect(t, tc.target)
			if tc.decision == egress.Allowed {
				if !strings.HasPrefix(status, "200") {
					t.Fatalf("CONNECT %s: %s, want 200", tc.target, status)
				}
				fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				if string(body) != "hello" {
					t.Errorf("body through the tunnel = %q, want hello", body)
				}
				c.Close()
			} else if !strings.Contains(status, tc.reason) {
				t.Errorf("CONNECT %s: %q, want a refusal naming %q", tc.target, status, tc.reason)
			}
			ev := e.event(t, i+1)
			if ev.Decision != tc.decision || !strings.Contains(ev.Reason, tc.reason) || ev.SandboxID != "0123456789abcdef" || ev.Method != "CONNECT" {
				t.Errorf("event = %+v, want decision %s naming %q", ev, tc.decision, tc.reason)
			}
			if tc.decision == egress.Allowed && (ev.BytesUp == 0 || ev.BytesDown == 0 || ev.Addr != srvAddr.String()) {
				t.Errorf("event = %+v, want bytes both ways to %s", ev, srvAddr)
			}
		})
	}
}

func TestEgressPlainHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s host=%s proxy-auth=%q", r.Method, r.RequestURI, r.Host, r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	srvAddr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	e := newProxyEnv(t, map[string][]string{"allowed.test": {"127.0.0.1"}}, []netip.Addr{srvAddr.Addr()}, []int{int(srvAddr.Port())})
	client := &http.Client{Transport: &http.Transport{
		Proxy:       http.ProxyURL(mustURL(t, "http://proxy")),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return net.Dial("unix", e.socket) },
	}}
	resp, err := client.Get(fmt.Sprintf("http://allowed.test:%d/path?q=1", srvAddr.Port()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("GET /path?q=1 host=allowed.test:%d proxy-auth=\"\"", srvAddr.Port()); string(body) != want {
		t.Errorf("the server saw %q, want %q", body, want)
	}
	if ev := e.event(t, 1); ev.Decision != egress.Allowed || ev.Method != "GET" || ev.Host != "allowed.test" || ev.BytesDown == 0 {
		t.Errorf("event = %+v", ev)
	}
	resp, err = client.Get(fmt.Sprintf("http://denied.test:%d/", srvAddr.Port()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "allowlist") {
		t.Errorf("denied.test: %s %q, want 403 naming the allowlist", resp.Status, body)
	}
	if ev := e.event(t, 2); ev.Decision != egress.Refused || ev.Host != "denied.test" {
		t.Errorf("event = %+v", ev)
	}
}

// Close removes the socket and cuts open tunnels; Open again serves it.
func TestEgressOpenClose(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	srvAddr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	e := newProxyEnv(t, map[string][]string{"allowed.test": {"127.0.0.1"}}, []netip.Addr{srvAddr.Addr()}, []int{int(srvAddr.Port())})
	status, c, _ := e.connect(t, fmt.Sprintf("allowed.test:%d", srvAddr.Port()))
	if !strings.HasPrefix(status, "200") {
		t.Fatal(status)
	}
	e.proxy.Close("0123456789abcdef")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a tunnel survives Close: read = %v", err)
	}
	if _, err := os.Lstat(e.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket survives Close: %v", err)
	}
	// A narrower allowlist applies to the next connection.
	if err := e.proxy.Open("0123456789abcdef", e.socket, []string{"other.test"}); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.connect(t, fmt.Sprintf("allowed.test:%d", srvAddr.Port())); !strings.HasPrefix(status, "403") {
		t.Errorf("after narrowing: %s, want 403", status)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

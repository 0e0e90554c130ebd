package outbound

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ip      string
		refused bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"10.1.2.3", true}, {"172.16.0.1", true}, {"172.31.255.255", true},
		{"192.168.1.1", true}, {"100.64.0.1", true}, {"100.127.255.254", true}, {"169.254.169.254", true},
		{"224.0.0.1", true}, {"239.255.255.250", true}, {"0.0.0.0", true}, {"255.255.255.255", true},
		{"::1", true}, {"::", true}, {"fc00::1", true}, {"fd12:3456::1", true}, {"fe80::1", true}, {"ff02::1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"::ffff:10.0.0.1", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false}, {"2606:4700::1111", false},
		{"::ffff:8.8.8.8", false},
	} {
		got := Classify(netip.MustParseAddr(tc.ip))
		if (got != "") != tc.refused {
			t.Errorf("Classify(%s) = %q, want refused=%v", tc.ip, got, tc.refused)
		}
	}
}

func TestParseAllow(t *testing.T) {
	a, err := ParseAllow(" 10.0.0.0/8, 127.0.0.1:9000 ,hooks.internal, 192.168.1.7, [::1]:8080 ")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{"10.9.9.9:80", true}, {"192.168.1.7:443", true}, {"192.168.1.8:443", false}, {"127.0.0.1:9000", false}, {"8.8.8.8:53", true}} {
		if err := a.Check(tc.addr); (err == nil) != tc.ok {
			t.Errorf("Check(%s) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		hostport string
		ok       bool
	}{{"127.0.0.1:9000", true}, {"127.0.0.1:9001", false}, {"hooks.internal:443", true}, {"HOOKS.internal.:80", true},
		{"[::1]:8080", true}, {"other.internal:443", false}} {
		if got := a.host(tc.hostport); got != tc.ok {
			t.Errorf("host(%s) = %v, want %v", tc.hostport, got, tc.ok)
		}
	}
	for _, bad := range []string{"http://x/", "a b", "10.0.0.0/33"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) = nil error, want one", bad)
		}
	}
}

// counting is a loopback server that counts the requests it gets.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestClientRefusesLoopbackUnlessAllowed(t *testing.T) {
	srv, hits := counting(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("SSH-2.0-OpenSSH_9.2")) })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		_, err := Allow{}.Client(Options{}).Get(u)
		var re *RefusedError
		if !errors.As(err, &re) || !Refused(err) {
			t.Errorf("GET %s: err = %v, want a RefusedError", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests, want 0", n)
	}

	for _, allow := range []string{"127.0.0.0/8", srv.Listener.Addr().String(), "127.0.0.1"} {
		a, err := ParseAllow(allow)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := a.Client(Options{}).Get(srv.URL)
		if err != nil {
			t.Fatalf("allowed %q: GET: %v", allow, err)
		}
		resp.Body.Close()
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("the allowed server got %d requests, want 3", n)
	}
}

func TestClientRedirectToRefusedAddress(t *testing.T) {
	inner, hits := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	outer, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(inner.URL, "127.0.0.1", "localhost", 1)+"/secret", http.StatusFound)
	})
	// Only the first server is allowed, by host:port: the hop to the
	// second is dialled with the check.
	a, err := ParseAllow(outer.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Client(Options{Redirects: 5}).Get(outer.URL)
	if !Refused(err) {
		t.Fatalf("redirect to loopback: err = %v, want a refusal", err)
	}
	resp, err := a.Client(Options{}).Get(outer.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("no redirects: status %d, want the 302 itself", resp.StatusCode)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests, want 0", n)
	}
}

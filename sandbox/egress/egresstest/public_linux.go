package egresstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flowbox/flowbox/internal/testenv"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// The "public internet" of the network tests: this machine has none, and
// a test may only use loopback or network namespaces of its own. So the
// test makes a network namespace joined to the host's by a veth pair, and
// serves HTTP in it on PublicEnv.Addr, an address of TEST-NET-3 (RFC 5737,
// documentation only, never routed on the internet). The proxy refuses
// that range like every reserved one; PublicEnv's proxy alone treats it
// as public, and nothing else: loopback, the private ranges and the
// metadata address stay refused, which is what the tests check.
//
// Each PublicEnv takes a /30 of its own at random, so that tests running
// at once (or a namespace a killed test left behind) do not share one.
var PublicNet = netip.MustParsePrefix("203.0.113.0/24")

// Names the PublicEnv proxy resolves.
const (
	PublicName   = "public.flowbox.test"
	MetadataName = "metadata.flowbox.test" // resolves to 169.254.169.254
	// PublicBody is what the public server answers.
	PublicBody = "hello from the public test server"
)

// PublicEnv is a proxy that serves sandboxes any public host, and the
// public test server it can reach.
type PublicEnv struct {
	Proxy *egress.Proxy
	// Addr is the public server's address, in PublicNet; URL its URL
	// (http://Addr/).
	Addr netip.Addr
	URL  string

	auditLog
}

// NewPublic makes the namespace, the veth pair and the server, and a proxy
// for them on the default ports (80 and 443); all go at the test's end.
// It needs root and iproute2 (component "netns": a skip without them, a
// failure when FLOWBOX_TEST_REQUIRE names it).
func NewPublic(t testing.TB) *PublicEnv {
	t.Helper()
	_, err := exec.LookPath("ip")
	if err == nil && os.Geteuid() != 0 {
		err = errors.New("making a network namespace needs root")
	}
	if err != nil {
		testenv.Need(t, "netns", fmt.Errorf("iproute2 (ip) and root: %v", err))
	}
	var b [4]byte
	rand.Read(b[:])
	suffix := hex.EncodeToString(b[:3])
	base := 4 * (int(b[3]) % 64)
	hostAddr := fmt.Sprintf("203.0.113.%d/30", base+1)
	addr := netip.AddrFrom4([4]byte{203, 0, 113, byte(base + 2)})
	ns, hostIf, nsIf := "fbpub-"+suffix, "fbph"+suffix, "fbpn"+suffix
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ip("link", "add", hostIf, "type", "veth", "peer", "name", nsIf, "netns", ns)
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostIf).Run() })
	ip("addr", "add", hostAddr, "dev", hostIf)
	ip("link", "set", hostIf, "up")
	ip("-n", ns, "addr", "add", addr.String()+"/30", "dev", nsIf)
	ip("-n", ns, "link", "set", nsIf, "up")
	ip("-n", ns, "link", "set", "lo", "up")

	ln, err := listenIn(ns, net.JoinHostPort(addr.String(), "80"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, PublicBody) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	e := &PublicEnv{Addr: addr, URL: "http://" + addr.String() + "/"}
	e.Proxy = egress.New(egress.Config{
		Logger: slog.New(slog.DiscardHandler),
		Audit:  e.record,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case PublicName:
				return []netip.Addr{addr}, nil
			case MetadataName:
				return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
			}
			return nil, errors.New("no such host")
		},
		PermitAddr: PublicNet.Contains,
	})
	t.Cleanup(e.Proxy.Shutdown)
	return e
}

// listenIn listens on addr in the named network namespace. The socket
// stays in that namespace whichever thread uses it later; the thread
// that entered it is never unlocked, so the runtime ends it.
func listenIn(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter network namespace %s: %w", ns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

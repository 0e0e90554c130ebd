// Package egresstest gives provider tests an egress proxy whose allowed
// names lead to local test servers: AllowedName resolves to the servers'
// loopback address, which only this package's proxy may reach (through
// egress.Config.PermitAddr), PrivateName resolves to a private address,
// and every other name does not resolve. It must never be used outside
// tests.
package egresstest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox/egress"
)

// Names the proxy knows.
const (
	AllowedName = "allowed.flowbox.test"
	PrivateName = "private.flowbox.test"
	DeniedName  = "denied.flowbox.test"
	// Body is what the test servers answer.
	Body = "hello from the egress test server"
)

// Env is a proxy and its test servers.
type Env struct {
	Proxy *egress.Proxy
	// Allow is the allowlist for sandbox specs: AllowedName and
	// PrivateName.
	Allow []string
	// HTTPPort and HTTPSPort are the servers' ports, the only ones the
	// proxy allows.
	HTTPPort, HTTPSPort int

	mu     sync.Mutex
	events []egress.Event
}

// New starts an HTTP and an HTTPS server on loopback and a proxy for
// them; both stop at the test's end.
func New(t testing.TB) *Env {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, Body) })
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	tls := httptest.NewTLSServer(h)
	t.Cleanup(tls.Close)
	pa := netip.MustParseAddrPort(plain.Listener.Addr().String())
	ta := netip.MustParseAddrPort(tls.Listener.Addr().String())
	e := &Env{Allow: []string{AllowedName, PrivateName}, HTTPPort: int(pa.Port()), HTTPSPort: int(ta.Port())}
	loopback := pa.Addr()
	e.Proxy = egress.New(egress.Config{
		Ports:  []int{e.HTTPPort, e.HTTPSPort},
		Logger: slog.New(slog.DiscardHandler),
		Audit: func(ctx context.Context, ev egress.Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.events = append(e.events, ev)
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case AllowedName:
				return []netip.Addr{loopback}, nil
			case PrivateName:
				return []netip.Addr{netip.MustParseAddr("10.20.30.40")}, nil
			}
			return nil, errors.New("no such host")
		},
		PermitAddr: func(a netip.Addr) bool { return a == loopback },
	})
	t.Cleanup(e.Proxy.Shutdown)
	return e
}

// Events returns the connections audited so far.
func (e *Env) Events() []egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]egress.Event(nil), e.events...)
}

// WaitEvent waits up to 5 seconds for an audited connection that match
// accepts (the audit comes when the proxy's side of it has ended).
func (e *Env) WaitEvent(t testing.TB, what string, match func(egress.Event) bool) egress.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, ev := range e.Events() {
			if match(ev) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit event for %s; events: %+v", what, e.Events())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

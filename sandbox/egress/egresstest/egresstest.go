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
	"net"
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

	auditLog
}

// auditLog keeps what a test proxy audits: its Audit function is record.
type auditLog struct {
	mu     sync.Mutex
	events []egress.Event
}

func (a *auditLog) record(ctx context.Context, ev egress.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
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
		Audit:  e.record,
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
func (a *auditLog) Events() []egress.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]egress.Event(nil), a.events...)
}

// WaitEvent waits up to 5 seconds for an audited connection that match
// accepts (the audit comes when the proxy's side of it has ended).
func (a *auditLog) WaitEvent(t testing.TB, what string, match func(egress.Event) bool) egress.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, ev := range a.Events() {
			if match(ev) {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit event for %s; events: %+v", what, a.Events())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// HostListener listens on addr ("127.0.0.1:0") on the host, as a service
// a sandbox must not reach would, and answers every connection with
// greeting and a newline; it stops at the test's end.
func HostListener(t testing.TB, addr, greeting string) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, greeting+"\n")
			c.Close()
		}
	}()
	return ln.Addr()
}

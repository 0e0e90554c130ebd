// Package outbound is the one HTTP client for requests the engine makes
// on users' behalf: share links' identity hooks, MCP HTTP servers and
// the alert webhook. Those addresses are typed by app owners, admins or
// operators, so the client refuses destinations inside the engine's own
// networks (loopback, private, CGNAT, link-local and cloud metadata,
// multicast, unspecified, IPv6 ULA and their IPv4-mapped forms) unless
// the operator lists them in FLOWBOX_OUTBOUND_ALLOW.
//
// The check runs on the address actually dialled (a net.Dialer Control
// hook), after name resolution and for every connection, so neither DNS
// rebinding nor a redirect to a refused address slips past it. This
// package must never hand out a client without that check, nor honour
// the environment's HTTP proxy (which would move the dial elsewhere).
package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of a destination.
var ErrRefused = errors.New("outbound: destination refused")

// RefusedError says which address was refused and why. It is for the
// engine's log: requesters get a generic message.
type RefusedError struct {
	Addr   string // the address dialled, ip:port
	Reason string // e.g. "loopback"
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("outbound: %s is a %s address, which the engine does not call unless FLOWBOX_OUTBOUND_ALLOW lists it", e.Addr, e.Reason)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

// refused are the ranges no outbound request reaches by default, with
// the reason a refusal names.
var refused = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" (unspecified)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Classify says why ip is refused by default, or "" for a public
// address. IPv4-mapped IPv6 addresses (::ffff:127.0.0.1) are judged as
// the IPv4 address they carry.
func Classify(ip netip.Addr) string {
	ip = ip.Unmap()
	if !ip.IsValid() {
		return "invalid"
	}
	for _, r := range refused {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	return ""
}

// Allow is the operator's list of exceptions (FLOWBOX_OUTBOUND_ALLOW):
// address ranges, and host names with an optional port. The zero value
// allows no exception.
type Allow struct {
	nets  []netip.Prefix
	hosts map[string]bool // "host" or "host:port", lower case
	raw   string
}

// ParseAllow reads a comma-separated list of CIDRs ("10.0.0.0/8"), IP
// addresses, and host names with an optional port ("hooks.internal",
// "127.0.0.1:9000", "[::1]:8080").
func ParseAllow(s string) (Allow, error) {
	a := Allow{hosts: map[string]bool{}, raw: strings.TrimSpace(s)}
	for _, item := range strings.Split(s, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			a.nets = append(a.nets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(item); err == nil {
			a.nets = append(a.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			host, port = item, ""
		}
		if host == "" || strings.ContainsAny(host, "/ []") || strings.Trim(port, "0123456789") != "" {
			return Allow{}, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8), an address, nor a host[:port]", item)
		}
		if port != "" {
			a.hosts[net.JoinHostPort(host, port)] = true
		} else {
			a.hosts[host] = true
		}
	}
	return a, nil
}

// String is the list as the operator wrote it.
func (a Allow) String() string { return a.raw }

// host says whether the destination host:port (as the URL names it) is
// allowed whatever it resolves to.
func (a Allow) host(hostport string) bool {
	if len(a.hosts) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	hostport, host = strings.ToLower(hostport), strings.ToLower(strings.TrimSuffix(host, "."))
	return a.hosts[hostport] || a.hosts[host]
}

// addr says whether ip is in one of the allowed ranges.
func (a Allow) addr(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range a.nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Check refuses the address dialled (ip:port) unless it is public or
// allowed.
func (a Allow) Check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Addr: address, Reason: "unparsable"}
	}
	if reason := Classify(ap.Addr()); reason != "" && !a.addr(ap.Addr()) {
		return &RefusedError{Addr: address, Reason: reason}
	}
	return nil
}

// Options shape a client.
type Options struct {
	// Timeout bounds a whole request, answer included (0: none; callers
	// then bound it with their context).
	Timeout time.Duration
	// Redirects is how many redirects are followed (each hop is checked
	// like the first); 0 follows none and returns the redirect answer.
	Redirects int
}

// Client returns an HTTP client that reaches only public addresses and
// the allowed ones.
func (a Allow) Client(o Options) *http.Client {
	return &http.Client{Transport: a.Transport(), Timeout: o.Timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > o.Redirects {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// Transport returns a transport whose every connection is checked. It
// uses no proxy: a proxy would dial the destination on its own side.
func (a Allow) Transport() *http.Transport {
	checked := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error { return a.Check(address) }}
	plain := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			if a.host(address) {
				// The operator named this host: whatever it resolves to.
				return plain.DialContext(ctx, network, address)
			}
			return checked.DialContext(ctx, network, address)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Refused says whether err is (or wraps) a refusal of a destination.
func Refused(err error) bool { return errors.Is(err, ErrRefused) }

package egress

import "net/netip"

// blocked are the ranges a sandbox never reaches through the proxy,
// whatever name resolves there: the engine's own machine and networks,
// and addresses that are not one host on the internet.
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // RFC 1918
		"100.64.0.0/10",   // carrier-grade NAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata
		"172.16.0.0/12",   // RFC 1918
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.168.0.0/16",  // RFC 1918
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard
		"2001:db8::/32",   // documentation
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// publicAddr says why a is not a public unicast address, or "" when it
// is. IPv4-mapped and IPv4-compatible IPv6 addresses are judged as the
// IPv4 address they carry; NAT64 (64:ff9b::/96) and 6to4 (2002::/16) as
// the IPv4 address they embed.
func publicAddr(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range blocked {
		if p.Contains(a) {
			return a.String() + ", a private, loopback, link-local, multicast or reserved address (" + p.String() + ")"
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case compat.Contains(a), nat64.Contains(a):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if v4.IsValid() {
			if why := publicAddr(v4); why != "" {
				return a.String() + ", which embeds " + why
			}
		}
	}
	return ""
}

var (
	compat    = netip.MustParsePrefix("::/96")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

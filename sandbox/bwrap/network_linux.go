package bwrap

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// A sandbox never shares the host's network namespace (T1): with it, a
// sandbox reached every loopback listener of the host (the embedded
// database and Redis among them) and every network the host is on. Each
// sandbox has a network namespace of its own whose only interface is
// loopback. A sandbox with the network ("full") gets the same way out as
// one with an allowlist: the egress forwarder on 127.0.0.1:3128 inside,
// copying to the engine's egress proxy through a Unix socket, with the
// proxy serving it any public host (egress.Proxy.OpenPublic). The proxy
// resolves names itself and dials only public addresses, so loopback,
// RFC 1918, CGNAT, link-local and metadata, multicast and IPv6 ULA and
// link-local destinations are refused by construction: there is no
// other route out of the namespace to get around it.
//
// The price: the full network is HTTP and HTTPS (CONNECT, any TLS)
// through the proxy variables, on the proxy's ports, rather than any
// protocol. pasta or slirp4netns would give raw TCP and UDP, but their
// connections leave from the host's namespace with no destination filter
// of their own, so the refusal would rest on routes or firewall rules
// inside each namespace instead of on the one place that dials.

// proxied reports whether the sandbox's commands get the egress
// forwarder and the proxy variables: with an allowlist, and with the full
// network.
func (m meta) proxied() bool { return len(m.Egress) > 0 || m.Network }

// checkNetwork says why spec's network cannot be served.
func (p *Provider) checkNetwork(spec sandbox.Spec) error {
	var noForwarder error
	if p.cfg.ForwarderBinary == "" {
		noForwarder = errors.New("no engine binary to run the egress forwarder (set Config.ForwarderBinary)")
	}
	return sandbox.CheckNetwork(spec, p.cfg.Egress != nil, noForwarder)
}

// openEgress serves the sandbox's egress: any public host when it was
// created with the network, the spec's allowlist when it was created with
// one, and nothing otherwise (the operator turned egress off: the
// forwarder then reaches nothing).
func (p *Provider) openEgress(id string, spec sandbox.Spec) error {
	if p.cfg.Egress == nil {
		return nil
	}
	m, err := p.readMeta(id)
	if err != nil {
		return err
	}
	socket := filepath.Join(p.egressDir(id), egress.SocketName)
	switch {
	case m.Network && spec.Network:
		return p.cfg.Egress.OpenPublic(id, socket)
	case len(m.Egress) == 0 || len(spec.Egress) == 0:
		return p.cfg.Egress.Close(id)
	}
	return p.cfg.Egress.Open(id, socket, spec.Egress)
}

func (p *Provider) closeEgress(id string) error {
	if p.cfg.Egress == nil {
		return nil
	}
	return p.cfg.Egress.Close(id)
}

// leaveHostNetwork ends the processes of a sandbox with the network that
// run in the engine's own network namespace: long-lived namespaces
// started with --share-net by an engine before this one outlive it, and
// their agent would go on serving commands on the host's network. The
// next command starts a namespace of the sandbox's own; files are kept.
func (p *Provider) leaveHostNetwork(id string, m meta) error {
	if !m.Network {
		return nil
	}
	// This thread's namespace, not /proc/self's: that is the main
	// thread's, which a test that entered another namespace on it (and
	// left it locked there) changes.
	runtime.LockOSThread()
	host, err := os.Readlink("/proc/thread-self/ns/net")
	runtime.UnlockOSThread()
	if err != nil {
		return nil // no procfs to tell by: nothing to compare
	}
	pids, err := p.cg.pids(id)
	if err != nil {
		return err
	}
	shared := false
	for _, pid := range pids {
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net"); err == nil && ns == host {
			shared = true
			break
		}
	}
	if !shared {
		return nil
	}
	unlock, err := p.lockNamespace(id)
	if err != nil {
		return err
	}
	defer unlock()
	p.log().Warn("ending a sandbox's namespace on the host's network, started by an earlier engine; the next command starts one of its own", "sandbox", id)
	return p.cg.killAll(id, 10*time.Second)
}

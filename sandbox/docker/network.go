package docker

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// A container never joins a Docker network (T1). On the default bridge,
// the gateway is the host: its services bound to all addresses, its
// private networks and the cloud metadata address were all in reach.
// Every container runs with network mode "none" (loopback only); one with
// the network ("full") gets the egress forwarder, as one with an
// allowlist does, and the engine's egress proxy serves it any public
// host (egress.Proxy.OpenPublic). The proxy resolves names itself and
// dials only public addresses: loopback, RFC 1918, CGNAT, link-local and
// metadata, multicast and IPv6 ULA and link-local destinations are
// refused by construction, since it is the only way out. The price: the
// network is HTTP and HTTPS through the proxy variables, on the proxy's
// ports, not any protocol.

// checkEgress says why spec's network or allowlist cannot be served: the
// forwarder runs in the agent, and the proxy is Config.Egress.
func (p *Provider) checkEgress(spec sandbox.Spec) error {
	var noAgent error
	if p.agent == "" {
		noAgent = errors.New("the network and egress allowlists need the in-sandbox agent, which runs the forwarder (set FLOWBOX_DOCKER_AGENT_BINARY to a static engine binary)")
	}
	return sandbox.CheckNetwork(spec, p.cfg.Egress != nil, noAgent)
}

// openEgress serves the sandbox's egress: any public host with the
// network, the spec's allowlist with one, or nothing. A container created
// without the forwarder never reaches the socket.
func (p *Provider) openEgress(spec sandbox.Spec) error {
	if p.cfg.Egress == nil {
		return nil
	}
	socket := filepath.Join(p.egressDir(spec.ID), egress.SocketName)
	switch {
	case spec.Network:
		return p.cfg.Egress.OpenPublic(spec.ID, socket)
	case len(spec.Egress) == 0:
		return p.cfg.Egress.Close(spec.ID)
	}
	return p.cfg.Egress.Open(spec.ID, socket, spec.Egress)
}

func (p *Provider) closeEgress(id string) {
	if p.cfg.Egress != nil {
		p.cfg.Egress.Close(id)
	}
}

// leaveNetworks disconnects the sandbox's container from every Docker
// network it is on: containers created before sandboxes stopped using
// Docker networks were on the bridge, and they are kept (with what they
// installed) rather than recreated. Such a container has no forwarder:
// it has no network until it is deleted and made again.
func (p *Provider) leaveNetworks(ctx context.Context, id string, ctr container.InspectResponse) error {
	if ctr.NetworkSettings == nil {
		return nil
	}
	for name := range ctr.NetworkSettings.Networks {
		if name == "none" {
			continue
		}
		if _, err := p.cli.NetworkDisconnect(ctx, name, client.NetworkDisconnectOptions{Container: ctr.ID, Force: true}); err != nil {
			return p.apiErr("disconnect the container from network "+name, err)
		}
		p.log.Warn("sandbox container taken off a Docker network: sandboxes reach the internet only through the egress proxy now; delete the sandbox to give it the network again",
			"sandbox", id, "network", name)
	}
	return nil
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Ports (docs/WORKSPACE.md, "Preview links"): a connection to a TCP port
// a process of the sandbox listens on, made from inside the sandbox by
// its agent. The sandbox keeps no network interface for it; in the
// network-none mode this is the only way in.

// ErrPortClosed: nothing in the sandbox listens on the port.
var ErrPortClosed = errors.New("nothing in the sandbox listens on that port")

// Ports connects to ports of a provider's sandboxes. id must run
// (ErrNotRunning otherwise; ErrNotFound when it does not exist).
type Ports interface {
	// DialPort connects to port on the sandbox's loopback interface:
	// ErrPortClosed when nothing listens there. The connection carries
	// bytes both ways as TCP would; CloseWrite, when the connection has
	// it, ends what is sent.
	DialPort(ctx context.Context, id string, port int) (net.Conn, error)
}

// PortProvider is a provider whose sandboxes' ports can be reached.
// Ports' calls fail with ErrUnsupported for a sandbox that cannot be (a
// Docker container created without an agent).
type PortProvider interface {
	Ports() Ports
}

// CheckPort refuses a port outside 1-65535.
func CheckPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("%w: port %d is not between 1 and 65535", ErrInvalidPath, port)
	}
	return nil
}

// portTouchEvery bounds how often a connection to a sandbox's port
// refreshes its record: often enough that a sandbox in use is never
// idle for IdleAfter.
const portTouchEvery = 30 * time.Second

// DialPort connects to port in the scope's sandbox, starting it when it
// is stopped (wake-on-request; its background processes ended when it
// stopped, so a server must be started again). Each connection counts as
// the sandbox's use. Errors: ErrPortClosed when nothing listens,
// ErrUnsupported when the provider cannot reach ports, and Ensure's.
func (m *Manager) DialPort(ctx context.Context, scope Scope, port int) (net.Conn, error) {
	if err := scope.validate(); err != nil {
		return nil, err
	}
	if err := CheckPort(port); err != nil {
		return nil, err
	}
	pp, ok := m.cfg.Provider.(PortProvider)
	if !ok {
		return nil, fmt.Errorf("%w: the %s sandboxes' ports cannot be reached", ErrUnsupported, m.cfg.Provider.Name())
	}
	id := scope.SandboxID()
	conn, err := pp.Ports().DialPort(ctx, id, port)
	if errors.Is(err, ErrNotRunning) || errors.Is(err, ErrNotFound) {
		if _, err := m.Ensure(ctx, scope); err != nil {
			return nil, err
		}
		conn, err = pp.Ports().DialPort(ctx, id, port)
	}
	if err != nil {
		return nil, err
	}
	m.touchPort(ctx, scope, id)
	return conn, nil
}

// touchPort refreshes the record of a sandbox whose port was reached, at
// most every portTouchEvery, behind the connection.
func (m *Manager) touchPort(ctx context.Context, scope Scope, id string) {
	now := m.cfg.Clock.Now()
	if last, ok := m.portTouched.Load(id); ok && now.Sub(last.(time.Time)) < portTouchEvery {
		return
	}
	m.portTouched.Store(id, now)
	inst := m.instance(scope, id)
	m.background(func() {
		err := m.cfg.Store.Touch(context.WithoutCancel(ctx), inst, m.cfg.Now())
		if err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrDeleted) {
			m.log.Warn("sandbox record not refreshed after a connection to its port", "sandboxId", id, "err", err)
		}
	})
}

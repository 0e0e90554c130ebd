package agent

import (
	"bufio"
	"context"
	"fmt"
	"net"

	"github.com/flowbox/flowbox/sandbox"
)

// DialPort asks the agent reached by dial to connect to port in its
// sandbox (see Ports) and returns the connection, which outlives ctx as a
// net.Dialer's does: ctx bounds the connecting alone.
func DialPort(ctx context.Context, dial func(ctx context.Context) (*Conn, error), port int) (net.Conn, error) {
	if err := sandbox.CheckPort(port); err != nil {
		return nil, err
	}
	conn, r, err := Files{Dial: dial}.op(ctx, wireRequest{Op: opDial, Port: port}, nil)
	if err != nil {
		return nil, err
	}
	err = answer(ctx, opDial, r, func([]byte) error {
		return fmt.Errorf("agent %s: %w: a data frame", opDial, ErrProtocol)
	})
	if err == nil && !conn.stop() {
		err = ctx.Err() // ctx ended, and closed the connection
	}
	if err != nil {
		conn.c.Close()
		return nil, err
	}
	return &portConn{Conn: conn.c, r: r}, nil
}

// portConn is a connection to a port in a sandbox: the agent's
// connection, read through the reader that read its answer.
type portConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *portConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite ends what is sent to the port; the agent passes the end on.
func (c *portConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Ports is sandbox.Ports for a provider that reaches a sandbox's agent
// with this function.
type Ports func(ctx context.Context, id string) (*Conn, error)

var _ sandbox.Ports = Ports(nil)

func (d Ports) DialPort(ctx context.Context, id string, port int) (net.Conn, error) {
	return DialPort(ctx, func(ctx context.Context) (*Conn, error) { return d(ctx, id) }, port)
}

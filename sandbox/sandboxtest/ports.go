package sandboxtest

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// testPorts: a server a background process runs in the sandbox is
// reached on its port from outside, though the sandbox has no network;
// a port nothing listens on is ErrPortClosed, a stopped sandbox's
// ErrNotRunning.
func testPorts(t *testing.T, h Harness) {
	p, id := started(t, h, sandbox.Limits{})
	pp, ok := p.(sandbox.PortProvider)
	needs(t, p, ok, "ports")
	pr, ok := p.(sandbox.ProcessProvider)
	needs(t, p, ok, "background processes")
	ports := pp.Ports()
	ctx := ctxFor(t)

	if _, err := ports.DialPort(ctx, id, 7435); !errors.Is(err, sandbox.ErrPortClosed) && !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("DialPort before any server: %v, want ErrPortClosed", err)
	}
	// An echo server: busybox's nc runs cat for each connection.
	if _, err := pr.Background().StartProcess(ctx, id, "exec busybox nc -ll -p 7435 -e cat"); err != nil {
		if errors.Is(err, sandbox.ErrUnsupported) {
			t.Skipf("this configuration keeps no background processes: %v", err)
		}
		t.Fatalf("StartProcess: %v", err)
	}
	var conn net.Conn
	eventually(t, ctx, "the server to listen", func() bool {
		c, err := ports.DialPort(ctx, id, 7435)
		if err != nil && !errors.Is(err, sandbox.ErrPortClosed) {
			t.Fatalf("DialPort: %v", err)
		}
		conn = c
		return err == nil
	})
	defer conn.Close()
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, err := io.ReadAll(conn); err != nil || string(got) != "ping\n" {
		t.Errorf("the echo server answered %q, %v; want ping", got, err)
	}

	if err := p.Stop(ctx, id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if c, err := ports.DialPort(ctx, id, 7435); !errors.Is(err, sandbox.ErrNotRunning) {
		if c != nil {
			c.Close()
		}
		t.Errorf("DialPort of a stopped sandbox: %v, want ErrNotRunning", err)
	}
}

package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/sandbox"
)

// portDialTimeout bounds connecting to a port on the loopback interface,
// which answers at once unless its listener's queue is full.
const portDialTimeout = 5 * time.Second

// dial serves a "dial" request (see Ports): it connects to the port and
// then copies bytes both ways until both directions ended, or the agent
// does.
func (s *server) dial(ctx context.Context, req wireRequest, conn net.Conn, br *bufio.Reader, w *frameWriter) {
	up, err := dialLoopback(ctx, req.Port)
	if err != nil {
		w.finish(frameError, fileErrorPayload(err))
		return
	}
	defer up.Close()
	w.finish(frameDone, nil)
	if w.err != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() {
		conn.Close()
		up.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		// br may hold bytes the client sent right after its request.
		if _, err := io.Copy(up, br); err != nil {
			up.Close()
			return
		}
		_ = up.CloseWrite()
	})
	if _, err := io.Copy(conn, up); err != nil {
		// The client is gone: nothing more can reach it.
		conn.Close()
		up.Close()
	} else if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	wg.Wait()
}

// dialLoopback connects to port on 127.0.0.1, or ::1 when nothing
// listens there: ErrPortClosed when neither answers.
func dialLoopback(ctx context.Context, port int) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(ctx, portDialTimeout)
	defer cancel()
	var d net.Dialer
	var first error
	for _, host := range []string{"127.0.0.1", "::1"} {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			return c.(*net.TCPConn), nil
		}
		if first == nil {
			first = err
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENETUNREACH) {
			break
		}
	}
	if errors.Is(first, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w: nothing listens on port %d in the sandbox", sandbox.ErrPortClosed, port)
	}
	return nil, fmt.Errorf("%w: port %d in the sandbox: %v", sandbox.ErrPortClosed, port, first)
}

package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Forward runs inside a sandbox: it copies every connection ln accepts
// to the proxy's Unix socket at socket, both ways, until ctx ends. It
// decides nothing; the proxy does. It must stay small: it runs in every
// sandbox with an allowlist, in the sandbox's limits.
func Forward(ctx context.Context, ln net.Listener, socket string) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			forward(ctx, c, socket)
		}()
	}
}

func forward(ctx context.Context, c net.Conn, socket string) {
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		// Said the way a proxy says it, so that the program in the
		// sandbox shows why.
		const body = "flowbox egress proxy: not reachable (the sandbox's egress is off or the engine restarted)\n"
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		io.Copy(c, up)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		close(done)
	}()
	io.Copy(up, c)
	if cw, ok := up.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	<-done
}

package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client bounds; variables so that tests can shorten them.
var (
	// grace is how long past the request's timeout the client waits for
	// the agent's exit frame: the agent's kill and drain take seconds at
	// most.
	grace = 20 * time.Second
	// cancelWait is how long the client waits for the exit frame after
	// it cancelled.
	cancelWait = 15 * time.Second
)

// writeTimeout bounds sending the request.
const writeTimeout = 10 * time.Second

// Conn is a connection to an agent, good for one command.
type Conn struct {
	c *net.UnixConn
}

// Dial connects to the agent listening on the Unix socket at path. The
// last component of path may have been replaced by the sandbox, so it is
// opened without following links, checked to be a socket, and connected
// to through the open descriptor (/proc/self/fd/N): no link is ever
// followed, whatever the sandbox planted. The directories above it must be
// the caller's.
//
// A missing socket, or one nobody accepts on, is ErrNotListening; a path
// that is not a socket is ErrNotSocket.
func Dial(ctx context.Context, path string) (*Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("dial %s: %w", path, ErrNotListening)
		}
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("dial %s: %w (mode %#o)", path, ErrNotSocket, st.Mode&unix.S_IFMT)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("dial %s: %w", path, ErrNotListening)
		}
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return &Conn{c: c.(*net.UnixConn)}, nil
}

// Close closes the connection; a command still running is cancelled.
func (c *Conn) Close() error { return c.c.Close() }

// Exec runs req and closes the connection. Output is written to stdout
// and stderr as it arrives, from the calling goroutine, never after Exec
// returns. When ctx ends, the command is cancelled: Exec waits briefly for
// the agent to confirm its processes are gone, then returns ctx's error.
// Nothing the agent sends is trusted: frames are bounded, and an agent
// that stops answering is given up on req.Timeout plus a grace period
// after the request.
func (c *Conn) Exec(ctx context.Context, req Request, stdout, stderr io.Writer) (Result, error) {
	defer c.c.Close()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if req.Timeout < 0 {
		return Result{}, errors.New("agent exec: negative timeout")
	}
	line, err := json.Marshal(wireRequest{Command: req.Command, TimeoutMs: req.Timeout.Milliseconds(), Stdin: req.Stdin != nil})
	if err != nil {
		return Result{}, fmt.Errorf("agent exec: %w", err)
	}
	line = append(line, '\n')
	if len(line) > MaxRequest {
		return Result{}, fmt.Errorf("agent exec: the command is %d bytes, over the bound of %d", len(req.Command), MaxRequest)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.c.Write(line); err != nil {
		return Result{}, fmt.Errorf("agent exec: send the request: %w", err)
	}
	if req.Timeout > 0 {
		_ = c.c.SetReadDeadline(time.Now().Add(req.Timeout + grace))
	}
	cancelMsg := []byte{cancelByte}
	var out *inputSender
	if req.Stdin != nil {
		h := frameHeader(frameCancel, 0)
		cancelMsg = h[:]
		out = &inputSender{c: c.c}
		go out.send(req.Stdin)
	}
	stop := context.AfterFunc(ctx, func() {
		if out != nil {
			out.mu.Lock()
			defer out.mu.Unlock()
		}
		_ = c.c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.c.Write(cancelMsg)
		_ = c.c.SetReadDeadline(time.Now().Add(cancelWait))
	})
	defer stop()

	r := bufio.NewReaderSize(c.c, MaxFrame+5)
	buf := make([]byte, MaxFrame)
	for {
		typ, p, err := readFrame(r, buf)
		if err != nil {
			if ctx.Err() != nil {
				return Result{Cancelled: true}, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Result{}, fmt.Errorf("agent exec: read the answer: %w", err)
		}
		switch typ {
		case frameStdout:
			_, _ = stdout.Write(p)
		case frameStderr:
			_, _ = stderr.Write(p)
		case frameExit:
			res, err := parseExit(p)
			if err != nil {
				return Result{}, fmt.Errorf("agent exec: %w", err)
			}
			if res.Cancelled && ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, nil
		case frameError:
			return Result{}, fmt.Errorf("agent exec: %w: %s", ErrRefused, printable(p))
		default:
			return Result{}, fmt.Errorf("agent exec: %w: unknown frame type %d", ErrProtocol, typ)
		}
	}
}

// inputSender sends a command's standard input as frames, one write at a
// time with the cancel.
type inputSender struct {
	mu sync.Mutex
	c  *net.UnixConn
}

// send sends what r gives, then the end of the input, and stops at the
// first write that fails (the connection closed: the command is over).
func (s *inputSender) send(r io.Reader) {
	buf := make([]byte, MaxFrame)
	for {
		n, err := r.Read(buf)
		if n > 0 && s.write(frameStdin, buf[:n]) != nil {
			return
		}
		if err != nil {
			_ = s.write(frameStdinEnd, nil)
			return
		}
	}
}

func (s *inputSender) write(typ byte, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := frameHeader(typ, len(p))
	// The agent reads input as it comes (it queues what the command has
	// not read), so a write that takes this long has no reader.
	_ = s.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	bufs := net.Buffers{h[:], p}
	_, err := bufs.WriteTo(s.c)
	return err
}

package agent

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
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
	c net.Conn
	// stop, when set, undoes what ties the connection to a context.
	stop func() bool
	// proof, when set, is the agent's proof that must come first in its
	// answer (see Over a Unix socket).
	proof []byte
}

// unsent tells why a request could not be sent whole: the other end
// closed before it had the request's last byte, so no agent ran it. When
// the agent must prove itself, what that end sent before it closed says
// who it was: ErrAuth when not the agent (a process of the sandbox that
// took the socket), ErrNotListening when nothing came.
func (c *Conn) unsent(err error) error {
	if c.proof == nil {
		return err
	}
	_ = c.c.SetReadDeadline(time.Now().Add(time.Second))
	if _, aerr := c.answer(); aerr != nil {
		return fmt.Errorf("%w (%w)", aerr, err)
	}
	return fmt.Errorf("%w: the agent closed before the request's end: %w", ErrNotListening, err)
}

// answer is the reader of the agent's answer, once the agent proved it
// holds the token when it must: a connection closed before the proof is
// ErrNotListening (the agent ended, or holds another token and ran
// nothing), any other answer ErrAuth.
func (c *Conn) answer() (*bufio.Reader, error) {
	r := bufio.NewReaderSize(c.c, MaxFrame+5)
	if c.proof == nil {
		return r, nil
	}
	got := make([]byte, len(c.proof))
	switch n, err := io.ReadFull(r, got); {
	case err != nil && n > 0:
		// Bytes that are not a whole proof: not the agent, whatever
		// ended the connection (a peer that closes with our request
		// unread resets it, after its bytes).
		return nil, fmt.Errorf("read the agent's proof: %w: %w", ErrAuth, err)
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return nil, fmt.Errorf("read the agent's proof: %w", ErrNotListening)
	case err != nil:
		return nil, fmt.Errorf("read the agent's proof: %w", err)
	case !hmac.Equal(got, c.proof):
		return nil, ErrAuth
	}
	return r, nil
}

// Close closes the connection; a command still running is cancelled.
func (c *Conn) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return c.c.Close()
}

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
		return Result{}, fmt.Errorf("agent exec: send the request: %w", c.unsent(err))
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

	r, err := c.answer()
	if err != nil {
		if ctx.Err() != nil {
			return Result{Cancelled: true}, ctx.Err()
		}
		return Result{}, fmt.Errorf("agent exec: %w", err)
	}
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
	c  net.Conn
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

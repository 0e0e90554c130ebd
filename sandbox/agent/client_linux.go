package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dial connects to the agent listening on the Unix socket at path. The
// last component of path may have been replaced by the sandbox, so it is
// opened without following links, checked to be a socket, and connected
// to through the open descriptor (/proc/self/fd/N): no link is ever
// followed, whatever the sandbox planted. The directories above it must be
// the caller's.
//
// With a token, the agent must prove it holds it (see Over a Unix socket)
// before any byte of its answer is taken: the sandbox can replace the
// socket with one of its own, which cannot (ErrAuth from the operation).
// An agent started without a token is dialled with none.
//
// A missing socket, or one nobody accepts on, is ErrNotListening; a path
// that is not a socket is ErrNotSocket.
func Dial(ctx context.Context, path string, token []byte) (*Conn, error) {
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
	if len(token) == 0 {
		return &Conn{c: c}, nil
	}
	// The challenge and the token's ID go ahead of the request; the
	// agent's proof is checked before the answer is read (Conn.answer).
	cc := make([]byte, nonceSize)
	_, _ = rand.Read(cc)
	_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.Write(append(cc, tokenID(token)...))
	_ = c.SetWriteDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: send the challenge: %w", path, err)
	}
	return &Conn{c: c, proof: proof(token, "agent-unix", cc)}, nil
}

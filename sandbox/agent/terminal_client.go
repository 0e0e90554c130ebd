package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/flowbox/flowbox/sandbox"
)

// Terminal is an interactive shell on a pseudo-terminal in a sandbox
// (see Terminals): Read gives what it shows until the shell ends (then
// io.EOF), Write sends keystrokes, Resize its size, Close hangs it up.
type Terminal struct {
	conn *Conn
	r    *bufio.Reader
	buf  []byte
	left []byte

	wmu  sync.Mutex
	exit int
	done bool
}

var _ sandbox.Terminal = (*Terminal)(nil)

// OpenTerminal starts a terminal of cols by rows through the agent dial
// reaches. ctx bounds the start alone.
func OpenTerminal(ctx context.Context, dial func(ctx context.Context) (*Conn, error), cols, rows int) (*Terminal, error) {
	if cols < 1 || rows < 1 || cols > MaxTerminalSize || rows > MaxTerminalSize {
		return nil, fmt.Errorf("%w: a terminal of %dx%d (each between 1 and %d)", sandbox.ErrInvalidPath, cols, rows, MaxTerminalSize)
	}
	conn, r, err := Files{Dial: dial}.op(ctx, wireRequest{Op: opPTY, Cols: cols, Rows: rows}, nil)
	if err != nil {
		return nil, err
	}
	err = answer(ctx, opPTY, r, func([]byte) error {
		return fmt.Errorf("agent %s: %w: a data frame", opPTY, ErrProtocol)
	})
	if err == nil && !conn.stop() {
		err = ctx.Err()
	}
	if err != nil {
		conn.c.Close()
		return nil, err
	}
	return &Terminal{conn: conn, r: r, buf: make([]byte, MaxFrame), exit: -1}, nil
}

// Read reads what the terminal shows; io.EOF once the shell ended.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.left) == 0 {
		if t.done {
			return 0, io.EOF
		}
		typ, data, err := readFrame(t.r, t.buf)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("agent terminal: %w", err)
		}
		switch typ {
		case frameStdout:
			t.left = data
		case frameExit:
			if len(data) >= 4 {
				t.exit = int(int32(binary.BigEndian.Uint32(data)))
			}
			t.done = true
		case frameError:
			return 0, fmt.Errorf("%w: %s", ErrRefused, data)
		default:
			return 0, fmt.Errorf("agent terminal: %w: frame type %d", ErrProtocol, typ)
		}
	}
	n := copy(p, t.left)
	t.left = t.left[n:]
	return n, nil
}

// ExitCode is the shell's exit code once Read returned io.EOF; -1
// before.
func (t *Terminal) ExitCode() int { return t.exit }

func (t *Terminal) send(typ byte, p []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	h := frameHeader(typ, len(p))
	if _, err := t.conn.c.Write(append(h[:], p...)); err != nil {
		return fmt.Errorf("agent terminal: %w", err)
	}
	return nil
}

// Write sends keystrokes.
func (t *Terminal) Write(p []byte) (int, error) {
	for sent := 0; sent < len(p); {
		chunk := p[sent:min(len(p), sent+MaxFrame)]
		if err := t.send(frameStdin, chunk); err != nil {
			return sent, err
		}
		sent += len(chunk)
	}
	return len(p), nil
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > MaxTerminalSize || rows > MaxTerminalSize {
		return fmt.Errorf("%w: a terminal of %dx%d (each between 1 and %d)", sandbox.ErrInvalidPath, cols, rows, MaxTerminalSize)
	}
	var p [4]byte
	binary.BigEndian.PutUint16(p[:], uint16(cols))
	binary.BigEndian.PutUint16(p[2:], uint16(rows))
	return t.send(frameResize, p[:])
}

// Close hangs the terminal up.
func (t *Terminal) Close() error { return t.conn.c.Close() }

// Terminals is sandbox.Terminals for a provider that reaches a sandbox's
// agent with this function.
type Terminals func(ctx context.Context, id string) (*Conn, error)

var _ sandbox.Terminals = Terminals(nil)

func (d Terminals) OpenTerminal(ctx context.Context, id string, cols, rows int) (sandbox.Terminal, error) {
	return OpenTerminal(ctx, func(ctx context.Context) (*Conn, error) { return d(ctx, id) }, cols, rows)
}

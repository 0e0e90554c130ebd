package sandbox

import (
	"context"
	"fmt"
	"io"
)

// Terminals (docs/WORKSPACE.md, "Terminal"): an interactive shell on a
// pseudo-terminal in a running sandbox, started by its agent, that
// begins with the persistent shell's state and saves it after each
// command line.

// Terminal is a terminal in a sandbox: Read gives what it shows (io.EOF
// once its shell ended), Write sends keystrokes, Close hangs it up.
type Terminal interface {
	io.ReadWriteCloser
	Resize(cols, rows int) error
}

// Terminals start terminals in a provider's sandboxes; id must run.
type Terminals interface {
	OpenTerminal(ctx context.Context, id string, cols, rows int) (Terminal, error)
}

// TerminalProvider is a provider whose sandboxes can have terminals;
// ErrUnsupported for one that cannot (no agent).
type TerminalProvider interface {
	Terminals() Terminals
}

// OpenTerminal starts a terminal in the scope's sandbox, which it
// creates or starts when needed (as a command would).
func (m *Manager) OpenTerminal(ctx context.Context, scope Scope, cols, rows int) (Terminal, error) {
	tp, ok := m.cfg.Provider.(TerminalProvider)
	if !ok {
		return nil, fmt.Errorf("%w: the %s sandboxes have no terminals", ErrUnsupported, m.cfg.Provider.Name())
	}
	id, err := m.Ensure(ctx, scope)
	if err != nil {
		return nil, err
	}
	t, err := tp.Terminals().OpenTerminal(ctx, id, cols, rows)
	if err != nil {
		return nil, err
	}
	m.Used(ctx, scope)
	return t, nil
}

// Used counts use of the scope's sandbox that is not a command (a
// terminal, a preview link's connection), so that it does not stop as
// idle under someone using it: its record is refreshed, at most every
// portTouchEvery.
func (m *Manager) Used(ctx context.Context, scope Scope) {
	m.touchPort(ctx, scope, scope.SandboxID())
}

//go:build !linux

package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/flowbox/flowbox/sandbox"
)

// Config configures Serve; see the Linux build.
type Config struct {
	Socket, Shell, StateDir, WorkDir, Cgroup string
	Env                                      []string
	Logger                                   *slog.Logger
}

// Serve reports that the agent runs on Linux only.
func Serve(ctx context.Context, cfg Config) error {
	return fmt.Errorf("agent: %w: it runs on Linux only", sandbox.ErrUnsupported)
}

// Conn is a connection to an agent.
type Conn struct{}

// Dial reports that the agent runs on Linux only.
func Dial(ctx context.Context, path string) (*Conn, error) {
	return nil, fmt.Errorf("dial %s: %w: the agent runs on Linux only", path, sandbox.ErrUnsupported)
}

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Exec reports that the agent runs on Linux only.
func (c *Conn) Exec(ctx context.Context, req Request, stdout, stderr io.Writer) (Result, error) {
	return Result{}, fmt.Errorf("agent exec: %w: the agent runs on Linux only", sandbox.ErrUnsupported)
}

//go:build !linux

package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/flowbox/flowbox/sandbox"
)

// Config configures Serve; see the Linux build.
type Config struct {
	Socket, Shell, StateDir, WorkDir, Cgroup, Listen string
	Env                                              []string
	Logger                                           *slog.Logger
	Token                                            []byte
}

// Serve reports that the agent runs on Linux only.
func Serve(ctx context.Context, cfg Config) error {
	return fmt.Errorf("agent: %w: it runs on Linux only", sandbox.ErrUnsupported)
}

// Dial reports that the agent's Unix socket is for Linux only.
func Dial(ctx context.Context, path string, token []byte) (*Conn, error) {
	return nil, fmt.Errorf("dial %s: %w: the agent runs on Linux only", path, sandbox.ErrUnsupported)
}

// CheckCgroups reports that cgroups are Linux's.
func CheckCgroups(group string, controllers []string) error {
	return fmt.Errorf("agent: %w: cgroups are Linux's", sandbox.ErrUnsupported)
}

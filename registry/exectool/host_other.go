//go:build !linux

package exectool

import (
	"context"
	"fmt"

	"github.com/flowbox/flowbox/sandbox"
)

// HostPATH is the PATH of host programs.
const HostPATH = "/usr/local/bin:/usr/bin:/bin"

// HostExecutor runs programs on the engine's machine; only on Linux,
// where their process groups and working directories are handled.
type HostExecutor struct{}

// Execute reports that host tools need Linux.
func (HostExecutor) Execute(ctx context.Context, inv Invocation) (Result, error) {
	err := fmt.Errorf("run a program on the host: exec tools on the host need Linux: %w", sandbox.ErrUnsupported)
	return notRun(-1, err.Error(), 0), err
}

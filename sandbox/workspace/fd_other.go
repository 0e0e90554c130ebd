//go:build !unix

package workspace

import (
	"fmt"
	"os"

	"github.com/flowbox/flowbox/sandbox"
)

const (
	dirFlags  = os.O_RDONLY
	readFlags = os.O_RDONLY
)

// linkAt is unix-only: sandboxes run on Linux.
func linkAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	return fmt.Errorf("save an upload: %w: chat workspaces need a unix host", sandbox.ErrUnsupported)
}

//go:build !linux

package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

var errNotLinux = fmt.Errorf("skills: atomic replacement of skills needs Linux's renameat2: %w", errors.ErrUnsupported)

func exchange(a, b string) error        { return errNotLinux }
func renameNoReplace(a, b string) error { return errNotLinux }

func tryLock(f *os.File) (bool, error) { return false, errNotLinux }

func fileID(fi fs.FileInfo) (dev, ino uint64) { return 0, 0 }

const nonBlock = 0

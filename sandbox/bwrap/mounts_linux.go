package bwrap

import (
	"errors"
	"fmt"
	"os"

	"github.com/flowbox/flowbox/sandbox"
)

// mountArgs are the bwrap arguments of a sandbox's mounts.
func mountArgs(mounts []sandbox.Mount) []string {
	var args []string
	for _, m := range mounts {
		bind := "--bind"
		if m.ReadOnly {
			bind = "--ro-bind"
		}
		args = append(args, bind, m.Source, m.Target)
	}
	return args
}

// checkSources says which mount source of a sandbox is gone: the sandbox
// keeps the mounts it was created with, and bwrap cannot bind a missing
// directory.
func checkSources(mounts []sandbox.Mount) error {
	for _, m := range mounts {
		fi, err := os.Stat(m.Source)
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return fmt.Errorf("the sandbox was created with %s mounted from %s, which is gone (%w); recreate the directory, or delete the sandbox to create it anew",
				m.Target, m.Source, err)
		}
	}
	return nil
}

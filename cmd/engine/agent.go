package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// sandboxAgent runs the exec agent (sandbox/agent) as a sandbox's main
// process: the docker provider bind-mounts this binary, built static
// (CGO_ENABLED=0), into every container and starts it there. It reads no
// FLOWBOX_* configuration; commands get the container's environment.
func sandboxAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sandbox-agent", flag.ContinueOnError)
	socket := fs.String("socket", "", "path of the Unix socket to serve on (required)")
	shell := fs.String("shell", "/bin/sh", "shell that interprets commands")
	stateDir := fs.String("state-dir", sandbox.StateDir, "directory of the persistent shell's state")
	workDir := fs.String("workdir", sandbox.WorkspaceDir, "directory a new sandbox's commands start in")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	egressSocket := fs.String("egress-socket", "", "the egress proxy's Unix socket: forward "+egress.ListenAddr+" to it (see engine egress-forward)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" || fs.NArg() > 0 {
		return errors.New("usage: engine sandbox-agent -socket PATH [-shell SH] [-state-dir DIR] [-workdir DIR]")
	}
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	if *egressSocket != "" {
		ln, err := net.Listen("tcp", egress.ListenAddr)
		if err != nil {
			return fmt.Errorf("egress forwarder: %w", err)
		}
		go egress.Forward(ctx, ln, *egressSocket)
	}
	return agent.Serve(ctx, agent.Config{
		Socket:   *socket,
		Shell:    *shell,
		StateDir: *stateDir,
		WorkDir:  *workDir,
		Env:      os.Environ(),
		Logger:   log,
	})
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// The agent runs on the process's main thread. Under gVisor (runsc; the
// release Debian 12 ships, 20221219) prctl(PR_SET_CHILD_SUBREAPER), which
// agent.Serve calls on its caller's thread before it listens, succeeds
// only on thread 1 of the container's PID 1: the docker provider makes
// the agent PID 1 there, and main, which calls sandboxAgent, runs on the
// main thread once init has locked it.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-agent" {
		runtime.LockOSThread()
	}
}

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

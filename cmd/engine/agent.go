package main

import (
	"context"
	"os"
	"runtime"

	"github.com/flowbox/flowbox/sandbox/agent"
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
// process, for an engine binary without the agent-only flowbox-agent
// beside it (see agent.Main).
func sandboxAgent(ctx context.Context, args []string) error { return agent.Main(ctx, args) }

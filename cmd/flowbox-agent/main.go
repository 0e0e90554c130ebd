// Command flowbox-agent is the sandbox command agent alone (package
// sandbox/agent): what the engine's sandbox-agent command runs, in a
// binary a tenth of the engine's size, so that each running sandbox's
// agent starts faster and holds less memory. The engine uses it when it
// lies beside the engine's executable (build it with CGO_ENABLED=0 for
// Docker sandboxes); the providers start it as
//
//	flowbox-agent sandbox-agent -socket PATH [flags]
//
// runs a sandbox command's egress forwarder as
//
//	flowbox-agent egress-forward [flags] -- CMD ARGS
//
// and a Kubernetes pod's init container copies it into the pod with
//
//	flowbox-agent install PATH
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/flowbox/flowbox/sandbox/agent"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// The agent runs on the main thread (see agent.Main).
func init() { runtime.LockOSThread() }

func main() {
	args := os.Args[1:]
	if len(args) == 2 && args[0] == "install" {
		if err := agent.Install(args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "flowbox-agent:", err)
			os.Exit(1)
		}
		return
	}
	if len(args) > 0 && args[0] == "egress-forward" {
		// The forwarder of a sandbox's command: this binary starts in a
		// fraction of the engine's time (docs/BENCHMARKS.md).
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code, err := egress.ForwardCommand(ctx, args[1:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "flowbox-agent:", err)
		}
		os.Exit(code)
	}
	if len(args) > 0 && args[0] == "sandbox-agent" {
		args = args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := agent.Main(ctx, args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flowbox-agent:", err)
		os.Exit(1)
	}
}

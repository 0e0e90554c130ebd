package egress

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// ForwardCommand is the egress-forward command of the engine and of the
// agent binary (cmd/flowbox-agent). It runs inside a sandbox with an
// egress allowlist or the full network: it
// listens on -listen in the sandbox's network namespace and copies every
// connection to the engine's egress proxy at -socket (see sandbox/egress).
// With a command after the flags, it runs that command once listening and
// exits with its status, so that a provider without a long-lived process
// per sandbox (bwrap) can give each command its forwarder.
func ForwardCommand(ctx context.Context, args []string) (int, error) {
	fs := flag.NewFlagSet("egress-forward", flag.ContinueOnError)
	listen := fs.String("listen", ListenAddr, "TCP address to listen on inside the sandbox")
	socket := fs.String("socket", SocketPath, "the egress proxy's Unix socket")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return 1, fmt.Errorf("egress-forward: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if fs.NArg() == 0 {
		return 0, Forward(ctx, ln, *socket)
	}
	served := make(chan error, 1)
	go func() { served <- Forward(ctx, ln, *socket) }()
	code, err := runChild(fs.Args())
	cancel()
	<-served
	return code, err
}

// runChild runs argv with this process's standard streams and
// environment, passes the termination signals on, and returns its exit
// status the way a shell reports it.
func runChild(argv []string) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("egress-forward: %w", err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 1, fmt.Errorf("egress-forward: %w", err)
}

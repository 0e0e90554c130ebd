package agent

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/egress"
)

// TokenEnv names the environment variable that gives an agent serving on
// TCP its sandbox's token.
const TokenEnv = "FLOWBOX_AGENT_TOKEN"

// Main runs the agent as a sandbox's main process from its command-line
// arguments (after the sandbox-agent word): the engine's sandbox-agent
// command and the agent-only flowbox-agent binary both call it. It reads
// no FLOWBOX_* configuration; commands get the process's environment.
//
// The caller must run it on the process's main thread, locked there from
// init: under gVisor (Debian 12's runsc) prctl(PR_SET_CHILD_SUBREAPER),
// which Serve calls on its caller's thread, succeeds only on thread 1 of
// the container's PID 1.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sandbox-agent", flag.ContinueOnError)
	socket := fs.String("socket", "", "path of the Unix socket to serve on")
	listen := fs.String("listen", "", "TCP address to serve on (\":7070\"), with the token of $"+TokenEnv+" (see the protocol's Over TCP)")
	shell := fs.String("shell", "/bin/sh", "shell that interprets commands")
	stateDir := fs.String("state-dir", sandbox.StateDir, "directory of the persistent shell's state")
	workDir := fs.String("workdir", sandbox.WorkspaceDir, "directory a new sandbox's commands start in")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	tokenFile := fs.String("token-file", "", "file holding the sandbox's token, which every client then proves; read and removed at the start")
	cgroup := fs.String("cgroup", "", "the sandbox's cgroup (\"flowbox/<id>\"): serve no command unless the agent is in it under every controller of -cgroup-controllers")
	cgroupControllers := fs.String("cgroup-controllers", "memory,pids", "the cgroup v1 controllers -cgroup is checked under")
	egressSocket := fs.String("egress-socket", "", "the egress proxy's Unix socket: forward "+egress.ListenAddr+" to it (see engine egress-forward)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*socket == "" && *listen == "") || fs.NArg() > 0 {
		return errors.New("usage: sandbox-agent {-socket PATH | -listen ADDR} [-shell SH] [-state-dir DIR] [-workdir DIR] [-egress-socket PATH]")
	}
	// The token is the engine's; commands do not inherit it.
	token := []byte(os.Getenv(TokenEnv))
	os.Unsetenv(TokenEnv)
	if *tokenFile != "" {
		// Read before any command runs, and gone before one can.
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("read the token: %w", err)
		}
		if err := os.Remove(*tokenFile); err != nil {
			return fmt.Errorf("remove the token file: %w", err)
		}
		token = bytes.TrimSpace(b)
	}
	if *listen != "" && len(token) < MinToken {
		return fmt.Errorf("-listen needs the sandbox's token in $%s, at least %d bytes", TokenEnv, MinToken)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log level %q: use debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *cgroup != "" {
		// Whoever started the agent may have died before it put the
		// agent in its groups: check, never assume.
		if err := CheckCgroups(*cgroup, strings.Split(*cgroupControllers, ",")); err != nil {
			return err
		}
	}
	if *egressSocket != "" {
		ln, err := net.Listen("tcp", egress.ListenAddr)
		if err != nil {
			return fmt.Errorf("egress forwarder: %w", err)
		}
		go egress.Forward(ctx, ln, *egressSocket)
	}
	return Serve(ctx, Config{
		Socket:   *socket,
		Listen:   *listen,
		Token:    token,
		Shell:    *shell,
		StateDir: *stateDir,
		WorkDir:  *workDir,
		Env:      os.Environ(),
		Logger:   log,
	})
}

// Install copies the running executable to dst, executable by all: how a
// Kubernetes pod's init container puts the agent into a volume the
// sandbox's container runs it from.
func Install(dst string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: find this executable: %w", err)
	}
	in, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("install: copy to %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

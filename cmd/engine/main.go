// Command engine is Flowbox's one binary.
//
//	engine serve              run the product: HTTP API and UI, and the task workers
//	engine worker             run the task workers only (scale out on one MongoDB and Redis)
//	engine migrate            create the database indexes and exit
//	engine shell [flags] CMD  run one command in a chat's sandbox, as the agent would
//	engine user CMD           manage accounts (add, list, disable, enable, reset-password)
//	engine version            print the version
//
// Configuration comes from FLOWBOX_* environment variables (docs/CONFIGURATION.md);
// with none set, it runs on an embedded database, an in-process Redis and
// the best sandbox provider this machine can run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flowbox/flowbox/engine"
	"github.com/flowbox/flowbox/engine/config"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/docker"
	"github.com/flowbox/flowbox/sandbox/mongostore"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: engine <command> [flags]

commands:
  serve     run the engine (HTTP on FLOWBOX_HTTP_ADDR, default :8080) and its task workers
  worker    run the task workers only, on the MongoDB and Redis the engines share
  migrate   create the database indexes and exit
  shell     run one command in a chat's sandbox: engine shell -app A -user U -chat C 'echo hi'
  user      manage accounts: engine user add|list|disable|enable|reset-password
  version   print the version
  sandbox-agent  run inside a sandbox: serve its commands on a Unix socket (-socket PATH)
  egress-forward run inside a sandbox: forward 127.0.0.1:3128 to the egress proxy's socket [-- CMD ARGS]

Configuration is read from FLOWBOX_* environment variables; see docs/CONFIGURATION.md.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	code := 0
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "worker":
		err = worker(ctx, os.Args[2:])
	case "migrate":
		err = migrate(ctx)
	case "shell":
		code, err = shell(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "user":
		err = user(ctx, os.Args[2:], os.Stdin, os.Stdout)
	case "sandbox-agent":
		err = sandboxAgent(ctx, os.Args[2:])
	case "egress-forward":
		code, err = egressForward(ctx, os.Args[2:])
	case "version":
		fmt.Println("flowbox engine", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "engine: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// agentName is the agent-only binary (cmd/flowbox-agent) the engine
// looks for beside its own executable.
const agentName = "flowbox-agent"

// besideAgent returns the path of the agent-only binary beside this
// executable, links resolved, or "" when there is none.
func besideAgent() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	path := filepath.Join(filepath.Dir(exe), agentName)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return ""
	}
	return path
}

// newLogger logs text to stderr at level (debug, info, warn or error).
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// setup reads the configuration and makes the logger it asks for.
func setup() (config.Config, *slog.Logger, error) {
	cfg, err := config.Load()
	if err != nil {
		return cfg, nil, err
	}
	// The agent-only binary beside this one is the sandboxes' command
	// agent: it starts faster and holds a tenth of the engine's memory.
	agentBin := besideAgent()
	if cfg.Sandbox.BwrapAgentBinary == "" {
		cfg.Sandbox.BwrapAgentBinary = agentBin
	}
	if cfg.Sandbox.BwrapAgentBinary == "" {
		// Else this binary is an engine: bwrap sandboxes run its command
		// agent in one long-lived namespace each.
		if exe, err := os.Executable(); err == nil {
			cfg.Sandbox.BwrapAgentBinary, _ = filepath.EvalSymlinks(exe)
		}
	}
	// Docker runs it from a bind mount in any image: only a static one,
	// and only where the daemon sees this machine's paths.
	if cfg.Sandbox.DockerAgentBinary == "" && cfg.Sandbox.DockerDaemonAgentBinary == "" && agentBin != "" && docker.CheckStatic(agentBin) == nil {
		cfg.Sandbox.DockerAgentBinary = agentBin
	}
	log, err := newLogger(cfg.LogLevel)
	return cfg, log, err
}

func serve(ctx context.Context, args []string) error {
	cfg, log, err := setup()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.HTTPAddr, "addr", cfg.HTTPAddr, "HTTP listen address (FLOWBOX_HTTP_ADDR)")
	fs.Func("tools", "a file declaring exec tools (repeatable; added to FLOWBOX_EXEC_TOOLS)", func(f string) error {
		cfg.Files.ExecTools = append(cfg.Files.ExecTools, f)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	eng, err := engine.New(ctx, cfg, engine.Options{Logger: log})
	if err != nil {
		return err
	}
	// Runs after the HTTP server's shutdown below: running tasks finish
	// while the database and Redis are still there.
	defer eng.Close()
	if cfg.Workers.InServe {
		if err := eng.StartWorkers(); err != nil {
			return err
		}
	}
	srv := &http.Server{Addr: cfg.HTTPAddr, Handler: eng.Handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	svc := eng.Services
	log.Info("flowbox engine serving", "addr", cfg.HTTPAddr, "version", version, "mode", cfg.Mode,
		"sandboxProvider", svc.Provider.Name(), "mongodb", svc.MongoDesc, "redis", svc.RedisDesc, "workers", cfg.Workers.InServe)
	select {
	case err := <-errc:
		return fmt.Errorf("http server on %s: %w", cfg.HTTPAddr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down: letting requests and running tasks finish")
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down http server: %w", err)
	}
	return nil
}

// worker runs the task workers and their scheduler without the HTTP
// server, so that operators can add workers on other machines. It needs
// the MongoDB and the Redis the engines share: the embedded ones belong to
// the engine serve process that started them.
func worker(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("worker takes no arguments (got %q); it is configured by FLOWBOX_* variables", args)
	}
	cfg, log, err := setup()
	if err != nil {
		return err
	}
	if cfg.MongoURI == "" || cfg.RedisAddr == "" {
		return errors.New("engine worker needs the MongoDB and the Redis that engine serve uses: set FLOWBOX_MONGODB_URI and FLOWBOX_REDIS_ADDR (on the embedded defaults, engine serve runs the workers itself)")
	}
	svc, err := engine.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer svc.Close()
	w, err := engine.NewWorkers(svc, cfg, log, engine.NewRegistry())
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	log.Info("flowbox worker running", "version", version, "sandboxProvider", svc.Provider.Name(), "mongodb", svc.MongoDesc, "redis", svc.RedisDesc)
	<-ctx.Done()
	log.Info("shutting down: letting running tasks finish", "timeout", cfg.Workers.ShutdownTimeout)
	w.Shutdown()
	return nil
}

func migrate(ctx context.Context) error {
	cfg, log, err := setup()
	if err != nil {
		return err
	}
	// Opening the store creates the indexes; no provider is needed.
	db, closeDB, desc, err := engine.OpenMongo(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := mongostore.New(ctx, db, log); err != nil {
		return fmt.Errorf("create the indexes of sandbox_instances: %w", err)
	}
	log.Info("indexes created", "mongodb", desc)
	return nil
}

// shell runs one command in a chat's sandbox through the manager, exactly
// as the sandbox_shell tool does, and returns the command's exit code.
func shell(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("shell", flag.ContinueOnError)
	app := fs.String("app", "local-app", "app id")
	user := fs.String("user", "local-user", "user id")
	chat := fs.String("chat", "local-chat", "chat id")
	timeout := fs.Duration("timeout", sandbox.DefaultTimeout, "command timeout (1s-300s)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, errors.New("shell takes exactly one command argument; quote it: engine shell 'ls -la'")
	}
	cfg, log, err := setup()
	if err != nil {
		return 1, err
	}
	svc, err := engine.Start(ctx, cfg, log)
	if err != nil {
		return 1, err
	}
	defer svc.Close()
	res, err := svc.Manager.Exec(ctx, sandbox.Scope{AppID: *app, UserID: *user, ChatID: *chat}, sandbox.ExecRequest{
		Command: fs.Arg(0), Timeout: *timeout,
		// An operator at the engine's shell, acting on whoever's chat.
		Actor: sandbox.Actor{Kind: sandbox.ActorAdmin},
		OnOutput: func(s sandbox.Stream, p []byte) {
			if s == sandbox.Stdout {
				stdout.Write(p)
			} else {
				stderr.Write(p)
			}
		},
	})
	if err != nil {
		return 1, err
	}
	if res.Truncated {
		fmt.Fprintln(stderr, "[the stored result was truncated; the output above is complete]")
	}
	if res.TimedOut {
		fmt.Fprintf(stderr, "[timed out after %s]\n", *timeout)
	}
	return res.ExitCode, nil
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lifecycle gives the commands an app runs around its sandboxes' lives
// (P4): startup commands once when a sandbox is created, shutdown
// commands before one is stopped or deleted. The manager asks for them
// each time, so an edit to the app applies to the next sandbox.
type Lifecycle interface {
	StartupCommands(ctx context.Context, scope Scope) ([]string, error)
	ShutdownCommands(ctx context.Context, scope Scope) ([]string, error)
}

// Hook names the lifecycle step a call is made for (Call.Hook).
const (
	HookStartup  = "startup"
	HookShutdown = "shutdown"
)

// Bounds of the lifecycle commands.
const (
	// HookCommandTimeout bounds each startup or shutdown command.
	HookCommandTimeout = 2 * time.Minute
	// DefaultShutdownTimeout bounds all of a sandbox's shutdown commands
	// together (Config.ShutdownTimeout): a stop or delete never waits
	// longer for them.
	DefaultShutdownTimeout = 30 * time.Second
)

// startup runs the app's startup commands in a sandbox this process just
// created, through the whole chain (policy, audit, redaction) but without
// ensuring the sandbox again. It returns a notice for the user when one
// failed; the sandbox stays usable either way.
func (m *Manager) startup(ctx context.Context, scope Scope, id string) string {
	if m.cfg.Lifecycle == nil {
		return ""
	}
	if _, created := m.created.LoadAndDelete(id); !created {
		return ""
	}
	cmds, err := m.cfg.Lifecycle.StartupCommands(ctx, scope)
	if err != nil {
		m.log.Warn("sandbox startup commands not read", "sandboxId", id, "err", err)
		return fmt.Sprintf("[the app's startup commands could not be read, so none ran: %v]\n", err)
	}
	var notice strings.Builder
	for _, cmd := range cmds {
		res, err := m.hook(ctx, scope, id, HookStartup, cmd, HookCommandTimeout)
		if problem := hookProblem(res, err); problem != "" {
			m.log.Warn("sandbox startup command failed", "sandboxId", id, "problem", problem)
			fmt.Fprintf(&notice, "[startup command %q %s; the sandbox is usable]\n", clip(cmd, 200), problem)
		}
	}
	return notice.String()
}

// shutdown runs the app's shutdown commands in a sandbox about to be
// stopped or deleted, within Config.ShutdownTimeout. Failures are logged
// and never block the stop: a sandbox that is not running, has no record
// or whose app has none runs nothing.
func (m *Manager) shutdown(ctx context.Context, id string) {
	if m.cfg.Lifecycle == nil {
		return
	}
	inst, err := m.cfg.Store.Get(ctx, m.cfg.Provider.Name(), id)
	if err != nil || inst.Status == StatusStopped {
		return
	}
	scope := Scope{AppID: inst.AppID, UserID: inst.UserID, ChatID: inst.ChatID}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.ShutdownTimeout)
	defer cancel()
	cmds, err := m.cfg.Lifecycle.ShutdownCommands(ctx, scope)
	if err != nil {
		m.log.Warn("sandbox shutdown commands not read; stopping without them", "sandboxId", id, "err", err)
		return
	}
	for _, cmd := range cmds {
		res, err := m.hook(ctx, scope, id, HookShutdown, cmd, HookCommandTimeout)
		if errors.Is(err, ErrNotRunning) || errors.Is(err, ErrNotFound) {
			return
		}
		if problem := hookProblem(res, err); problem != "" {
			m.log.Warn("sandbox shutdown command failed; stopping anyway", "sandboxId", id, "command", clip(cmd, 200), "problem", problem)
		}
		if ctx.Err() != nil {
			m.log.Warn("sandbox shutdown commands out of time; stopping anyway", "sandboxId", id, "timeout", m.cfg.ShutdownTimeout)
			return
		}
	}
}

// hook runs one lifecycle command through the chain, as the service.
func (m *Manager) hook(ctx context.Context, scope Scope, id, hook, cmd string, timeout time.Duration) (ExecResult, error) {
	return m.exec(ctx, &Call{Scope: scope, SandboxID: id, Hook: hook,
		Request: ExecRequest{Command: cmd, Timeout: timeout, Actor: Actor{Kind: ActorService}}})
}

// withNotice puts a startup notice before a command's stderr, so the user
// and the model learn that the app's startup failed.
func withNotice(notice string, res ExecResult, err error) ExecResult {
	if notice != "" && err == nil {
		res.Stderr = notice + res.Stderr
	}
	return res
}

// hookProblem says what went wrong with a lifecycle command ("" when it
// succeeded).
func hookProblem(res ExecResult, err error) string {
	switch {
	case err != nil:
		return "could not run: " + err.Error()
	case res.TimedOut:
		return "timed out"
	case res.ExitCode != 0:
		msg := fmt.Sprintf("failed with exit code %d", res.ExitCode)
		if s := strings.TrimSpace(res.Stderr); s != "" {
			msg += ": " + clip(s, 300)
		}
		return msg
	}
	return ""
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

package exectool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/sandbox"
)

// Executor runs a tool's program in one place: HostExecutor on the
// engine's machine, SandboxExecutor in a chat's sandbox.
type Executor interface {
	// Execute runs inv.Argv with inv.Input on its standard input. A
	// program that fails, times out or cannot be found is a Result; the
	// error is for calls that could not be made at all (the sandbox
	// refused or is unavailable, ctx ended). A Result with IsError and
	// Output set says why the program did not run.
	Execute(ctx context.Context, inv Invocation) (Result, error)
}

// Invocation is one run of a program.
type Invocation struct {
	// Argv is the program and its arguments, fixed by the declaration.
	Argv []string
	// Input is the program's standard input, in full.
	Input []byte
	// Timeout bounds the run (clamped to 1s–300s); at its end the
	// program and everything it started are killed.
	Timeout time.Duration
	// Scope, Actor and Approved are for SandboxExecutor (see Request).
	Scope    sandbox.Scope
	Actor    sandbox.Actor
	Approved string
	// OnOutput receives output live (see Request.OnOutput).
	OnOutput func(s sandbox.Stream, p []byte)
}

// MaxSandboxInput bounds the arguments of a sandbox tool. A sandbox
// command has no standard input, so they travel on its command line,
// which Linux limits to 128 KiB for one argument.
const MaxSandboxInput = 64 << 10

// SandboxExecutor runs programs in chats' sandboxes through Sandbox, so
// that the manager's lazy start, policy, audit and redaction apply.
type SandboxExecutor struct {
	Sandbox Sandbox
}

// Execute runs the program as the command SandboxCommand builds.
func (e SandboxExecutor) Execute(ctx context.Context, inv Invocation) (Result, error) {
	if len(inv.Argv) == 0 {
		return Result{}, errors.New("run a program in the sandbox: no program given")
	}
	if e.Sandbox == nil {
		err := fmt.Errorf("run %s: no sandbox is configured on this engine: %w", inv.Argv[0], sandbox.ErrUnavailable)
		return notRun(-1, sandbox.ErrUnavailable.Error(), 0), err
	}
	if problem := inputTooLarge(inv.Input); problem != "" {
		return notRun(-1, problem, 0), nil
	}
	cmd, err := SandboxCommand(inv.Argv, inv.Input)
	if err != nil {
		return Result{}, fmt.Errorf("run %s in the sandbox: %w", inv.Argv[0], err)
	}
	actor := inv.Actor
	if actor.Kind == sandbox.ActorUnknown {
		actor.Kind = sandbox.ActorAgent
	}
	res, err := e.Sandbox.Exec(ctx, inv.Scope, sandbox.ExecRequest{
		Command: cmd, Timeout: inv.Timeout, OnOutput: inv.OnOutput, Actor: actor, Approved: inv.Approved,
	})
	out := fromExec(res)
	if err != nil {
		// The model reads what the manager put in the result (N5), or
		// the refusal itself.
		out.IsError = true
		out.Output = res.Stderr
		if out.Output == "" {
			out.Output = err.Error()
		}
		return out, fmt.Errorf("run %s in the sandbox: %w", inv.Argv[0], err)
	}
	return out, nil
}

// SandboxCommand is the shell command that runs argv with input on its
// standard input: printf writes input, quoted as one word, into a pipe
// to the program, each of whose words is quoted. Input must be printable
// (see Tool's canonical JSON); the quoting is POSIX so that any sandbox
// shell, busybox's included, reads the words as they are.
func SandboxCommand(argv []string, input []byte) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("no program given")
	}
	data, err := syntax.Quote(string(input), syntax.LangPOSIX)
	if err != nil {
		return "", fmt.Errorf("the input cannot be quoted for a shell: %w", err)
	}
	words := make([]string, 0, len(argv)+4)
	words = append(words, "printf", "'%s'", data, "|")
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("exec[%d] cannot be quoted for a shell: %w", i, err)
		}
		words = append(words, q)
	}
	return strings.Join(words, " "), nil
}

func inputTooLarge(input []byte) string {
	if len(input) <= MaxSandboxInput {
		return ""
	}
	return fmt.Sprintf("the arguments are %d bytes; a tool that runs in the sandbox takes at most %d: write large data to a file in %s and pass its path", len(input), MaxSandboxInput, sandbox.WorkspaceDir)
}

// Package exectool runs exec tools: tools an operator declares in JSON
// files (schemas/exectool.schema.json), each wrapping a program with a
// fixed argv. The model's arguments, checked against the tool's
// input_schema, are the program's standard input as JSON; its standard
// output is the result. A tool runs on the engine's host or in the chat's
// sandbox, through one Executor interface.
//
// It must never let anything of the model's become a program's argument,
// its name or shell syntax (in the sandbox, the arguments travel as one
// quoted word of data for printf), and must never give a host program the
// engine's environment, which holds its secrets. What a
// sandbox tool runs is whatever the chat's sandbox holds: the model
// controls that sandbox, so a sandbox tool is only as trustworthy as the
// sandbox is.
package exectool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flowbox/flowbox/sandbox"
)

// RunIn says where a tool's program runs.
type RunIn string

const (
	// OnHost runs the program on the engine's machine with the engine's
	// privileges, in a fresh empty directory and a minimal environment.
	OnHost RunIn = "host"
	// InSandbox runs it in the chat's sandbox, as a command of the
	// sandbox manager: its policy, audit and redaction apply.
	InSandbox RunIn = "sandbox"
)

// DefaultTimeout is a tool's timeout when its declaration gives none.
const DefaultTimeout = 30 * time.Second

// Tool is one declared exec tool. It is immutable and safe for
// concurrent use.
type Tool struct {
	decl    declaration
	schema  *jsonschema.Schema
	input   json.RawMessage // the declared input_schema, or the default
	argv    []string        // exec, with a host program's relative path resolved
	timeout time.Duration
	source  string // the file and index it was declared at, for errors
	// defaulted: the declaration named no runIn (the seed's format), so
	// the tool runs in the sandbox.
	defaulted bool
}

// Name is the tool's name as the model calls it.
func (t *Tool) Name() string { return t.decl.Name }

// Description tells the model what the tool does.
func (t *Tool) Description() string { return t.decl.Description }

// InputSchema is the JSON Schema of the tool's arguments, for the
// model's tool definition.
func (t *Tool) InputSchema() json.RawMessage { return bytes.Clone(t.input) }

// RunIn says where the tool's program runs.
func (t *Tool) RunIn() RunIn { return t.decl.RunIn }

// Defaulted reports whether the declaration named no runIn, so that the
// tool runs in the chat's sandbox by default.
func (t *Tool) Defaulted() bool { return t.defaulted }

// Timeout is how long the program may run.
func (t *Tool) Timeout() time.Duration { return t.timeout }

// ReadOnly: the tool changes nothing, as its declaration says.
func (t *Tool) ReadOnly() bool { return t.decl.ReadOnly }

// Destructive: the tool may delete or overwrite what it cannot restore.
func (t *Tool) Destructive() bool { return t.decl.Destructive }

// ConcurrencySafe: several calls may run at once.
func (t *Tool) ConcurrencySafe() bool { return t.decl.ConcurrencySafe }

// PermissionClass is the declared class of permission a call needs; ""
// when the declaration gives none.
func (t *Tool) PermissionClass() string { return t.decl.PermissionClass }

// AuditOperation names the tool's calls in audit records; the tool's
// name unless the declaration says otherwise. Host tools are audited by
// the caller; sandbox tools are audited by the sandbox's chain as well.
func (t *Tool) AuditOperation() string {
	if t.decl.AuditOperation != "" {
		return t.decl.AuditOperation
	}
	return t.decl.Name
}

// Source is where the tool was declared ("tools.json[2]").
func (t *Tool) Source() string { return t.source }

// Argv is the program and its fixed arguments, as declared.
func (t *Tool) Argv() []string { return slices.Clone(t.argv) }

// Sandbox runs commands in chats' sandboxes; *sandbox.Manager is one.
type Sandbox interface {
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
}

// Request is one call of a tool.
type Request struct {
	// Arguments are the model's arguments, a JSON object; "" counts as {}.
	Arguments string
	// Scope is the chat whose sandbox a sandbox tool runs in.
	Scope sandbox.Scope
	// Actor is who calls; a sandbox tool's command carries it through the
	// sandbox's chain (Kind defaults to sandbox.ActorAgent).
	Actor sandbox.Actor
	// OnOutput, when set, receives the program's output as it comes, from
	// one goroutine at a time and never after Run returned.
	OnOutput func(s sandbox.Stream, p []byte)
	// Approved is the command line a person approved, passed on to the
	// sandbox's policy (sandbox.ExecRequest.Approved); see SandboxCommand.
	Approved string
	// Sandbox runs sandbox tools; nil makes them fail with
	// sandbox.ErrUnavailable. Host tools ignore it.
	Sandbox Sandbox
}

// Result is what a call produced. Output is what the model reads.
type Result struct {
	// Output is the program's stdout, or its stderr when stdout is
	// empty; for a call that did not run, why.
	Output string `json:"output"`
	// Stdout and Stderr are capped like sandbox commands' (head and tail
	// kept, the cut marked; Truncated says so).
	Stdout    string `json:"stdout,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	ExitCode  int    `json:"exitCode"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// IsError: the program failed (exit code not 0, timed out) or did not
	// run (invalid arguments, program missing, sandbox refused).
	IsError  bool          `json:"isError,omitempty"`
	Duration time.Duration `json:"-"`
}

// Run checks the arguments against the tool's input_schema and runs the
// program with them on its standard input. Arguments that do not match
// are a Result with IsError and the problems, field by field, and the
// program does not run.
//
// A program that fails or times out is a Result, not an error. The error
// is for calls the executor could not make: for sandbox tools, the
// sandbox manager's errors as they are (a *sandbox.RefusedError, a
// *policy.AskError waiting for a person's approval, sandbox.ErrUnavailable,
// a *sandbox.LimitError), so that the caller treats them as it treats
// sandbox_shell's; and the end of ctx. The Result then still says what
// the model may read.
func (t *Tool) Run(ctx context.Context, req Request) (Result, error) {
	input, problem := t.stdin(req.Arguments)
	if problem != "" {
		return notRun(-1, problem, 0), nil
	}
	var ex Executor = HostExecutor{}
	if t.decl.RunIn == InSandbox {
		ex = SandboxExecutor{Sandbox: req.Sandbox}
	}
	res, err := ex.Execute(ctx, Invocation{
		Argv: t.argv, Input: input, Timeout: t.timeout,
		Scope: req.Scope, Actor: req.Actor, OnOutput: req.OnOutput, Approved: req.Approved,
	})
	settle(&res, t.timeout)
	return res, err
}

// SandboxCommand is the command line a sandbox tool runs for arguments:
// what the sandbox's policy judges and a person approves (pass it back
// as Request.Approved). problem says why the arguments cannot be used.
func (t *Tool) SandboxCommand(arguments string) (command, problem string) {
	if t.decl.RunIn != InSandbox {
		return "", fmt.Sprintf("%s runs on the host, not in a sandbox", t.decl.Name)
	}
	input, problem := t.stdin(arguments)
	if problem != "" {
		return "", problem
	}
	if problem := inputTooLarge(input); problem != "" {
		return "", problem
	}
	cmd, err := SandboxCommand(t.argv, input)
	if err != nil {
		return "", err.Error()
	}
	return cmd, ""
}

// stdin is what the program reads for arguments: the arguments as
// compact JSON, with every character that is not printable, and the
// single quote, written as a \u escape (the same JSON to any parser, and
// one word a shell quotes without escapes). problem says, for the model,
// why the arguments cannot be used: not JSON, or not what input_schema
// asks, field by field.
func (t *Tool) stdin(arguments string) (input []byte, problem string) {
	args := strings.TrimSpace(arguments)
	if args == "" {
		args = "{}"
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return nil, fmt.Sprintf("the arguments of %s are not JSON (%v); send a JSON object that matches its input schema", t.decl.Name, err)
	}
	if err := t.schema.Validate(doc); err != nil {
		return nil, fmt.Sprintf("the arguments of %s do not match its input schema, nothing was run: %s", t.decl.Name, problems(err, "", argumentWords))
	}
	input, err = canonical([]byte(args))
	if err != nil {
		return nil, fmt.Sprintf("the arguments of %s are not JSON (%v); send a JSON object that matches its input schema", t.decl.Name, err)
	}
	return input, ""
}

// settle fills Output and IsError from what the program did, unless the
// executor has already said why it did not run.
func settle(r *Result, timeout time.Duration) {
	if r.IsError && r.Output != "" {
		return
	}
	r.IsError = r.IsError || r.ExitCode != 0 || r.TimedOut
	r.Output = r.Stdout
	if r.Output == "" {
		r.Output = r.Stderr
	}
	switch {
	case r.TimedOut && r.Stdout != "":
		// Stderr says it timed out, but the model reads stdout.
		if !strings.HasSuffix(r.Output, "\n") {
			r.Output += "\n"
		}
		r.Output += fmt.Sprintf("[the program timed out after %s and was killed with every process it started]\n", timeout)
	case r.Output == "" && r.IsError:
		r.Output = fmt.Sprintf("the program failed with exit code %d and printed nothing", r.ExitCode)
	}
}

// notRun is the result of a call whose program did not run, or could
// not be found.
func notRun(exitCode int, why string, d time.Duration) Result {
	return Result{Output: why, Stderr: why, ExitCode: exitCode, IsError: true, Duration: d}
}

func fromExec(r sandbox.ExecResult) Result {
	return Result{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, TimedOut: r.TimedOut, Truncated: r.Truncated, Duration: r.Duration}
}

// canonical compacts JSON and writes the single quote, U+FFFD, invalid
// UTF-8 and every rune that is not printable as \u escapes. JSON allows
// such runes raw only inside strings, where the escape means the same.
func canonical(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	src := b.Bytes()
	out := make([]byte, 0, len(src))
	for len(src) > 0 {
		r, size := utf8.DecodeRune(src)
		switch {
		case r == '\'' || r == utf8.RuneError || !unicode.IsPrint(r):
			// An invalid byte decodes as U+FFFD, as JSON decoders read it.
			if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, src[:size]...)
		}
		src = src[size:]
	}
	return out, nil
}

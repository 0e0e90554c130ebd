package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/flowbox/flowbox/sandbox"
)

// Sandboxes is the part of sandbox.Manager the shell and file tools use:
// every call goes through its chain (policy, redaction, audit, caps).
type Sandboxes interface {
	Ensure(ctx context.Context, scope sandbox.Scope) (string, error)
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	Files(ctx context.Context, scope sandbox.Scope, actor sandbox.Actor) (sandbox.Files, error)
}

// MaxFileRead bounds file:read; larger files are downloaded.
const MaxFileRead = 1 << 20

// The tools' names as models call them (N2, K4): FastGPT's.
const (
	ShellModelName     = "sandbox_shell"
	ListSkillsName     = "list_skills"
	LoadSkillName      = "load_skill"
	ReadSkillFileName  = "read_skill_resource"
	RunSkillScriptName = "execute_skill_script"
)

// Shell is the "shell" backend: shell:exec (sandbox_shell to a model)
// runs a command in the session's persistent shell. A session's sandbox
// is its per-session resource: Initialize starts it, Cleanup deletes it
// through Delete (the deletion path, which the workers carry out).
type Shell struct {
	// Sandboxes runs the commands; nil: every call answers that no
	// sandbox is configured (sandbox.ErrUnavailable).
	Sandboxes Sandboxes
	// Delete deletes a session's sandbox; nil leaves it to its owner.
	Delete func(ctx context.Context, scope sandbox.Scope) error
	// Previews returns the path of the chat's preview link to a port of
	// its sandbox (L2); nil: the engine serves none.
	Previews func(ctx context.Context, scope sandbox.Scope, port int) (string, error)
}

func (Shell) Prefix() string { return "shell" }

// ShellTool is shell:exec without its Run: what callers are told of it.
var ShellTool = Tool{Name: "shell:exec", ModelName: ShellModelName, ReadParams: readShellParams, Fail: commandFailed,
	Description: "Run a bash command in your own Linux sandbox: files, code, packages. The working directory and " +
		"exported variables persist between calls. Output is capped; a command that exits non-zero or times out is a failed result.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The shell command to run"},` +
		`"timeout":{"type":"number","minimum":1,"maximum":300,"description":"Timeout in seconds (1-300, default 30)"}},` +
		`"required":["command"]}`),
	Example: shellExample}

const shellExample = `{"command": "ls -la", "timeout": 30}`

func (s Shell) Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	t := ShellTool
	t.Run = s.exec
	tools := []Tool{t}
	if _, ok := s.Sandboxes.(ProcessSandboxes); ok {
		p := ProcessTool
		p.Run = s.process
		tools = append(tools, p)
	}
	return tools, nil
}

func (s Shell) exec(ctx context.Context, call Call) (Result, error) {
	args, problem := ParseShellArgs(string(call.Params))
	if problem != "" {
		return Result{}, &ParamsError{Tool: ShellTool.Name, Problem: problem, Example: ShellTool.Example}
	}
	return RunCommand(ctx, s.Sandboxes, call, args)
}

func readShellParams(params json.RawMessage) error {
	if _, problem := ParseShellArgs(string(params)); problem != "" {
		return &ParamsError{Tool: "shell:exec", Problem: problem, Example: shellExample}
	}
	return nil
}

// ShellResult is what a command gave: the result of shell:exec and
// skill:run, as the model reads it (N4) and the service API answers it.
type ShellResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	// OOMKilled and PidsLimited say the command met its sandbox's memory
	// or process limit (sandbox.ExecResult): the model learns why it died.
	OOMKilled   bool `json:"oomKilled,omitempty"`
	PidsLimited bool `json:"pidsLimited,omitempty"`
	// TimeoutClamped says the call asked for a timeout outside 1–300 s
	// and got TimeoutSeconds instead (S6): the model learns why a command
	// stopped sooner, or ran longer, than it asked.
	TimeoutClamped bool `json:"timeoutClamped,omitempty"`
	TimeoutSeconds int  `json:"timeoutSeconds,omitempty"`
	// EditedCommand is the command a person ran instead of the caller's
	// (P10): the output is its output.
	EditedCommand string `json:"editedCommand,omitempty"`
}

// commandFailed is a command tool's result for an error that stopped
// the command: exit code -1 and the reason (N5).
func commandFailed(err error) Result {
	return Result{Output: ShellResult{ExitCode: -1, Stderr: err.Error()}, Text: err.Error(), IsError: true, Status: StatusFailed}
}

// ShellArgs are a command's arguments as it will run.
type ShellArgs struct {
	Command string
	// Timeout is zero when the call gave none: sandbox.DefaultTimeout.
	Timeout time.Duration
	// Clamped says the call's timeout was outside 1–300 s and Timeout is
	// the nearer bound (S6).
	Clamped bool
}

// ParseShellArgs reads shell:exec's params leniently (models send broken
// JSON) and says plainly what is wrong when it cannot. A timeout out of
// range is clamped rather than refused, so the command still runs.
// "timeoutSeconds", the service API's older name, is read when
// "timeout" is absent.
func ParseShellArgs(args string) (ShellArgs, string) {
	c := gjson.Get(args, "command")
	switch {
	case !c.Exists():
		return ShellArgs{}, fmt.Sprintf("%s needs a \"command\" string, and the arguments %s have none", ShellModelName, clip(args))
	case c.Type != gjson.String:
		return ShellArgs{}, fmt.Sprintf("\"command\" must be a string, got %s", c.Raw)
	case strings.TrimSpace(c.String()) == "":
		return ShellArgs{}, "\"command\" is empty"
	}
	out := ShellArgs{Command: c.String()}
	timeout, clamped, problem := timeoutParam(args)
	if problem != "" {
		return ShellArgs{}, problem
	}
	out.Timeout, out.Clamped = timeout, clamped
	return out, ""
}

// timeoutParam reads a call's "timeout" (or "timeoutSeconds") in
// seconds: zero when it gives none, clamped to 1–300 s.
func timeoutParam(args string) (timeout time.Duration, clamped bool, problem string) {
	name := "timeout"
	t := gjson.Get(args, name)
	if !t.Exists() {
		name = "timeoutSeconds"
		t = gjson.Get(args, name)
	}
	if !t.Exists() || t.Type == gjson.Null {
		return 0, false, ""
	}
	if t.Type != gjson.Number {
		return 0, false, fmt.Sprintf("%q must be a number of seconds from 1 to 300, not %s", name, t.Raw)
	}
	secs := t.Float() // ±Inf for huge exponents, which the bounds catch
	switch {
	case secs < sandbox.MinTimeout.Seconds():
		return sandbox.MinTimeout, true, ""
	case secs > sandbox.MaxTimeout.Seconds():
		return sandbox.MaxTimeout, true, ""
	}
	return time.Duration(secs * float64(time.Second)), false, ""
}

func clip(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// RunCommand runs a command line in the call's sandbox, as shell:exec
// and skill:run do: a person's edit (Call.Edited) instead, approved; a
// command approved for the whole chat without asking again. The errors
// are the sandbox layer's: a refusal (*sandbox.RefusedError), a question
// for a person (*policy.AskError), the sandbox unavailable
// (sandbox.ErrUnavailable) or a cap reached (*sandbox.LimitError).
func RunCommand(ctx context.Context, sb Sandboxes, call Call, args ShellArgs) (Result, error) {
	if sb == nil {
		return Result{}, fmt.Errorf("no sandbox is configured on this engine: %w", sandbox.ErrUnavailable)
	}
	cmd, approved := call.command(ctx, args.Command)
	timeout := sandbox.ClampTimeout(args.Timeout)
	res, err := sb.Exec(ctx, call.Scope, sandbox.ExecRequest{Command: cmd, Timeout: timeout, OnOutput: call.OnOutput,
		Actor: call.Actor, Approved: approved})
	if err != nil {
		return Result{}, err
	}
	out := ShellResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, DurationMs: res.Duration.Milliseconds(),
		TimedOut: res.TimedOut, Truncated: res.Truncated, OOMKilled: res.OOMKilled, PidsLimited: res.PidsLimited, EditedCommand: call.Edited}
	if args.Clamped {
		out.TimeoutClamped, out.TimeoutSeconds = true, int(timeout/time.Second)
	}
	r := Result{Output: out, Text: res.Stdout + res.Stderr, Status: StatusSuccess}
	switch {
	case res.TimedOut:
		r.IsError, r.Status = true, StatusTimedOut
		r.Text += fmt.Sprintf("\n[timed out after %s]", timeout)
	case res.ExitCode != 0:
		r.IsError, r.Status = true, StatusFailed
		r.Text += fmt.Sprintf("\n[exit code %d]", res.ExitCode)
	}
	return r, nil
}

// Initialize creates and starts the session's sandbox ahead of its first
// call.
func (s Shell) Initialize(ctx context.Context, scope sandbox.Scope) error {
	if s.Sandboxes == nil {
		return fmt.Errorf("no sandbox is configured on this engine: %w", sandbox.ErrUnavailable)
	}
	_, err := s.Sandboxes.Ensure(ctx, scope)
	return err
}

// Cleanup deletes the session's sandbox.
func (s Shell) Cleanup(ctx context.Context, scope sandbox.Scope) error {
	if s.Delete == nil {
		return nil
	}
	return s.Delete(ctx, scope)
}

// Files is the "file" backend: read, write and list the session's
// workspace, through the manager's file chain.
type Files struct{ Sandboxes Sandboxes }

func (Files) Prefix() string { return "file" }

var (
	fileRead = Tool{Name: "file:read", ReadOnly: true, ConcurrencySafe: true,
		Description: "Read a file of the sandbox's workspace (at most 1 MiB; text as UTF-8, anything else as base64).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","minLength":1,"description":"The file's path, in /workspace or relative to it"}},` +
			`"required":["path"],"additionalProperties":false}`)}
	fileWrite = Tool{Name: "file:write",
		Description: "Write a file of the sandbox's workspace, replacing it atomically and creating its parent directories.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","minLength":1,"description":"The file's path, in /workspace or relative to it"},` +
			`"content":{"type":"string","description":"The file's content"},` +
			`"encoding":{"type":"string","enum":["utf-8","base64"],"description":"How content is written (default utf-8)"}},` +
			`"required":["path","content"],"additionalProperties":false}`)}
	fileList = Tool{Name: "file:list", ReadOnly: true, ConcurrencySafe: true,
		Description: "List a directory of the sandbox's workspace.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The directory, in /workspace or relative to it (default /workspace)"}},` +
			`"additionalProperties":false}`)}
)

func (f Files) Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	read, write, list := fileRead, fileWrite, fileList
	read.Run, write.Run, list.Run = f.read, f.write, f.list
	return []Tool{read, write, list}, nil
}

type fileParams struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

func (f Files) open(ctx context.Context, call Call) (sandbox.Files, fileParams, error) {
	var p fileParams
	if err := json.Unmarshal(call.Params, &p); err != nil {
		return nil, p, &ParamsError{Tool: "file", Problem: err.Error()}
	}
	if call.Actor.Kind == "" {
		call.Actor.Kind = sandbox.ActorFiles
	}
	fs, err := f.Sandboxes.Files(ctx, call.Scope, call.Actor)
	return fs, p, err
}

// FileOutput is file:write's structured result.
type FileOutput struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// ReadOutput is file:read's structured result.
type ReadOutput struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

func (f Files) read(ctx context.Context, call Call) (Result, error) {
	fs, p, err := f.open(ctx, call)
	if err != nil {
		return Result{}, err
	}
	data, err := fs.ReadFile(ctx, p.Path, MaxFileRead)
	if err != nil {
		return fileFailure(err)
	}
	out := ReadOutput{Path: p.Path, Size: int64(len(data)), Content: string(data), Encoding: "utf-8"}
	if !utf8.Valid(data) {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return Result{Output: out, Text: out.Content}, nil
}

func (f Files) write(ctx context.Context, call Call) (Result, error) {
	fs, p, err := f.open(ctx, call)
	if err != nil {
		return Result{}, err
	}
	data := []byte(p.Content)
	if p.Encoding == "base64" {
		if data, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return Result{}, &ParamsError{Tool: "file:write", Problem: "content is not base64: " + err.Error()}
		}
	}
	if err := fs.WriteFile(ctx, p.Path, data); err != nil {
		return fileFailure(err)
	}
	return Result{Output: FileOutput{Path: p.Path, Size: int64(len(data))}, Text: fmt.Sprintf("wrote %d bytes to %s", len(data), p.Path)}, nil
}

// ListOutput is file:list's structured result.
type ListOutput struct {
	Path    string             `json:"path"`
	Entries []sandbox.FileInfo `json:"entries"`
}

func (f Files) list(ctx context.Context, call Call) (Result, error) {
	fs, p, err := f.open(ctx, call)
	if err != nil {
		return Result{}, err
	}
	if p.Path == "" {
		p.Path = sandbox.WorkspaceDir
	}
	entries, err := fs.List(ctx, p.Path)
	if err != nil {
		return fileFailure(err)
	}
	if entries == nil {
		entries = []sandbox.FileInfo{}
	}
	text, _ := json.Marshal(entries)
	return Result{Output: ListOutput{Path: p.Path, Entries: entries}, Text: string(text)}, nil
}

// fileFailure makes what the caller asked wrongly (no such file, a path
// outside the workspace, a file too large, a read-only mount) a failed
// result; the sandbox's own failures stay errors.
func fileFailure(err error) (Result, error) {
	for _, e := range []error{sandbox.ErrNotFound, sandbox.ErrInvalidPath, sandbox.ErrTooLarge, sandbox.ErrReadOnly} {
		if errors.Is(err, e) {
			return failure(err.Error()), nil
		}
	}
	return Result{}, err
}

// command is the command line a call runs and what a person approved of
// it: their edit (Call.Edited) instead of the model's, approved; a
// command approved for the whole chat without asking again.
func (call Call) command(ctx context.Context, asked string) (cmd, approved string) {
	if call.Edited != "" {
		return call.Edited, call.Edited
	}
	cmd, approved = asked, call.Approved
	if approved == "" && call.ApprovedInChat != nil && call.ApprovedInChat(ctx, cmd) {
		approved = cmd
	}
	return cmd, approved
}

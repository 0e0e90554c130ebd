package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/flowbox/flowbox/sandbox"
)

// Sandboxes is the part of sandbox.Manager the shell and file tools use:
// every call goes through its chain (policy, redaction, audit, caps).
type Sandboxes interface {
	Ensure(ctx context.Context, scope sandbox.Scope) (string, error)
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	Files(ctx context.Context, scope sandbox.Scope, actor sandbox.Actor) (sandbox.Files, error)
}

// DefaultTimeout is a command's timeout when the call gives none.
const DefaultTimeout = 60 * time.Second

// MaxFileRead bounds file:read; larger files are downloaded.
const MaxFileRead = 1 << 20

// Shell is the "shell" backend: shell:exec runs a command in the
// session's persistent shell. A session's sandbox is its per-session
// resource: Initialize starts it, Cleanup deletes it through Delete (the
// deletion path, which the workers carry out).
type Shell struct {
	Sandboxes Sandboxes
	// Delete deletes a session's sandbox; nil leaves it to its owner.
	Delete func(ctx context.Context, scope sandbox.Scope) error
}

func (Shell) Prefix() string { return "shell" }

var shellExec = Tool{Name: "shell:exec", Description: "Run a bash command in the sandbox's persistent shell " +
	"(the working directory and exported variables carry over to the next command). Output is capped; a command " +
	"that exits non-zero or times out is a failed result.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","minLength":1,"description":"The bash command line"},` +
		`"timeoutSeconds":{"type":"integer","minimum":1,"maximum":300,"description":"Timeout in seconds (default 60)"}},` +
		`"required":["command"],"additionalProperties":false}`)}

func (s Shell) Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	t := shellExec
	t.Run = s.exec
	return []Tool{t}, nil
}

func (s Shell) exec(ctx context.Context, call Call) (Result, error) {
	var p struct {
		Command        string `json:"command"`
		TimeoutSeconds int    `json:"timeoutSeconds"`
	}
	if err := json.Unmarshal(call.Params, &p); err != nil {
		return Result{}, &ParamsError{Tool: "shell:exec", Problem: err.Error()}
	}
	return RunCommand(ctx, s.Sandboxes, call, p.Command, time.Duration(p.TimeoutSeconds)*time.Second)
}

// ShellOutput is shell:exec's structured result.
type ShellOutput struct {
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	ExitCode    int    `json:"exitCode"`
	TimedOut    bool   `json:"timedOut,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	OOMKilled   bool   `json:"oomKilled,omitempty"`
	PidsLimited bool   `json:"pidsLimited,omitempty"`
	DurationMs  int64  `json:"durationMs"`
}

// RunCommand runs a command line in the call's sandbox, as shell:exec
// and skill:run do. A zero timeout is DefaultTimeout.
func RunCommand(ctx context.Context, sb Sandboxes, call Call, command string, timeout time.Duration) (Result, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	res, err := sb.Exec(ctx, call.Scope, sandbox.ExecRequest{Command: command, Timeout: timeout, OnOutput: call.OnOutput,
		Actor: call.Actor, Approved: call.Approved})
	if err != nil {
		return Result{}, err
	}
	out := ShellOutput{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, TimedOut: res.TimedOut,
		Truncated: res.Truncated, OOMKilled: res.OOMKilled, PidsLimited: res.PidsLimited, DurationMs: res.Duration.Milliseconds()}
	r := Result{Output: out, Text: res.Stdout, Status: "success"}
	if res.Stderr != "" {
		r.Text += res.Stderr
	}
	switch {
	case res.TimedOut:
		r.IsError, r.Status = true, "timed out"
		r.Text += fmt.Sprintf("\n[timed out after %s]", timeout)
	case res.ExitCode != 0:
		r.IsError, r.Status = true, "failed"
		r.Text += fmt.Sprintf("\n[exit code %d]", res.ExitCode)
	}
	return r, nil
}

// Initialize creates and starts the session's sandbox ahead of its first
// call.
func (s Shell) Initialize(ctx context.Context, scope sandbox.Scope) error {
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
			return Result{Text: err.Error(), IsError: true, Status: "failed"}, nil
		}
	}
	return Result{}, err
}

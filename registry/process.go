package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/flowbox/flowbox/sandbox"
)

// ProcessModelName is shell:process as models call it.
const ProcessModelName = "sandbox_process"

// ProcessSandboxes is the part of sandbox.Manager the process tool uses
// besides Sandboxes' Exec (which starts a process, through the chain).
type ProcessSandboxes interface {
	ListProcesses(ctx context.Context, scope sandbox.Scope) ([]sandbox.Process, error)
	ReadProcess(ctx context.Context, scope sandbox.Scope, pid string, offset int64, max int) (sandbox.ProcessOutput, error)
	WriteProcess(ctx context.Context, scope sandbox.Scope, pid string, data []byte, end bool) error
	StopProcess(ctx context.Context, scope sandbox.Scope, pid string) (sandbox.Process, error)
}

// maxProcessText bounds the output one read gives a model; it reads on
// from the offset the answer names.
const maxProcessText = 16 << 10

// ProcessTool is shell:process without its Run.
var ProcessTool = Tool{Name: "shell:process", ModelName: ProcessModelName, Fail: commandFailed,
	Description: "Background processes in your sandbox: programs that keep running after the call that started them " +
		"(a web server, a watcher), where sandbox_shell ends everything a command started when it returns. " +
		`action "start" runs "command" in the background (in your current directory, with your exported variables) and returns its id; ` +
		`"list" lists them; "read" returns an id's output (standard output and error) from "offset" on, and the offset to read from next; ` +
		`"write" sends "input" to its standard input ("end": true closes it); "stop" kills it and what it started; ` +
		`"link" returns the link at which the user opens what listens on "port" (HTTP or WebSocket): give it to them as it is. ` +
		"They end when the sandbox stops.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"action":{"type":"string","enum":["start","list","read","write","stop","link"]},` +
		`"command":{"type":"string","description":"start: the shell command to run in the background"},` +
		`"id":{"type":"string","description":"read, write, stop: the process's id, as start or list gave it"},` +
		`"offset":{"type":"integer","minimum":0,"description":"read: where to read from (default 0; the answer's next continues)"},` +
		`"input":{"type":"string","description":"write: text for the process's standard input"},` +
		`"end":{"type":"boolean","description":"write: close its standard input after input"},` +
		`"port":{"type":"integer","minimum":1,"maximum":65535,"description":"link: the TCP port a server of yours listens on"}},` +
		`"required":["action"],"additionalProperties":false}`),
	Example: `{"action": "start", "command": "python3 -m http.server 8000"}`}

// processArgs are shell:process's params.
type processArgs struct {
	Action  string `json:"action"`
	Command string `json:"command"`
	ID      string `json:"id"`
	Offset  int64  `json:"offset"`
	Input   string `json:"input"`
	End     bool   `json:"end"`
	Port    int    `json:"port"`
}

func (s Shell) process(ctx context.Context, call Call) (Result, error) {
	var a processArgs
	if err := json.Unmarshal(call.Params, &a); err != nil {
		return Result{}, &ParamsError{Tool: ProcessTool.Name, Problem: err.Error(), Example: ProcessTool.Example}
	}
	need := func(field, value string) error {
		if strings.TrimSpace(value) == "" {
			return &ParamsError{Tool: ProcessTool.Name, Problem: fmt.Sprintf("action %q needs %q", a.Action, field), Example: ProcessTool.Example}
		}
		return nil
	}
	ps, _ := s.Sandboxes.(ProcessSandboxes)
	if s.Sandboxes == nil || ps == nil {
		return Result{}, fmt.Errorf("no sandbox with background processes is configured on this engine: %w", sandbox.ErrUnavailable)
	}
	var out any
	switch a.Action {
	case "start":
		if err := need("command", a.Command); err != nil {
			return Result{}, err
		}
		return startProcess(ctx, s.Sandboxes, call, a.Command)
	case "list":
		list, err := ps.ListProcesses(ctx, call.Scope)
		if err != nil {
			return Result{}, err
		}
		out = map[string]any{"processes": nonNil(list)}
	case "read":
		if err := need("id", a.ID); err != nil {
			return Result{}, err
		}
		if a.Offset < 0 {
			return Result{}, &ParamsError{Tool: ProcessTool.Name, Problem: "offset must be 0 or more", Example: `{"action": "read", "id": "p1", "offset": 0}`}
		}
		got, err := ps.ReadProcess(ctx, call.Scope, a.ID, a.Offset, maxProcessText)
		if err != nil {
			return processFailed(err)
		}
		out = processRead{Process: got.Process, Offset: got.Offset, Output: text(got.Data), Next: got.Offset + int64(len(got.Data)),
			Skipped: got.Offset - a.Offset}
	case "write":
		if err := need("id", a.ID); err != nil {
			return Result{}, err
		}
		if err := ps.WriteProcess(ctx, call.Scope, a.ID, []byte(a.Input), a.End); err != nil {
			return processFailed(err)
		}
		out = map[string]any{"written": len(a.Input), "closed": a.End}
	case "stop":
		if err := need("id", a.ID); err != nil {
			return Result{}, err
		}
		p, err := ps.StopProcess(ctx, call.Scope, a.ID)
		if err != nil {
			return processFailed(err)
		}
		out = map[string]any{"process": p}
	case "link":
		return s.link(ctx, call, a.Port)
	default:
		return Result{}, &ParamsError{Tool: ProcessTool.Name, Problem: fmt.Sprintf("action must be start, list, read, write, stop or link, not %s", gjson.GetBytes(call.Params, "action").Raw), Example: ProcessTool.Example}
	}
	b, _ := json.Marshal(out)
	return Result{Output: out, Text: string(b), Status: StatusSuccess}, nil
}

// PortSandboxes is the part of sandbox.Manager the link action uses to
// tell whether something listens on the port yet.
type PortSandboxes interface {
	DialPort(ctx context.Context, scope sandbox.Scope, port int) (net.Conn, error)
}

// link answers the preview link to a port of the call's sandbox, and
// whether something listens there now.
func (s Shell) link(ctx context.Context, call Call, port int) (Result, error) {
	if err := sandbox.CheckPort(port); err != nil {
		return Result{}, &ParamsError{Tool: ProcessTool.Name, Problem: `action "link" needs "port", between 1 and 65535`, Example: `{"action": "link", "port": 8000}`}
	}
	if s.Previews == nil {
		return Result{Output: map[string]string{"error": "this engine serves no preview links"}, Text: "this engine serves no preview links", IsError: true, Status: StatusFailed}, nil
	}
	path, err := s.Previews(ctx, call.Scope, port)
	if err != nil {
		return Result{}, err
	}
	out := map[string]any{"port": port, "link": path}
	if ps, ok := s.Sandboxes.(PortSandboxes); ok {
		conn, err := ps.DialPort(ctx, call.Scope, port)
		switch {
		case err == nil:
			conn.Close()
			out["listening"] = true
		case errors.Is(err, sandbox.ErrPortClosed):
			out["listening"] = false
			out["note"] = fmt.Sprintf("nothing listens on port %d yet: start the server first (action start), then give the user the link", port)
		default:
			return Result{}, err
		}
	}
	b, _ := json.Marshal(out)
	return Result{Output: out, Text: string(b), Status: StatusSuccess}, nil
}

// processRead is a read's answer: Skipped counts the bytes before Offset
// that are no longer kept.
type processRead struct {
	Process sandbox.Process `json:"process"`
	Offset  int64           `json:"offset"`
	Output  string          `json:"output"`
	Next    int64           `json:"next"`
	Skipped int64           `json:"skipped,omitempty"`
}

// startProcess starts a background process through Exec, so the command
// passes the policy, approvals and audit as any command does.
func startProcess(ctx context.Context, sb Sandboxes, call Call, command string) (Result, error) {
	cmd, approved := call.command(ctx, command)
	res, err := sb.Exec(ctx, call.Scope, sandbox.ExecRequest{Command: cmd, Background: true, Actor: call.Actor, Approved: approved})
	if err != nil {
		return Result{}, err
	}
	if res.Process == nil {
		return Result{Output: ShellResult{ExitCode: res.ExitCode, Stderr: res.Stderr}, Text: res.Stderr, IsError: true, Status: StatusFailed}, nil
	}
	out := map[string]any{"process": res.Process, "editedCommand": call.Edited}
	if call.Edited == "" {
		delete(out, "editedCommand")
	}
	b, _ := json.Marshal(out)
	return Result{Output: out, Text: string(b), Status: StatusSuccess}, nil
}

// processFailed is the result of an operation on a process the model can
// act on (no such process, one that ended), or the error.
func processFailed(err error) (Result, error) {
	if errors.Is(err, sandbox.ErrNoProcess) || errors.Is(err, sandbox.ErrProcessEnded) || errors.Is(err, sandbox.ErrTooLarge) {
		return Result{Output: map[string]string{"error": err.Error()}, Text: err.Error(), IsError: true, Status: StatusFailed}, nil
	}
	return Result{}, err
}

// text is output as a model reads it: valid UTF-8.
func text(p []byte) string { return strings.ToValidUTF8(string(p), "\uFFFD") }

func nonNil(list []sandbox.Process) []sandbox.Process {
	if list == nil {
		return []sandbox.Process{}
	}
	return list
}

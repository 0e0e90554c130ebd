// Package toolcall is the tool-call node (type "tools"): an LLM agent that
// calls tools in rounds until it answers. With the useAgentSandbox switch
// on, it gives the model the built-in sandbox_shell tool and a system
// prompt suffix describing the sandbox, and runs the model's commands in
// the chat's own sandbox. It must never let a model's arguments crash a
// run: broken arguments become tool errors the model can read.
package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
)

// ShellToolName is the built-in sandbox tool's name (N2).
const ShellToolName = "sandbox_shell"

// ShellTool is the sandbox_shell declaration sent to the model (N2).
var ShellTool = llm.Tool{Type: "function", Function: llm.FunctionDef{
	Name:        ShellToolName,
	Description: "Run a shell command in your own Linux sandbox for this chat: files, code, packages. The working directory and exported variables persist between calls.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"command":{"type":"string","description":"The shell command to run"},` +
		`"timeout":{"type":"number","minimum":1,"maximum":300,"description":"Timeout in seconds (1-300, default 30)"}},` +
		`"required":["command"]}`),
}}

// Sandbox runs commands in chats' sandboxes; *sandbox.Manager is one.
type Sandbox interface {
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
}

// Environment is what the prompt suffix tells the model about its sandbox.
// It must be true of the image and provider in use.
type Environment struct {
	// System names the operating system, e.g. "Debian 12 (bookworm)".
	System string
	// Tools are the preinstalled programs.
	Tools []string
	// Network says whether the sandbox reaches the network.
	Network bool
	// Egress, when Network is off, are the host names the sandbox reaches
	// through the egress proxy ("pypi.org", "*.pythonhosted.org").
	Egress []string
	// Install says how to add packages, e.g. "apt-get install -y PKG".
	Install string
	// Unsafe marks a sandbox without isolation (the host provider).
	Unsafe bool
}

// Config configures the node type.
type Config struct {
	Models  nodes.Models
	Sandbox Sandbox // nil: sandbox_shell answers that no sandbox is configured
	Env     Environment
	// Now is the clock for tool durations; default time.Now.
	Now func() time.Time
}

// Node is the tool-call node type.
type Node struct{ cfg Config }

var _ nodes.NodeType = (*Node)(nil)

// New returns the node type.
func New(cfg Config) *Node {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Node{cfg: cfg}
}

// PromptSuffix is appended to the system prompt when the sandbox is on (N3).
func (n *Node) PromptSuffix() string {
	e := n.cfg.Env
	var b strings.Builder
	b.WriteString("\n\nYou have your own Linux sandbox for this chat")
	if e.System != "" {
		fmt.Fprintf(&b, " (%s)", e.System)
	}
	b.WriteString(". Run shell commands in it with the sandbox_shell tool.\n")
	if len(e.Tools) > 0 {
		fmt.Fprintf(&b, "- Preinstalled: %s\n", strings.Join(e.Tools, ", "))
	}
	b.WriteString("- Working directory: /workspace; its files, your current directory and exported variables persist for this chat\n")
	switch {
	case e.Network && e.Install != "":
		fmt.Fprintf(&b, "- Network: available; install packages with: %s\n", e.Install)
	case e.Network:
		b.WriteString("- Network: available\n")
	case len(e.Egress) > 0:
		fmt.Fprintf(&b, "- Network: only HTTP and HTTPS to %s, through a proxy already set in HTTP_PROXY/HTTPS_PROXY; every other host, IP address and private address is refused (403)\n", strings.Join(e.Egress, ", "))
	default:
		b.WriteString("- Network: none, so packages cannot be downloaded; work with what is installed\n")
	}
	b.WriteString("- Each command has no input and times out after 30 seconds unless you pass timeout (at most 300)\n")
	if e.Unsafe {
		b.WriteString("- WARNING: this sandbox is not isolated: commands run directly on the server\n")
	}
	return b.String()
}

// Detail is the tool-call node's NodeResponse.Detail: every tool call it
// made, in order.
type Detail struct {
	ToolCalls []Call `json:"toolCalls"`
}

// Call is one tool call as recorded in the node's response and the chat.
type Call struct {
	ID         string `json:"id"`
	Tool       string `json:"toolName"`
	Arguments  string `json:"params"`
	Response   string `json:"response"` // the JSON the model read
	DurationMs int64  `json:"durationMs"`
	Status     string `json:"status"` // success | failed | timed out | refused | error
}

// Run calls the model, runs the tools it asks for, sends the results back,
// and repeats until the model answers without tools or the round limit.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	in := run.Inputs
	modelName := nodes.StringInput(in, "model")
	model, err := n.cfg.Models.Model(modelName)
	if err != nil {
		return nil, err
	}
	system := nodes.StringInput(in, "systemPrompt")
	useSandbox := nodes.BoolInput(in, "useAgentSandbox")
	var tools []llm.Tool
	if useSandbox {
		tools = append(tools, ShellTool)
		system += n.PromptSuffix()
	}
	msgs := nodes.Messages(system, run.Chat.History, nodes.IntInput(in, "history"), nodes.StringInput(in, "userChatInput"))
	if useSandbox && nodes.StringInput(in, "systemPrompt") == "" {
		msgs[0].Content = strings.TrimLeft(msgs[0].Content, "\n")
	}
	maxRounds := max(1, nodes.IntInput(in, "maxToolRounds"))
	var calls []Call
	defer func() { run.Detail = Detail{ToolCalls: calls} }()

	var answer string
	for round := 1; ; round++ {
		resp, err := model.Complete(ctx, llm.Request{Model: modelName, Messages: msgs, Tools: tools, Temperature: nodes.FloatInput(in, "temperature")},
			func(s string) { run.Emit(nodes.AnswerDelta{Text: s}) })
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", modelName, err)
		}
		msgs = append(msgs, resp.Message)
		answer = resp.Message.Content
		if len(resp.Message.ToolCalls) == 0 {
			break
		}
		if round > maxRounds {
			note := fmt.Sprintf("\n\n[Stopped: the model still wanted tools after %d rounds, the limit of this node. Raise \"Maximum tool rounds\" or ask it to continue.]", maxRounds)
			run.Emit(nodes.AnswerDelta{Text: note})
			answer += note
			break
		}
		for _, tc := range resp.Message.ToolCalls {
			call, unavailable := n.runTool(ctx, run, tc, tools)
			calls = append(calls, call)
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: call.Response})
			if unavailable != nil {
				// N5: the node ends with the error as its output; the rest
				// of the workflow runs on.
				run.Warning = unavailable.Error()
				run.Emit(nodes.NodeError{Message: sandbox.ErrUnavailable.Error()})
				return map[string]any{"answerText": sandbox.ErrUnavailable.Error(), "toolCalls": calls}, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	return map[string]any{"answerText": answer, "toolCalls": calls}, nil
}

// runTool runs one tool call and reports it; unavailable is set when the
// sandbox service could not run the command.
func (n *Node) runTool(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall, tools []llm.Tool) (call Call, unavailable error) {
	call = Call{ID: tc.ID, Tool: tc.Function.Name, Arguments: tc.Function.Arguments}
	run.Emit(nodes.ToolCallStarted{ID: tc.ID, Tool: tc.Function.Name, Params: tc.Function.Arguments})
	run.Emit(nodes.ToolParams{ID: tc.ID, Params: tc.Function.Arguments})
	start := n.cfg.Now()
	var resp any
	if !offered(tools, tc.Function.Name) {
		call.Status = "error"
		resp = toolError(fmt.Sprintf("unknown tool %q; the tools you have are: %s", tc.Function.Name, names(tools)))
	} else {
		resp, call.Status, unavailable = n.shell(ctx, run, tc)
	}
	call.DurationMs = n.cfg.Now().Sub(start).Milliseconds()
	b, _ := json.Marshal(resp)
	call.Response = string(b)
	run.Emit(nodes.ToolResult{ID: tc.ID, Tool: tc.Function.Name, Response: call.Response, DurationMs: call.DurationMs, Status: call.Status})
	return call, unavailable
}

// ShellResult is what the model reads back from sandbox_shell (N4).
type ShellResult struct {
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
	TimedOut   bool   `json:"timedOut,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	// TimeoutClamped says the model asked for a timeout outside 1–300 s
	// and got TimeoutSeconds instead (S6): the model learns why a command
	// stopped sooner, or ran longer, than it asked.
	TimeoutClamped bool `json:"timeoutClamped,omitempty"`
	TimeoutSeconds int  `json:"timeoutSeconds,omitempty"`
}

func (n *Node) shell(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall) (resp any, status string, unavailable error) {
	args, problem := ParseShellArgs(tc.Function.Arguments)
	if problem != "" {
		return toolError(problem), "error", nil
	}
	cmd, timeout := args.Command, args.Timeout
	if args.Clamped {
		defer func() {
			if r, ok := resp.(ShellResult); ok {
				r.TimeoutClamped, r.TimeoutSeconds = true, int(timeout/time.Second)
				resp = r
			}
		}()
	}
	if n.cfg.Sandbox == nil {
		err := fmt.Errorf("no sandbox is configured on this engine: %w", sandbox.ErrUnavailable)
		return ShellResult{ExitCode: -1, Stderr: sandbox.ErrUnavailable.Error()}, "failed", err
	}
	scope := sandbox.Scope{AppID: run.Chat.AppID, UserID: run.Chat.UserID, ChatID: run.Chat.ChatID}
	res, err := n.cfg.Sandbox.Exec(ctx, scope, sandbox.ExecRequest{
		Command: cmd, Timeout: timeout,
		Actor: sandbox.Actor{UserID: run.Chat.UserID, Kind: sandbox.ActorAgent, ToolCallID: tc.ID, Via: run.Chat.Via},
		OnOutput: func(s sandbox.Stream, p []byte) {
			stream := "stdout"
			if s == sandbox.Stderr {
				stream = "stderr"
			}
			run.Emit(nodes.ToolOutput{ID: tc.ID, Stream: stream, Text: string(p)})
		},
	})
	out := ShellResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, DurationMs: res.Duration.Milliseconds(), TimedOut: res.TimedOut, Truncated: res.Truncated}
	var limit *sandbox.LimitError
	var refused *sandbox.RefusedError
	switch {
	case errors.As(err, &refused):
		// The policy refused the command; it did not run. The model reads
		// the rule, why, and what is allowed.
		return ShellResult{ExitCode: -1, Stderr: refused.Error()}, "refused", nil
	case errors.Is(err, sandbox.ErrUnavailable):
		return out, "failed", err
	case errors.As(err, &limit):
		// A cap refused to start the sandbox: the model reads which, and
		// what the user may do.
		return ShellResult{ExitCode: -1, Stderr: limit.Error()}, "failed", nil
	case err != nil:
		// Cancelled, or the scope was refused: the model sees why.
		return ShellResult{ExitCode: -1, Stderr: err.Error()}, "failed", nil
	case res.TimedOut:
		return out, "timed out", nil
	case res.ExitCode != 0:
		return out, "failed", nil
	}
	return out, "success", nil
}

// ShellArgs are sandbox_shell's arguments as the command will run.
type ShellArgs struct {
	Command string
	// Timeout is zero when the model gave none: the sandbox's default.
	Timeout time.Duration
	// Clamped says the model's timeout was outside 1–300 s and Timeout is
	// the nearer bound (S6).
	Clamped bool
}

// ParseShellArgs reads sandbox_shell's arguments leniently (models send
// broken JSON) and says plainly what is wrong when it cannot. A timeout
// out of range is clamped rather than refused, so the command still runs.
func ParseShellArgs(args string) (ShellArgs, string) {
	example := `; call it like {"command": "ls -la", "timeout": 30}`
	c := gjson.Get(args, "command")
	switch {
	case !c.Exists():
		return ShellArgs{}, fmt.Sprintf("sandbox_shell needs a \"command\" string, and the arguments %s have none%s", clipArgs(args), example)
	case c.Type != gjson.String:
		return ShellArgs{}, fmt.Sprintf("\"command\" must be a string, got %s%s", c.Raw, example)
	case strings.TrimSpace(c.String()) == "":
		return ShellArgs{}, "\"command\" is empty" + example
	}
	out := ShellArgs{Command: c.String()}
	t := gjson.Get(args, "timeout")
	if t.Exists() && t.Type != gjson.Null {
		if t.Type != gjson.Number {
			return ShellArgs{}, fmt.Sprintf("\"timeout\" must be a number of seconds from 1 to 300, not %s%s", t.Raw, example)
		}
		secs := t.Float() // ±Inf for huge exponents, which the bounds catch
		switch {
		case secs < sandbox.MinTimeout.Seconds():
			out.Timeout, out.Clamped = sandbox.MinTimeout, true
		case secs > sandbox.MaxTimeout.Seconds():
			out.Timeout, out.Clamped = sandbox.MaxTimeout, true
		default:
			out.Timeout = time.Duration(secs * float64(time.Second))
		}
	}
	return out, ""
}

func toolError(msg string) map[string]string { return map[string]string{"error": msg} }

func offered(tools []llm.Tool, name string) bool {
	for _, t := range tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

func names(tools []llm.Tool) string {
	if len(tools) == 0 {
		return "none"
	}
	var out []string
	for _, t := range tools {
		out = append(out, t.Function.Name)
	}
	return strings.Join(out, ", ")
}

func clipArgs(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

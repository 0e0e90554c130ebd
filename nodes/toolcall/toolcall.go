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

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
)

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
	Models nodes.Models
	// Tools are the engine's tools: sandbox_shell and the skill tools
	// are the registry's shell:exec and skill:*, and the builder's
	// choices come from it too (N6). nil: a registry whose sandbox_shell
	// answers that no sandbox is configured.
	Tools *registry.Registry
	Env   Environment
	// Approvals remembers the commands a person approved for a whole
	// chat (P10); nil: none are remembered.
	Approvals Approvals
	// Limits gives the app's tool-call limits (P9): per run and per chat,
	// zero for none; nil: no limits.
	Limits func(ctx context.Context, appID string) (perRun, perChat int)
	// History gives the tool calls of a chat's earlier turns, for the
	// per-chat limit (history.Store); nil: they are not counted.
	History StoredCalls
	// Workspace lists the chat's files in the prompt (K3); nil: the
	// prompt does not.
	Workspace Workspace
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
	if cfg.Tools == nil {
		cfg.Tools = registry.New(nil, registry.Shell{})
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
	fmt.Fprintf(&b, ". Run shell commands in it with the %s tool.\n", registry.ShellModelName)
	if len(e.Tools) > 0 {
		fmt.Fprintf(&b, "- Preinstalled: %s\n", strings.Join(e.Tools, ", "))
	}
	b.WriteString("- Working directory: /workspace; its files, your current directory and exported variables persist for this chat\n")
	fmt.Fprintf(&b, "- A command's background jobs end when it returns; start servers and other long-running programs with the %s tool, and give the user the link its \"link\" action returns for a server's port\n", registry.ProcessModelName)
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
	fmt.Fprintf(&b, "- Each command has no input and times out after %d seconds unless you pass timeout (at most %d)\n",
		int(sandbox.DefaultTimeout.Seconds()), int(sandbox.MaxTimeout.Seconds()))
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
	ID         string          `json:"id"`
	Tool       string          `json:"toolName"`
	Arguments  string          `json:"params"`
	Response   string          `json:"response"` // the JSON the model read
	DurationMs int64           `json:"durationMs"`
	Status     registry.Status `json:"status"`
	// Approval is set on a command a person was asked about: the call
	// that paused the run (Decision empty), and the same call once
	// answered, in the run that resumed it.
	Approval *Approval `json:"approval,omitempty"`
}

// Run calls the model, runs the tools it asks for, sends the results back,
// and repeats until the model answers without tools or the round limit.
// A command the policy asks a person about pauses the run (see
// nodes.Interrupt) once the round's other calls have run; run.Resume
// continues it with the person's answer.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	in := run.Inputs
	modelName := nodes.StringInput(in, "model")
	model, err := n.cfg.Models.Model(modelName)
	if err != nil {
		return nil, err
	}
	system := nodes.StringInput(in, "systemPrompt")
	useSandbox := nodes.BoolInput(in, "useAgentSandbox")
	tb := n.toolbox(ctx, run, useSandbox)
	if useSandbox {
		system += n.PromptSuffix()
	}
	if run.Resume == nil {
		if extra := n.workspacePrompt(ctx, chatScope(run), tb.skills, useSandbox); extra != "" {
			if !useSandbox {
				extra = "\n" + extra
			}
			system += extra
		}
	}
	maxRounds := max(1, nodes.IntInput(in, "maxToolRounds"))
	var calls []Call
	defer func() { run.Detail = Detail{ToolCalls: calls} }()

	var st roundState
	lim := n.limits(ctx, run)
	if run.Resume != nil {
		if err := json.Unmarshal(run.Resume.State, &st); err != nil || len(st.Messages) == 0 ||
			st.Asked < 0 || st.Asked >= len(st.Results) || len(st.Messages[len(st.Messages)-1].ToolCalls) != len(st.Results) {
			return nil, fmt.Errorf("resume the paused run: its stored state is not usable (%v)", err)
		}
		lim.resumedAt = st.RunCalls
	} else {
		st.Messages = nodes.Messages(system, run.Chat.History, nodes.IntInput(in, "history"), nodes.StringInput(in, "userChatInput"))
		if useSandbox && nodes.StringInput(in, "systemPrompt") == "" {
			st.Messages[0].Content = strings.TrimLeft(st.Messages[0].Content, "\n")
		}
	}

	var answer string
	for {
		if st.Results == nil {
			st.Round++
			resp, err := model.Complete(ctx, llm.Request{Model: modelName, Messages: st.Messages, Tools: tb.defs, Temperature: nodes.FloatInput(in, "temperature")},
				func(s string) { run.Emit(nodes.AnswerDelta{Text: s}) })
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", modelName, err)
			}
			run.Count(resp.Usage)
			st.Messages = append(st.Messages, resp.Message)
			answer = resp.Message.Content
			if len(resp.Message.ToolCalls) == 0 {
				break
			}
			if st.Round > maxRounds {
				note := fmt.Sprintf("\n\n[Stopped: the model still wanted tools after %d rounds, the limit of this node. Raise \"Maximum tool rounds\" or ask it to continue.]", maxRounds)
				run.Emit(nodes.AnswerDelta{Text: note})
				answer += note
				break
			}
			st.Results = make([]*string, len(resp.Message.ToolCalls))
			st.Asked = -1
		}
		pause, unavailable, err := n.round(ctx, run, &st, tb, lim, &calls)
		if unavailable != nil {
			// N5: the node ends with the error as its output; the rest
			// of the workflow runs on.
			run.Warning = unavailable.Error()
			run.Emit(nodes.NodeError{Message: sandbox.ErrUnavailable.Error()})
			return map[string]any{"answerText": sandbox.ErrUnavailable.Error(), "toolCalls": calls}, nil
		}
		if err != nil {
			return nil, err
		}
		if pause != nil {
			return nil, pause
		}
		// The round is complete: its results go back in the order of the
		// calls, whichever ran first.
		for i, tc := range st.Messages[len(st.Messages)-1].ToolCalls {
			st.Messages = append(st.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: *st.Results[i]})
		}
		st.Results = nil
	}
	return map[string]any{"answerText": answer, "toolCalls": calls}, nil
}

// roundState is where the rounds stand; it is the state a paused run
// keeps (nodes.Interrupt.State), so its JSON must stay readable by later
// versions.
type roundState struct {
	// Messages is the conversation with the model, through the assistant
	// message whose tool calls are being run when Results is set.
	Messages []llm.Message `json:"messages"`
	Round    int           `json:"round"`
	// Results holds the response of each tool call of the round; null
	// for those still to run.
	Results []*string `json:"results,omitempty"`
	// Asked is the call a person is asked about (index in Results).
	Asked int `json:"asked"`
	// RunCalls counts the tool calls the run made (P9).
	RunCalls int `json:"runCalls"`
}

// round runs the calls of the round that have no result yet: on resume,
// first the one the person answered. It returns an interrupt when a
// command waits for a person; the other calls of the round have run.
func (n *Node) round(ctx context.Context, run *nodes.NodeRun, st *roundState, tb *toolbox, lim *limits, calls *[]Call) (pause *nodes.Interrupt, unavailable, err error) {
	tcs := st.Messages[len(st.Messages)-1].ToolCalls
	if run.Resume != nil && st.Asked >= 0 && st.Results[st.Asked] == nil {
		call, _, unavailable := n.runTool(ctx, run, tcs[st.Asked], tb, st, lim, n.answered(ctx, run, tcs[st.Asked]))
		*calls = append(*calls, call)
		st.Results[st.Asked] = &call.Response
		if unavailable != nil {
			return nil, unavailable, nil
		}
	}
	var pending []int
	for i := range tcs {
		if st.Results[i] == nil {
			pending = append(pending, i)
		}
	}
	var asked []int
	var first nodes.ApprovalRequest
	for _, batch := range batches(pending, tcs, tb) {
		group := make([]llm.ToolCall, len(batch))
		for j, i := range batch {
			group[j] = tcs[i]
		}
		for j, o := range n.runBatch(ctx, run, group, tb, st, lim) {
			i, tc, call := batch[j], group[j], o.call
			if o.ask != nil {
				if len(asked) == 0 {
					first = nodes.ApprovalRequest{ID: newApprovalID(), ToolCallID: tc.ID, Tool: tc.Function.Name, Command: o.ask.Command,
						Rule: o.ask.Verdict.Rule, Justification: o.ask.Verdict.Justification, Hint: o.ask.Verdict.Hint}
					call.Approval = &Approval{ID: first.ID, Command: first.Command, Rule: first.Rule, Justification: first.Justification}
				}
				asked = append(asked, i)
			} else {
				st.Results[i] = &call.Response
			}
			*calls = append(*calls, call)
			if o.unavailable != nil {
				return nil, o.unavailable, nil
			}
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
	if len(asked) == 0 {
		return nil, nil, nil
	}
	// One approval at a time: the other asked calls run again, and may
	// ask again, once this one is answered.
	st.Asked = asked[0]
	state, err := json.Marshal(st)
	if err != nil {
		return nil, nil, fmt.Errorf("keep the paused run: %w", err)
	}
	run.Emit(first)
	return &nodes.Interrupt{Request: first, State: state}, nil, nil
}

// toolRun is how a person's answer changes one tool call.
type toolRun struct {
	// command, when set, runs instead of the model's (an edit).
	command string
	// approved: a person approved the command that runs.
	approved bool
	// rejected, when set, is what the model reads instead of a result.
	rejected string
	approval *Approval
}

// answered is how the person's answer (run.Resume) runs the call asked
// about.
func (n *Node) answered(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall) toolRun {
	r := run.Resume
	a := r.Answer
	tr := toolRun{approval: &Approval{ID: r.Request.ID, Command: r.Request.Command, Rule: r.Request.Rule,
		Justification: r.Request.Justification, Decision: a.Decision, Reason: a.Reason}}
	switch a.Decision {
	case nodes.Approve, nodes.ApproveChat:
		tr.approved = true
		if a.Decision == nodes.ApproveChat && n.cfg.Approvals != nil {
			if err := n.cfg.Approvals.ApproveInChat(ctx, chatScope(run), r.Request.Command); err != nil {
				// The command still runs once; it will be asked about
				// again next time.
				tr.approval.Reason = "not remembered for the chat: " + err.Error()
			}
		}
	case nodes.Edit:
		tr.approved, tr.command, tr.approval.Edited = true, a.Command, a.Command
	default:
		why := "The user rejected this command; it did not run."
		switch {
		case a.Decision == "expired":
			why = "Nobody approved this command in time; it did not run."
		case a.Reason != "":
			why += " Their reason: " + a.Reason
		}
		tr.rejected = why
	}
	return tr
}

// runTool runs one tool call and reports it. ask is set when the call
// waits for a person's approval (and did not run); unavailable when the
// sandbox service could not run it.
func (n *Node) runTool(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall, tb *toolbox, st *roundState, lim *limits, tr toolRun) (call Call, ask *policy.AskError, unavailable error) {
	call = Call{ID: tc.ID, Tool: tc.Function.Name, Arguments: tc.Function.Arguments, Approval: tr.approval}
	if tr.command != "" {
		call.Arguments = editedArgs(tc.Function.Arguments, tr.command)
	}
	run.Emit(nodes.ToolCallStarted{ID: tc.ID, Tool: tc.Function.Name, Params: call.Arguments})
	run.Emit(nodes.ToolParams{ID: tc.ID, Params: call.Arguments})
	start := n.cfg.Now()
	var resp any
	// The call counts as it starts, so that calls running at the same
	// time see it; one the limits refuse does not count, and one that
	// waits for a person counts when it runs.
	limit := ""
	tb.mu.Lock()
	if tr.rejected == "" {
		limit = lim.reached(ctx, run, st)
	}
	if limit == "" {
		st.RunCalls++
	}
	tb.mu.Unlock()
	t, known := tb.tools[tc.Function.Name]
	switch {
	case tr.rejected != "":
		call.Status = registry.StatusRejected
		resp = modelView(t.Failed(errors.New(tr.rejected)))
	case limit != "":
		call.Status = registry.StatusLimited
		resp = toolError(limit)
	case !known:
		call.Status = registry.StatusError
		resp = toolError(fmt.Sprintf("unknown tool %q; the tools you have are: %s", tc.Function.Name, names(tb.defs)))
	default:
		resp, call.Status, ask, unavailable = n.callTool(ctx, run, tc, t, tb, tr)
		if ctx.Err() != nil && call.Status != registry.StatusSuccess {
			// The run was stopped or its client went away (E3): the
			// call did not fail on its own.
			call.Status = registry.StatusCancelled
		}
	}
	if ask != nil {
		tb.mu.Lock()
		st.RunCalls--
		tb.mu.Unlock()
	}
	call.DurationMs = n.cfg.Now().Sub(start).Milliseconds()
	b, _ := json.Marshal(resp)
	call.Response = string(b)
	run.Emit(nodes.ToolResult{ID: tc.ID, Tool: tc.Function.Name, Response: call.Response, DurationMs: call.DurationMs, Status: call.Status})
	return call, ask, unavailable
}

func toolError(msg string) map[string]string { return map[string]string{"error": msg} }

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

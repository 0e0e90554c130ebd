package toolcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
)

// MaxParallel bounds the calls of one round that run at once.
const MaxParallel = 4

// toolbox is what one run offers the model: registry tools by the names
// the model calls them.
type toolbox struct {
	defs  []llm.Tool
	tools map[string]registry.Tool
	// skills are the skills the node chose (K4); none: a skill tool the
	// builder chose by its registry name reaches every skill.
	skills []string
	// mu guards the run's counters while calls run in parallel.
	mu sync.Mutex
}

// offer adds a tool under its model name; a name already offered keeps
// its first tool (the node's own before the builder's choices).
func (tb *toolbox) offer(t registry.Tool) {
	name := t.Model()
	if _, ok := tb.tools[name]; ok {
		return
	}
	tb.tools[name] = t
	tb.defs = append(tb.defs, llm.Tool{Type: "function", Function: llm.FunctionDef{Name: name, Description: t.Description, Parameters: t.InputSchema}})
}

// toolbox is what the node offers in a run: sandbox_shell when the
// sandbox is on, the skill tools for the chosen skills (the script
// runner only with the sandbox), and the tools the builder chose. A
// source that fails leaves its tools out and says why in the run's
// warning: the run goes on.
func (n *Node) toolbox(ctx context.Context, run *nodes.NodeRun, useSandbox bool) *toolbox {
	tb := &toolbox{tools: map[string]registry.Tool{}, skills: nodes.StringsInput(run.Inputs, "skills")}
	scope := chatScope(run)
	var own []string
	if useSandbox {
		own = append(own, registry.ShellTool.Name, registry.ProcessTool.Name)
	}
	if len(tb.skills) > 0 {
		own = append(own, registry.SkillListTool.Name, registry.SkillLoadTool.Name, registry.SkillReadTool.Name)
		if useSandbox {
			own = append(own, registry.SkillRunTool.Name)
		}
	}
	for _, name := range own {
		// A tool this engine lacks (no skills backend) is not offered.
		if t, err := n.cfg.Tools.Lookup(ctx, scope, name); err == nil {
			tb.offer(t)
		}
	}
	// The builder's choices (N6): exec tools by their declared names,
	// "mcp:{serverId}" for every tool of a server, and any registry name
	// ("mcp:{serverId}/{tool}", "file:read").
	var errs, missing []string
	for _, name := range nodes.StringsInput(run.Inputs, "tools") {
		tools, err := n.cfg.Tools.Expand(ctx, scope, name)
		switch {
		case errors.Is(err, registry.ErrNoTool):
			missing = append(missing, name)
		case err != nil:
			errs = append(errs, err.Error())
		}
		for _, t := range tools {
			tb.offer(t)
		}
	}
	if len(missing) > 0 {
		errs = append([]string{fmt.Sprintf("no tool %s on this engine (ask the operator, or choose the app's tools again in the builder)",
			strings.Join(missing, ", "))}, errs...)
	}
	if len(errs) > 0 {
		run.Warning = "some tools are not available: " + strings.Join(errs, "; ")
	}
	return tb
}

func chatScope(run *nodes.NodeRun) sandbox.Scope {
	return sandbox.Scope{AppID: run.Chat.AppID, UserID: run.Chat.UserID, ChatID: run.Chat.ChatID}
}

// concurrencySafe reports whether a call may run beside others of its
// round: tools that say so (the skills' readers). Commands and scripts
// share the sandbox's shell state, so they run alone.
func (tb *toolbox) concurrencySafe(name string) bool {
	t, ok := tb.tools[name]
	return ok && t.ConcurrencySafe
}

// callTool runs a call of a registry tool. resp is what the model reads;
// ask is set when a person must approve the call first (it did not run);
// unavailable when the sandbox service could not run it.
func (n *Node) callTool(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall, t registry.Tool, tb *toolbox, tr toolRun) (resp any, status registry.Status, ask *policy.AskError, unavailable error) {
	scope := chatScope(run)
	call := registry.Call{
		Scope:  scope,
		Actor:  sandbox.Actor{UserID: run.Chat.UserID, Kind: sandbox.ActorAgent, ToolCallID: tc.ID, Via: run.Chat.Via, Tool: toolName(tc.Function.Name)},
		Params: json.RawMessage(tc.Function.Arguments),
		Skills: tb.skills,
		Edited: tr.command,
		OnOutput: func(s sandbox.Stream, p []byte) {
			stream := "stdout"
			if s == sandbox.Stderr {
				stream = "stderr"
			}
			run.Emit(nodes.ToolOutput{ID: tc.ID, Stream: stream, Text: string(p)})
		},
	}
	if tr.approved && tr.approval != nil {
		// The command line as the person approved it.
		call.Approved = tr.approval.Command
	}
	if n.cfg.Approvals != nil {
		call.ApprovedInChat = func(ctx context.Context, command string) bool {
			// An unreadable store only means the person is asked again.
			ok, _ := n.cfg.Approvals.ApprovedInChat(ctx, scope, command)
			return ok
		}
	}
	res, err := n.cfg.Tools.Execute(ctx, t, call)
	var bad *registry.ParamsError
	var refused *sandbox.RefusedError
	switch {
	case errors.As(err, &ask):
		return AwaitingResult{AwaitingApproval: true, Rule: ask.Verdict.Rule, Justification: ask.Verdict.Justification},
			registry.StatusAwaiting, ask, nil
	case errors.As(err, &bad):
		// Nothing ran: the model reads what is wrong and how to call it.
		problem := bad.Problem
		if bad.Example != "" {
			problem += "; call it like " + bad.Example
		}
		return toolError(problem), registry.StatusError, nil, nil
	case errors.As(err, &refused):
		// The policy refused the call; it did not run. The model reads
		// the rule, why, and what is allowed.
		return modelView(t.Failed(refused)), registry.StatusRefused, nil, nil
	case errors.Is(err, sandbox.ErrUnavailable):
		return modelView(t.Failed(sandbox.ErrUnavailable)), registry.StatusFailed, nil, err
	case err != nil:
		// A cap refused to start the sandbox, the call was cancelled, a
		// server failed: the model reads why.
		return modelView(t.Failed(err)), registry.StatusFailed, nil, nil
	}
	return modelView(res), res.Of(), nil, nil
}

// modelView is what the model reads of a result: its structured output
// where the tool gives one (a command's ShellResult), else its text.
func modelView(res registry.Result) any {
	switch {
	case res.Output != nil:
		return res.Output
	case res.IsError:
		return toolError(res.Text)
	}
	return map[string]string{"result": res.Text}
}

// toolName is the tool a call is audited under: "" for sandbox_shell
// (the audit's default for the agent).
func toolName(name string) string {
	if name == registry.ShellModelName {
		return ""
	}
	return name
}

// outcome is what running one call of a round gave.
type outcome struct {
	call        Call
	ask         *policy.AskError
	unavailable error
}

// runBatch runs calls of a round: alone in order, or, when every one is
// concurrency-safe, at most MaxParallel at a time. Outcomes are in the
// calls' order.
func (n *Node) runBatch(ctx context.Context, run *nodes.NodeRun, batch []llm.ToolCall, tb *toolbox, st *roundState, lim *limits) []outcome {
	out := make([]outcome, len(batch))
	if len(batch) == 1 {
		call, ask, unavailable := n.runTool(ctx, run, batch[0], tb, st, lim, toolRun{})
		out[0] = outcome{call, ask, unavailable}
		return out
	}
	// One event at a time reaches the stream.
	var emitMu sync.Mutex
	parallel := *run
	parallel.Emit = func(e nodes.EventData) {
		emitMu.Lock()
		defer emitMu.Unlock()
		run.Emit(e)
	}
	sem := make(chan struct{}, MaxParallel)
	var wg sync.WaitGroup
	for i, tc := range batch {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			call, ask, unavailable := n.runTool(ctx, &parallel, tc, tb, st, lim, toolRun{})
			out[i] = outcome{call, ask, unavailable}
		}()
	}
	wg.Wait()
	if parallel.Warning != "" && run.Warning == "" {
		run.Warning = parallel.Warning
	}
	return out
}

// batches splits the round's pending calls into runs of
// concurrency-safe calls, which may run together, and single others, in
// the model's order.
func batches(pending []int, tcs []llm.ToolCall, tb *toolbox) [][]int {
	var out [][]int
	for _, i := range pending {
		safe := tb.concurrencySafe(tcs[i].Function.Name)
		if k := len(out) - 1; safe && k >= 0 && tb.concurrencySafe(tcs[out[k][0]].Function.Name) {
			out[k] = append(out[k], i)
			continue
		}
		out = append(out, []int{i})
	}
	return out
}

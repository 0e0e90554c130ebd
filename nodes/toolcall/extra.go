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

// Extra is a tool the node offers besides its own (N6): an exec tool the
// operator declared (X1–X4), or a tool of an MCP server.
type Extra interface {
	// Definition is what the model is told of the tool.
	Definition() llm.Tool
	// ConcurrencySafe tools of one round may run at the same time.
	ConcurrencySafe() bool
	// Run runs one call. The errors are the sandbox layer's, for a tool
	// that runs in the chat's sandbox: a refusal (sandbox.RefusedError),
	// a question for a person (policy.AskError), the sandbox unavailable
	// or a cap reached; everything else is in the result.
	Run(ctx context.Context, call ExtraCall) (ExtraResult, error)
}

// ExtraCall is one call of an Extra tool.
type ExtraCall struct {
	Scope     sandbox.Scope
	Actor     sandbox.Actor
	Arguments string
	// Approved is the command line a person approved (for a tool that
	// runs in the sandbox and that an ask rule matched).
	Approved string
	// OnOutput receives live output, for the chat's card.
	OnOutput func(s sandbox.Stream, p []byte)
}

// ExtraResult is what an Extra tool gave. The model reads Output, as a
// result or, with IsError, as an error.
type ExtraResult struct {
	Output  string
	IsError bool
	// Status is the card's: success, failed or timed out ("" from
	// IsError: failed or success).
	Status string
}

// ExtraTools gives the extra tools an app's node offers in a chat, from
// the node's inputs ("tools": the names the builder chose). The chat's
// scope is where tools that are listed inside the sandbox (stdio MCP
// servers) are listed.
type ExtraTools interface {
	For(ctx context.Context, scope sandbox.Scope, chosen []string) ([]Extra, error)
}

// MaxParallel bounds the calls of one round that run at once.
const MaxParallel = 4

// toolbox is what one run offers the model.
type toolbox struct {
	defs  []llm.Tool
	extra map[string]Extra
	// mu guards the run's counters while calls run in parallel.
	mu sync.Mutex
}

// chosenTools are the extra tools the node's "tools" input names.
func chosenTools(in map[string]any) []string {
	raw, _ := in["tools"].([]any)
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// addExtra offers the node's chosen extra tools. A source that fails
// leaves them out and says why in the run's warning: the run goes on.
func (n *Node) addExtra(ctx context.Context, run *nodes.NodeRun, tb *toolbox) {
	chosen := chosenTools(run.Inputs)
	if n.cfg.Extra == nil || len(chosen) == 0 {
		return
	}
	scope := sandbox.Scope{AppID: run.Chat.AppID, UserID: run.Chat.UserID, ChatID: run.Chat.ChatID}
	extra, err := n.cfg.Extra.For(ctx, scope, chosen)
	if err != nil {
		run.Warning = "some tools are not available: " + err.Error()
	}
	for _, x := range extra {
		def := x.Definition()
		if offered(tb.defs, def.Function.Name) {
			continue // a built-in keeps its name
		}
		tb.defs = append(tb.defs, def)
		tb.extra[def.Function.Name] = x
	}
}

// concurrencySafe reports whether a call may run beside others of its
// round: the skills' readers, and extra tools that say so. Commands and
// scripts share the sandbox's shell state, so they run alone.
func (tb *toolbox) concurrencySafe(name string) bool {
	switch name {
	case ListSkillsTool, LoadSkillTool, ReadSkillFileTool:
		return true
	}
	if x, ok := tb.extra[name]; ok {
		return x.ConcurrencySafe()
	}
	return false
}

// extraTool runs a call of an extra tool.
func (n *Node) extraTool(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall, tb *toolbox, tr toolRun) (resp any, status string, ask *askedCommand, unavailable error) {
	x := tb.extra[tc.Function.Name]
	call := ExtraCall{
		Scope:     sandbox.Scope{AppID: run.Chat.AppID, UserID: run.Chat.UserID, ChatID: run.Chat.ChatID},
		Actor:     sandbox.Actor{UserID: run.Chat.UserID, Kind: sandbox.ActorAgent, ToolCallID: tc.ID, Via: run.Chat.Via, Tool: tc.Function.Name},
		Arguments: tc.Function.Arguments,
		OnOutput: func(s sandbox.Stream, p []byte) {
			stream := "stdout"
			if s == sandbox.Stderr {
				stream = "stderr"
			}
			run.Emit(nodes.ToolOutput{ID: tc.ID, Stream: stream, Text: string(p)})
		},
	}
	if tr.approved && tr.approval != nil {
		// The command line the tool made, as the person approved it: a
		// tool's command is not edited (an edit approves it as it is).
		call.Approved = tr.approval.Command
	}
	res, err := x.Run(ctx, call)
	var refused *sandbox.RefusedError
	var asks *policy.AskError
	var limit *sandbox.LimitError
	switch {
	case errors.As(err, &asks):
		return AwaitingResult{AwaitingApproval: true, Rule: asks.Verdict.Rule, Justification: asks.Verdict.Justification},
			StatusAwaiting, &askedCommand{AskError: asks, command: asks.Command}, nil
	case errors.As(err, &refused):
		return toolError(refused.Error()), "refused", nil, nil
	case errors.Is(err, sandbox.ErrUnavailable):
		return toolError(sandbox.ErrUnavailable.Error()), "failed", nil, err
	case errors.As(err, &limit):
		return toolError(limit.Error()), "failed", nil, nil
	case err != nil:
		return toolError(err.Error()), "failed", nil, nil
	}
	status = res.Status
	if status == "" {
		status = statusSuccess
		if res.IsError {
			status = "failed"
		}
	}
	if res.IsError {
		return toolError(res.Output), status, nil, nil
	}
	return map[string]string{"result": res.Output}, status, nil, nil
}

// outcome is what running one call of a round gave.
type outcome struct {
	call        Call
	ask         *askedCommand
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

// Registry offers the node the registry's tools the builder chose (A3):
// exec tools by their declared names, "mcp:{serverId}" for every tool of
// a server, and any registry name ("mcp:{serverId}/{tool}",
// "file:read"). The node's own tools (sandbox_shell, the skills') keep
// their names; a chosen tool of the same model name is left out.
type Registry struct{ Tools *registry.Registry }

var _ ExtraTools = Registry{}

// For returns the chosen tools. What is no longer there, or a server
// that cannot be reached, is reported together; the others are offered.
func (r Registry) For(ctx context.Context, scope sandbox.Scope, chosen []string) ([]Extra, error) {
	var out []Extra
	var errs, missing []string
	for _, name := range chosen {
		tools, err := r.Tools.Expand(ctx, scope, name)
		switch {
		case errors.Is(err, registry.ErrNoTool):
			missing = append(missing, name)
		case err != nil:
			errs = append(errs, err.Error())
		}
		for _, t := range tools {
			out = append(out, registryTool{t: t, reg: r.Tools})
		}
	}
	if len(missing) > 0 {
		errs = append([]string{fmt.Sprintf("no tool %s on this engine (ask the operator, or choose the app's tools again in the builder)",
			strings.Join(missing, ", "))}, errs...)
	}
	if len(errs) > 0 {
		return out, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// registryTool is a registry tool as the node offers it.
type registryTool struct {
	t   registry.Tool
	reg *registry.Registry
}

func (x registryTool) Definition() llm.Tool {
	return llm.Tool{Type: "function", Function: llm.FunctionDef{Name: x.t.Model(), Description: x.t.Description, Parameters: x.t.InputSchema}}
}

func (x registryTool) ConcurrencySafe() bool { return x.t.ConcurrencySafe }

func (x registryTool) Run(ctx context.Context, call ExtraCall) (ExtraResult, error) {
	res, err := x.reg.Execute(ctx, x.t, registry.Call{Scope: call.Scope, Actor: call.Actor, Params: json.RawMessage(call.Arguments),
		Approved: call.Approved, OnOutput: call.OnOutput})
	var bad *registry.ParamsError
	if errors.As(err, &bad) {
		return ExtraResult{Output: bad.Error(), IsError: true, Status: "failed"}, nil
	}
	if err != nil {
		return ExtraResult{}, err
	}
	return ExtraResult{Output: res.Text, IsError: res.IsError, Status: res.Status}, nil
}

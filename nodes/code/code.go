// Package code is the code node (type "code", FastGPT's code sandbox):
// it runs the builder's JavaScript or Python with the node's custom
// inputs and gives what the code returns as the node's outputs.
//
// The code runs in a sandbox and nowhere else: in the chat's own sandbox
// when the app has the sandbox on (a tool-call node with useAgentSandbox),
// so that it sees the chat's files; otherwise in a sandbox made for the
// one run, with the operator's limits and network, and deleted after it.
// Either way it is a command of the sandbox manager, so the app's command
// policy judges it and the audit records it like a sandbox_shell command.
// This package must never run code on the engine's host, nor write the
// code into the user's workspace.
//
// The node's own inputs are codeType and code; every other input is a
// custom input (FastGPT's dynamic inputs), each a value or a reference,
// given to the code by name. They are the node's top-level inputs, as
// FastGPT stores them, because that is where the engine resolves
// references, orders nodes by them and checks them at save; an object
// input holding them would hide its references from all three.
package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/policy"
)

// Type is the node type's name, FastGPT's.
const Type = "code"

// The node's own inputs; every other input is a custom one.
const (
	inputCodeType = "codeType"
	inputCode     = "code"
)

// Sandboxes runs commands in sandboxes and deletes them;
// *sandbox.Manager is one.
type Sandboxes interface {
	Exec(ctx context.Context, scope sandbox.Scope, req sandbox.ExecRequest) (sandbox.ExecResult, error)
	Delete(ctx context.Context, sandboxID string) error
}

// DefaultTimeout bounds a run of the code unless Config says otherwise.
const DefaultTimeout = 60 * time.Second

// Config configures the node type.
type Config struct {
	// Sandboxes runs the code; nil: every run fails, saying that no
	// sandbox is configured.
	Sandboxes Sandboxes
	// SandboxOn says whether an app has the sandbox on (see SandboxOn);
	// nil: no app has, and the code always runs in a throwaway sandbox.
	SandboxOn func(ctx context.Context, appID string) (bool, error)
	// Discard deletes a throwaway sandbox and everything it owns, once
	// its run has ended; nil: Sandboxes.Delete.
	Discard func(ctx context.Context, scope sandbox.Scope) error
	// Timeout bounds one run of the code; default DefaultTimeout, at most
	// sandbox.MaxTimeout. The app's policy may lower it.
	Timeout time.Duration
}

// Node is the code node type.
type Node struct{ cfg Config }

var _ nodes.NodeType = (*Node)(nil)

// New returns the node type.
func New(cfg Config) *Node {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	cfg.Timeout = min(cfg.Timeout, sandbox.MaxTimeout)
	if cfg.Discard == nil && cfg.Sandboxes != nil {
		sb := cfg.Sandboxes
		cfg.Discard = func(ctx context.Context, scope sandbox.Scope) error { return sb.Delete(ctx, scope.SandboxID()) }
	}
	return &Node{cfg: cfg}
}

// SandboxOn reports whether a graph turns the chat's sandbox on: one of
// its tool-call nodes has useAgentSandbox set.
func SandboxOn(g *nodes.Graph) bool {
	for _, n := range g.Nodes {
		if n.Type != "tools" {
			continue
		}
		var on bool
		if json.Unmarshal(n.Inputs["useAgentSandbox"], &on) == nil && on {
			return true
		}
	}
	return false
}

// Detail is the code node's NodeResponse.Detail, in FastGPT's words.
type Detail struct {
	// Sandbox is where the code ran: "chat" (the chat's own sandbox) or
	// "throwaway" (one made for this run).
	Sandbox      string         `json:"sandbox"`
	CustomInputs map[string]any `json:"customInputs"`
	// CustomOutputs is the object the code returned.
	CustomOutputs map[string]any `json:"customOutputs,omitempty"`
	// CodeLog is what the code printed besides its result (its standard
	// error, and what main printed).
	CodeLog    string `json:"codeLog,omitempty"`
	ExitCode   int    `json:"exitCode"`
	DurationMs int64  `json:"durationMs"`
}

// Run runs the code in a sandbox and returns the object it gave:
// rawResponse, and each of its keys as an output of its own.
func (n *Node) Run(ctx context.Context, run *nodes.NodeRun) (map[string]any, error) {
	codeType := nodes.StringInput(run.Inputs, inputCodeType)
	if codeType == "" {
		codeType = "js"
	}
	lang, ok := languages[codeType]
	if !ok {
		return nil, fmt.Errorf("codeType %q is not a language this node runs; use \"js\" (JavaScript) or \"py\" (Python)", codeType)
	}
	inputs := map[string]any{}
	for k, v := range run.Inputs {
		if k != inputCodeType && k != inputCode {
			inputs[k] = v
		}
	}
	detail := &Detail{CustomInputs: inputs}
	run.Detail = detail
	cmd, err := command(lang, nodes.StringInput(run.Inputs, inputCode), inputs)
	if err != nil {
		return nil, err
	}
	if n.cfg.Sandboxes == nil {
		return nil, fmt.Errorf("no sandbox is configured on this engine, and code runs only in one: %w", sandbox.ErrUnavailable)
	}
	scope, throwaway, err := n.scope(ctx, run)
	if err != nil {
		return nil, err
	}
	detail.Sandbox = "chat"
	if throwaway {
		detail.Sandbox = "throwaway"
	}
	res, err := n.cfg.Sandboxes.Exec(ctx, scope, sandbox.ExecRequest{Command: cmd, Timeout: n.cfg.Timeout,
		Actor: sandbox.Actor{UserID: run.Chat.UserID, Kind: sandbox.ActorService, Via: run.Chat.Via, Tool: Type, Op: Type}})
	// A refused command made no sandbox; anything else may have.
	if throwaway && !errors.Is(err, sandbox.ErrRefused) {
		defer func() {
			// The run may have been cancelled: the deletion goes on.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := n.cfg.Discard(dctx, scope); err != nil {
				run.Warning = fmt.Sprintf("the sandbox made for this run was not deleted (%v); it stops when idle", err)
			}
		}()
	}
	detail.ExitCode, detail.DurationMs, detail.CodeLog = res.ExitCode, res.Duration.Milliseconds(), res.Stderr
	if err != nil {
		return nil, execError(ctx, lang, err)
	}
	if err := resultError(lang, res, n.cfg.Timeout); err != nil {
		return nil, err
	}
	out, err := parseResult(res)
	if err != nil {
		return nil, err
	}
	detail.CustomOutputs = out
	outputs := map[string]any{"rawResponse": out}
	for k, v := range out {
		outputs[k] = v
	}
	var missing []string
	for _, o := range run.Node.Outputs {
		if _, ok := out[o.Key]; !ok {
			missing = append(missing, o.Key)
		}
	}
	if len(missing) > 0 && run.Warning == "" {
		slices.Sort(missing)
		run.Warning = fmt.Sprintf("the code's result has no %s, which the node declares as outputs: the nodes that use them get nothing; return them from main",
			strings.Join(missing, ", "))
	}
	return outputs, nil
}

// scope is the sandbox the code runs in: the chat's own when the app has
// the sandbox on, else a throwaway one of the same app and user.
func (n *Node) scope(ctx context.Context, run *nodes.NodeRun) (sandbox.Scope, bool, error) {
	c := run.Chat
	if c.AppID == "" || c.UserID == "" {
		return sandbox.Scope{}, false, errors.New("code runs in a sandbox of the run's app and user, and this run names none; run it from an app's chat or its builder")
	}
	if n.cfg.SandboxOn != nil && c.ChatID != "" {
		on, err := n.cfg.SandboxOn(ctx, c.AppID)
		if err != nil {
			return sandbox.Scope{}, false, fmt.Errorf("could not tell whether the app's sandbox is on, so the code did not run: %w", err)
		}
		if on {
			return sandbox.Scope{AppID: c.AppID, UserID: c.UserID, ChatID: c.ChatID}, false, nil
		}
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return sandbox.Scope{}, false, fmt.Errorf("name a sandbox for the code: %w", err)
	}
	return sandbox.Scope{AppID: c.AppID, UserID: c.UserID, ChatID: "flowbox-code-" + hex.EncodeToString(b)}, true, nil
}

// execError says why the sandbox did not run the code.
func execError(ctx context.Context, lang language, err error) error {
	var ask *policy.AskError
	var refused *sandbox.RefusedError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &ask):
		return fmt.Errorf("the app's command policy wants a person to approve running this %s code (rule %q), and a code node cannot wait for one: allow %s in the policy, or run the code from a tool-call node",
			lang.Name, ask.Verdict.Rule, lang.Program)
	case errors.As(err, &refused):
		return fmt.Errorf("the app's command policy refused to run this %s code: %w", lang.Name, refused)
	}
	// The sandbox service is unavailable, a cap refused a sandbox, the
	// chat was deleted: the error says which.
	return fmt.Errorf("the code did not run: %w", err)
}

// resultError says why a run of the code failed, nil when it did not.
func resultError(lang language, res sandbox.ExecResult, timeout time.Duration) error {
	switch {
	case res.TimedOut:
		// The app's policy may have set a shorter limit than the node's;
		// the run's own measure of its time may fall a little short of
		// the limit that stopped it, hence the rounding.
		limit := res.Duration.Round(time.Second)
		if limit < time.Second || limit > timeout {
			limit = timeout
		}
		return fmt.Errorf("the code was stopped after %s, its time limit; make it faster, or do the long work in a tool-call node's sandbox", limit)
	case res.OOMKilled:
		return errors.New("the code ran out of the sandbox's memory and was killed; work on less data at once")
	case res.ExitCode == 127 && missingProgram(res.Stderr, lang.Program):
		return fmt.Errorf("the sandbox has no %s, which %s code needs: ask the operator for a sandbox image with %s", lang.Program, lang.Name, lang.Program)
	case res.ExitCode != 0:
		msg := firstLines(res.Stderr, 12, 2000)
		if msg == "" {
			msg = "it printed nothing on standard error"
		}
		return fmt.Errorf("the code failed (exit code %d): %s", res.ExitCode, msg)
	}
	return nil
}

// missingProgram reports whether a shell's stderr says it found no
// program of that name (bash, dash, busybox ash).
func missingProgram(stderr, program string) bool {
	for _, s := range []string{program + ": command not found", program + ": not found", program + ": No such file or directory"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// firstLines is the first n lines of s, at most max bytes, trimmed.
func firstLines(s string, n, max int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	cut := len(lines) > n
	if cut {
		lines = lines[:n]
	}
	out := strings.Join(lines, "\n")
	if len(out) > max {
		out, cut = strings.ToValidUTF8(out[:max], ""), true
	}
	if cut {
		out += "\n…"
	}
	return out
}

// parseResult reads the JSON object the code printed.
func parseResult(res sandbox.ExecResult) (map[string]any, error) {
	text := strings.TrimSpace(res.Stdout)
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil || out == nil {
		if res.Truncated {
			return nil, fmt.Errorf("the code's result is larger than the %d KiB a sandbox command may print, so it was cut; return less (write large data to a file and return its path)",
				sandbox.DefaultOutputLimit>>10)
		}
		if text == "" {
			return nil, errors.New("the code gave no result: define main and return an object from it, or print one JSON object")
		}
		return nil, fmt.Errorf("the code's result is not a JSON object: %s; define main and return an object from it, or print one JSON object",
			firstLines(text, 3, 300))
	}
	return out, nil
}

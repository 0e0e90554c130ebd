package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// DemoModelName is the model name that selects Demo.
const DemoModelName = "flowbox-demo"

// Demo is an offline, deterministic model so the product runs with no API
// key. It is not a language model: it follows fixed rules, and the same
// conversation always gets the same answer.
//
//   - When the user's last message holds shell commands, in fenced code
//     blocks (one command per block) or on lines starting with "$ " (one
//     command per line), and a tool named sandbox_shell is offered, it
//     calls sandbox_shell once per command, in order.
//   - When the last messages are tool results, it summarises them: each
//     command, its exit code, and the start of its output.
//   - When a workflow's classifier offers the classify_question tool, it
//     picks the class whose description shares the most words (or, for
//     Chinese, characters) with the question, the first on a tie, the
//     last when none shares any.
//   - When a workflow's extractor offers the extract_fields tool, it fills
//     each key from the text's "<key>: value" or "<key> is value" (also
//     after the key's description), numbers and yes/no parsed.
//   - Otherwise it explains how to use it.
//
// Its answers stream word by word when streaming is asked for.
type Demo struct{}

var _ Model = Demo{}

var (
	fenceRe  = regexp.MustCompile("(?s)```[a-zA-Z0-9_+-]*[ \t]*\n(.*?)```")
	dollarRe = regexp.MustCompile(`(?m)^[ \t]*\$[ \t]+(.+?)[ \t]*$`)
)

// Commands extracts the shell commands Demo would run from a user message.
func Commands(text string) []string {
	var out []string
	for _, m := range fenceRe.FindAllStringSubmatch(text, -1) {
		if cmd := strings.TrimSpace(m[1]); cmd != "" {
			out = append(out, cmd)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, m := range dollarRe.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// Complete answers by the demo's rules, with the usage counted in words
// (words of the request's messages, words of the answer and its tool
// calls' arguments), so that tests can check exact figures.
func (d Demo) Complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	resp, err := d.complete(ctx, req, onText)
	if err == nil {
		for _, m := range req.Messages {
			resp.Usage.PromptTokens += len(strings.Fields(m.Content))
		}
		resp.Usage.CompletionTokens = len(strings.Fields(resp.Message.Content))
		for _, c := range resp.Message.ToolCalls {
			resp.Usage.CompletionTokens += len(strings.Fields(c.Function.Arguments))
		}
		resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	}
	return resp, err
}

func (Demo) complete(ctx context.Context, req Request, onText func(string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	if len(req.Messages) == 0 {
		return Response{}, fmt.Errorf("demo model: the request has no messages")
	}
	if resp, ok := structured(req); ok {
		return resp, nil
	}
	last := req.Messages[len(req.Messages)-1]
	var text string
	switch last.Role {
	case RoleTool:
		text = summarise(req.Messages)
	case RoleUser:
		cmds := Commands(last.Content)
		switch {
		case len(cmds) > 0 && hasTool(req.Tools, "sandbox_shell"):
			return toolCalls(req.Messages, cmds), nil
		case len(cmds) > 0:
			text = "I would run those commands, but this app has no sandbox. Turn on \"Enable sandbox (Computer Use)\" on its tool-call node and ask again."
		default:
			text = "I am Flowbox's offline demo model: I follow fixed rules instead of understanding language. " +
				"Write a shell command after \"$ \" (for example: $ uname -a) or in a fenced code block, " +
				"and I will run it in this chat's sandbox and show you the result."
		}
	default:
		text = "I have nothing to add."
	}
	if onText != nil {
		for _, w := range strings.SplitAfter(text, " ") {
			if ctx.Err() != nil {
				return Response{}, ctx.Err()
			}
			onText(w)
		}
	}
	return Response{Message: Message{Role: RoleAssistant, Content: text}, FinishReason: "stop"}, nil
}

func hasTool(tools []Tool, name string) bool {
	for _, t := range tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

func toolCalls(history []Message, cmds []string) Response {
	turn := 0
	for _, m := range history {
		if m.Role == RoleAssistant {
			turn++
		}
	}
	msg := Message{Role: RoleAssistant}
	for i, c := range cmds {
		args, _ := json.Marshal(map[string]string{"command": c})
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{
			ID: fmt.Sprintf("call_demo_%d_%d", turn, i), Type: "function",
			Function: FunctionCall{Name: "sandbox_shell", Arguments: string(args)},
		})
	}
	return Response{Message: msg, FinishReason: "tool_calls"}
}

// summarise reports the tool results that follow the last assistant
// message with tool calls.
func summarise(history []Message) string {
	var calls []ToolCall
	start := 0
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == RoleAssistant && len(history[i].ToolCalls) > 0 {
			calls, start = history[i].ToolCalls, i+1
			break
		}
	}
	results := map[string]string{}
	for _, m := range history[start:] {
		if m.Role == RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	var b strings.Builder
	for _, c := range calls {
		var args struct {
			Command string `json:"command"`
		}
		_ = json.Unmarshal([]byte(c.Function.Arguments), &args)
		var res struct {
			Stdout   string `json:"stdout"`
			Stderr   string `json:"stderr"`
			ExitCode int    `json:"exitCode"`
			TimedOut bool   `json:"timedOut"`
		}
		raw := results[c.ID]
		if err := json.Unmarshal([]byte(raw), &res); err != nil {
			fmt.Fprintf(&b, "`%s` returned: %s\n\n", args.Command, clip(raw, 500))
			continue
		}
		status := fmt.Sprintf("exited with code %d", res.ExitCode)
		switch {
		case res.TimedOut:
			status = "timed out"
		case res.ExitCode == 0:
			status = "succeeded"
		case res.ExitCode == -1:
			status = "could not run"
		}
		fmt.Fprintf(&b, "`%s` %s.\n", args.Command, status)
		if out := strings.TrimRight(res.Stdout, "\n"); out != "" {
			fmt.Fprintf(&b, "```\n%s\n```\n", clip(out, 1500))
		}
		if errOut := strings.TrimRight(res.Stderr, "\n"); errOut != "" {
			fmt.Fprintf(&b, "stderr:\n```\n%s\n```\n", clip(errOut, 800))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "The tools returned nothing to summarise."
	}
	return strings.TrimRight(b.String(), "\n")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n… (" + fmt.Sprint(len(s)-cut) + " more bytes)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

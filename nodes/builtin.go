package nodes

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowbox/flowbox/internal/llm"
)

// Models gives the model a node names.
type Models interface {
	Model(name string) (llm.Model, error)
}

// Builtins returns the node types every engine has: workflowStart,
// answerNode, chatNode, the model's classifyQuestion and contentExtract,
// the loop with its start and end, the logic nodes ifElseNode, textEditor
// and variableUpdate, and the interactive userSelect and formInput. The
// tool-call node (type "tools") and the nodes that need services (code,
// httpRequest468, readFiles) are installed by the caller.
func Builtins(models Models) map[string]NodeType {
	return map[string]NodeType{
		"workflowStart":    startNode{},
		"answerNode":       answerNode{},
		"chatNode":         chatNode{models: models},
		"classifyQuestion": classifyNode{models: models},
		"contentExtract":   extractNode{models: models},
		"loop":             loopNode{},
		"loopStart":        loopStart{},
		"loopEnd":          loopEnd{},
		"ifElseNode":       ifElseNode{},
		"textEditor":       textEditor{},
		"variableUpdate":   variableUpdate{},
		"userSelect":       userSelect{},
		"formInput":        formInput{},
	}
}

// loopNode runs its body once per item of its array, one round after
// another; each round counts against the run's bound on node runs.
type loopNode struct{}

func (loopNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	items, _ := run.Inputs["loopInputArray"].([]any)
	results := make([]any, 0, len(items))
	var rounds [][]NodeResponse
	defer func() { run.Detail = map[string]any{"rounds": rounds} }()
	for i, item := range items {
		out, responses, err := run.Body(ctx, map[string]any{"loopStartInput": item, "loopStartIndex": float64(i)})
		rounds = append(rounds, responses)
		if err != nil {
			return nil, fmt.Errorf("round %d of %d: %w", i+1, len(items), err)
		}
		if out != nil {
			results = append(results, out["loopEndInput"])
		}
	}
	return map[string]any{"loopArray": results}, nil
}

type loopStart struct{}

func (loopStart) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	return run.Entry, nil
}

type loopEnd struct{}

func (loopEnd) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	return map[string]any{"loopEndInput": run.Inputs["loopEndInput"]}, nil
}

type startNode struct{}

func (startNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	return map[string]any{"userChatInput": run.Chat.Question}, nil
}

type answerNode struct{}

func (answerNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	t := Text(run.Inputs["text"])
	run.Emit(AnswerDelta{Text: t})
	return map[string]any{"answerText": t}, nil
}

type chatNode struct{ models Models }

func (n chatNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	model, err := n.models.Model(StringInput(run.Inputs, "model"))
	if err != nil {
		return nil, err
	}
	req := llm.Request{
		Model:       StringInput(run.Inputs, "model"),
		Messages:    Messages(StringInput(run.Inputs, "systemPrompt"), run.Chat.History, IntInput(run.Inputs, "history"), StringInput(run.Inputs, "userChatInput")),
		Temperature: FloatInput(run.Inputs, "temperature"),
	}
	resp, err := model.Complete(ctx, req, func(s string) { run.Emit(AnswerDelta{Text: s}) })
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", req.Model, err)
	}
	run.Count(resp.Usage)
	return map[string]any{"answerText": resp.Message.Content}, nil
}

// Messages builds a model conversation: the system prompt (when not
// empty), the last n messages of history, and the question.
func Messages(systemPrompt string, history []llm.Message, n int, question string) []llm.Message {
	var out []llm.Message
	if strings.TrimSpace(systemPrompt) != "" {
		out = append(out, llm.Message{Role: llm.RoleSystem, Content: systemPrompt})
	}
	if n > 0 && len(history) > 0 {
		out = append(out, history[max(0, len(history)-n):]...)
	}
	return append(out, llm.Message{Role: llm.RoleUser, Content: question})
}

// StringInput, StringsInput, IntInput, FloatInput and BoolInput read
// resolved inputs, which hold JSON types (numbers are float64).
func StringInput(in map[string]any, key string) string {
	s, _ := in[key].(string)
	return s
}

// StringsInput is a list input's non-empty strings.
func StringsInput(in map[string]any, key string) []string {
	raw, _ := in[key].([]any)
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

func IntInput(in map[string]any, key string) int {
	f, _ := in[key].(float64)
	return int(f)
}

func FloatInput(in map[string]any, key string) *float64 {
	if f, ok := in[key].(float64); ok {
		return &f
	}
	return nil
}

func BoolInput(in map[string]any, key string) bool {
	b, _ := in[key].(bool)
	return b
}

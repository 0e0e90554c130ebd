package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flowbox/flowbox/internal/llm"
)

// The nodes that ask the model for a structured answer through a tool
// call (classifyQuestion, contentExtract): the model must call the one
// tool offered, whose arguments are the answer.

type classifyNode struct{ models Models }

type class struct {
	Value string `json:"value"`
	Key   string `json:"key"`
}

func classesOf(in any) []class {
	b, _ := json.Marshal(in)
	var out []class
	_ = json.Unmarshal(b, &out)
	return out
}

// Branches are the classes' keys.
func (classifyNode) Branches(n *Node) []string {
	var in []class
	_ = json.Unmarshal(n.Inputs["agents"], &in)
	if len(in) == 0 {
		return []string{"greeting", "other"} // the template's default classes
	}
	keys := make([]string, len(in))
	for i, c := range in {
		keys[i] = c.Key
	}
	return keys
}

func (n classifyNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	classes := classesOf(run.Inputs["agents"])
	keys := make([]string, len(classes))
	var about strings.Builder
	for i, c := range classes {
		keys[i] = c.Key
		fmt.Fprintf(&about, "%s: %s\n", c.Key, strings.ReplaceAll(c.Value, "\n", " "))
	}
	params, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{"type": map[string]any{"type": "string", "enum": keys,
			"description": "The key of the class the question belongs to. The classes:\n" + about.String()}},
		"required": []string{"type"},
	})
	system := "Sort the user's question into exactly one of these classes, and answer by calling " + llm.ClassifyTool +
		" with its key. The classes (key: what belongs in it):\n" + about.String()
	if bg := StringInput(run.Inputs, "systemPrompt"); strings.TrimSpace(bg) != "" {
		system += "\nBackground:\n" + bg
	}
	args, err := callTool(ctx, n.models, run, system, StringInput(run.Inputs, "userChatInput"),
		llm.Tool{Type: "function", Function: llm.FunctionDef{Name: llm.ClassifyTool, Description: "Give the question's class", Parameters: params}})
	if err != nil {
		return nil, err
	}
	var answer struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal([]byte(args), &answer)
	i := slices.IndexFunc(classes, func(c class) bool { return c.Key == strings.TrimSpace(answer.Type) })
	if i < 0 {
		// As FastGPT's classifier does, the last class takes what fits
		// none (builders keep "everything else" there); the record says
		// so.
		run.Warning = fmt.Sprintf("the model answered class %q, which is not one of %s; the last class was taken", answer.Type, strings.Join(keys, ", "))
		i = len(classes) - 1
	}
	run.Branches = []string{classes[i].Key}
	return map[string]any{"cqResult": classes[i].Value}, nil
}

type extractNode struct{ models Models }

type extractKey struct {
	Key          string `json:"key"`
	Desc         string `json:"desc"`
	ValueType    string `json:"valueType"`
	Required     bool   `json:"required"`
	DefaultValue string `json:"defaultValue"`
	Enum         string `json:"enum"`
}

func (n extractNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	b, _ := json.Marshal(run.Inputs["extractKeys"])
	var keys []extractKey
	_ = json.Unmarshal(b, &keys)
	props := map[string]any{}
	var required []string
	for _, k := range keys {
		typ := k.ValueType
		if typ == "" {
			typ = "string"
		}
		p := map[string]any{"type": typ, "description": k.Desc}
		if values := lines(k.Enum); len(values) > 0 {
			p["enum"] = values
		}
		props[k.Key] = p
		if k.Required {
			required = append(required, k.Key)
		}
	}
	params, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	system := "Extract the fields from the user's text and answer by calling " + llm.ExtractTool +
		". Leave out a field the text does not give; never invent a value."
	if d := StringInput(run.Inputs, "description"); strings.TrimSpace(d) != "" {
		system += "\nWhat to extract:\n" + d
	}
	args, err := callTool(ctx, n.models, run, system, StringInput(run.Inputs, "content"),
		llm.Tool{Type: "function", Function: llm.FunctionDef{Name: llm.ExtractTool, Description: "Give the fields found in the text", Parameters: params}})
	if err != nil {
		return nil, err
	}
	got := map[string]any{}
	if err := json.Unmarshal([]byte(args), &got); err != nil {
		return nil, fmt.Errorf("the model's extraction is not a JSON object (%v): %s", err, clip(args, 200))
	}
	out := map[string]any{}
	fields := map[string]any{}
	success := true
	for _, k := range keys {
		v, found := got[k.Key]
		if found {
			v, found = fit(v, k.ValueType)
		}
		if found && len(lines(k.Enum)) > 0 && !slices.Contains(lines(k.Enum), Text(v)) {
			found = false
		}
		if !found {
			if k.Required {
				success = false
			}
			if k.DefaultValue == "" {
				out[k.Key] = nil
				continue
			}
			v, _ = fit(k.DefaultValue, k.ValueType)
		}
		out[k.Key], fields[k.Key] = v, v
	}
	all, _ := json.Marshal(fields)
	out["success"], out["fields"] = success, string(all)
	return out, nil
}

// fit converts a value the model gave to a field's type; false when it
// cannot.
func fit(v any, typ string) (any, bool) {
	switch typ {
	case "number":
		switch x := v.(type) {
		case float64:
			return x, true
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			return f, err == nil
		}
		return nil, false
	case "boolean":
		switch x := v.(type) {
		case bool:
			return x, true
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			return b, err == nil
		}
		return nil, false
	}
	if v == nil {
		return nil, false
	}
	return Text(v), true
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// callTool asks the node's model to answer by calling tool, and returns
// the call's arguments.
func callTool(ctx context.Context, models Models, run *NodeRun, system, question string, tool llm.Tool) (string, error) {
	name := StringInput(run.Inputs, "model")
	model, err := models.Model(name)
	if err != nil {
		return "", err
	}
	resp, err := model.Complete(ctx, llm.Request{Model: name, Tools: []llm.Tool{tool},
		Messages: Messages(system, run.Chat.History, IntInput(run.Inputs, "history"), question)}, nil)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", name, err)
	}
	run.Count(resp.Usage)
	for _, c := range resp.Message.ToolCalls {
		if c.Function.Name == tool.Function.Name {
			return c.Function.Arguments, nil
		}
	}
	return "", fmt.Errorf("model %s answered without calling %s (it said: %q); a model with tool calls is needed here", name, tool.Function.Name, clip(resp.Message.Content, 200))
}

package chat

import (
	"encoding/json"

	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/nodes/runapp"
	"github.com/flowbox/flowbox/nodes/toolcall"
	"github.com/flowbox/flowbox/sandbox/redact"
)

// redactText redacts a text the chat shows (nil: as it is).
func redactText(r *redact.Redactor, text string) string {
	if r == nil {
		return text
	}
	out, _ := r.Redact(text)
	return out
}

// redactResult redacts what a run's result keeps of the model's side: the
// answer, the commands of its tool calls (those of the apps it called
// too), and the questions of interactive nodes (a description may quote
// a model's answer).
func redactResult(r *redact.Redactor, res *nodes.Result) {
	if r == nil {
		return
	}
	res.Answer, _ = r.Redact(res.Answer)
	redactResponses(r, res.Responses)
}

func redactResponses(r *redact.Redactor, responses []nodes.NodeResponse) {
	for _, resp := range responses {
		switch d := resp.Detail.(type) {
		case *nodes.InteractiveDetail:
			d.Request.Description = redactText(r, d.Request.Description)
		case toolcall.Detail:
			for i := range d.ToolCalls { // shared with resp.Detail's slice
				d.ToolCalls[i].Arguments = redactArgs(r, d.ToolCalls[i].Arguments)
				if ap := d.ToolCalls[i].Approval; ap != nil {
					ap.Command, ap.Edited = redactText(r, ap.Command), redactText(r, ap.Edited)
				}
			}
		case runapp.Detail:
			redactResponses(r, d.Responses)
		}
	}
}

// redactArgs redacts a tool call's JSON arguments value by value, so that
// a marker never breaks the JSON; arguments that are not a JSON object
// are redacted as text.
func redactArgs(r *redact.Redactor, args string) string {
	if r == nil {
		return args
	}
	var obj map[string]any
	if json.Unmarshal([]byte(args), &obj) != nil {
		out, _ := r.Redact(args)
		return out
	}
	changed := false
	for k, v := range obj {
		if str, ok := v.(string); ok {
			if red, findings := r.Redact(str); len(findings) > 0 {
				obj[k], changed = red, true
			}
		}
	}
	if !changed {
		return args
	}
	b, err := json.Marshal(obj)
	if err != nil {
		out, _ := r.Redact(args)
		return out
	}
	return string(b)
}

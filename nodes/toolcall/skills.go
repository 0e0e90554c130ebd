package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/flowbox/flowbox/internal/llm"
	"github.com/flowbox/flowbox/nodes"
	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/sandbox"
)

// Workspace describes a chat's uploaded and intermediate files to the
// model (K3), read on the host: it never starts the sandbox.
type Workspace interface {
	// Summary lists the first files of the chat's uploads and
	// intermediate directories as the sandbox sees them, with sizes and
	// a count of the rest; "" when there are none.
	Summary(ctx context.Context, scope sandbox.Scope) (string, error)
}

// Skill is an installed skill as the model learns of it.
type Skill struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Files       []string `json:"files,omitempty"`
}

// Skills are the installed skills (K4), read on the host.
type Skills interface {
	// List returns the valid installed skills.
	List(ctx context.Context) ([]Skill, error)
	// Body is a skill's SKILL.md without its front matter.
	Body(ctx context.Context, name string) (Skill, string, error)
	// Resource is one of a skill's files (a name from its file list),
	// bounded in size.
	Resource(ctx context.Context, name, file string) ([]byte, error)
	// Script is the path inside the sandbox of one of a skill's scripts.
	Script(ctx context.Context, name, script string) (string, error)
}

// The skill tools' names (K4).
const (
	ListSkillsTool     = "list_skills"
	LoadSkillTool      = "load_skill"
	ReadSkillFileTool  = "read_skill_resource"
	RunSkillScriptTool = "execute_skill_script"
)

// statusSuccess is a call that did what it was asked.
const statusSuccess = "success"

// MaxScriptTimeout bounds execute_skill_script's timeout.
const MaxScriptTimeout = 300 * time.Second

var skillTools = []llm.Tool{
	{Type: "function", Function: llm.FunctionDef{Name: ListSkillsTool,
		Description: "List the skills you may use: their names and what each is for.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{}}`)}},
	{Type: "function", Function: llm.FunctionDef{Name: LoadSkillTool,
		Description: "Load a skill's instructions (its SKILL.md) and the list of its files. Load a skill before you use it.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The skill's name"}},"required":["name"]}`)}},
	{Type: "function", Function: llm.FunctionDef{Name: ReadSkillFileTool,
		Description: "Read one of a skill's files (a reference, a template), by its path as load_skill lists it.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The skill's name"},` +
			`"path":{"type":"string","description":"The file's path in the skill, e.g. references/format.md"}},"required":["name","path"]}`)}},
}

var runSkillScript = llm.Tool{Type: "function", Function: llm.FunctionDef{Name: RunSkillScriptTool,
	Description: "Run one of a skill's scripts in your sandbox, in /workspace/intermediate (write results there). Arguments are passed as they are, one per element, never through a shell.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The skill's name"},` +
		`"script":{"type":"string","description":"The script's path in the skill, e.g. scripts/analyze.py"},` +
		`"args":{"type":"array","items":{"type":"string"},"description":"The script's arguments"},` +
		`"timeout":{"type":"number","minimum":1,"maximum":300,"description":"Timeout in seconds (1-300, default 60)"}},"required":["name","script"]}`)}}

// allowedSkills are the skills the node's "skills" input names.
func allowedSkills(in map[string]any) []string {
	raw, _ := in["skills"].([]any)
	var names []string
	for _, v := range raw {
		if s, ok := v.(string); ok && s != "" {
			names = append(names, s)
		}
	}
	return names
}

// skillTools are the tools the node offers for its skills: the readers,
// and the script runner when the sandbox is on.
func (n *Node) skillTools(allowed []string, useSandbox bool) []llm.Tool {
	if n.cfg.Skills == nil || len(allowed) == 0 {
		return nil
	}
	tools := slices.Clone(skillTools)
	if useSandbox {
		tools = append(tools, runSkillScript)
	}
	return tools
}

// workspacePrompt tells the model where the chat's files are and what is
// there now, and which skills it has: built every turn from the host,
// without starting the sandbox.
func (n *Node) workspacePrompt(ctx context.Context, scope sandbox.Scope, allowed []string, useSandbox bool) string {
	var b strings.Builder
	if useSandbox && n.cfg.Workspace != nil {
		fmt.Fprintf(&b, "- The user's uploaded files are in %s; write results and intermediate files to %s, where the user can download them; %s is read-only\n",
			sandbox.UploadsDir, sandbox.IntermediateDir, sandbox.SkillsDir)
		if s, err := n.cfg.Workspace.Summary(ctx, scope); err == nil && s != "" {
			b.WriteString(s)
			if !strings.HasSuffix(s, "\n") {
				b.WriteString("\n")
			}
		}
	}
	if skills := n.usableSkills(ctx, allowed); len(skills) > 0 {
		b.WriteString("\nSkills you may use (load one with load_skill before you use it):\n")
		for _, s := range skills {
			fmt.Fprintf(&b, "- %s: %s\n", s.Name, s.Description)
		}
	}
	return b.String()
}

// usableSkills are the installed skills among those allowed.
func (n *Node) usableSkills(ctx context.Context, allowed []string) []Skill {
	if n.cfg.Skills == nil || len(allowed) == 0 {
		return nil
	}
	all, err := n.cfg.Skills.List(ctx)
	if err != nil {
		return nil
	}
	var out []Skill
	for _, s := range all {
		if slices.Contains(allowed, s.Name) {
			out = append(out, Skill{Name: s.Name, Description: s.Description})
		}
	}
	return out
}

// skillTool runs one of the skill tools; execute_skill_script goes to the
// sandbox like a command, through the policy and the audit.
func (n *Node) skillTool(ctx context.Context, run *nodes.NodeRun, tc llm.ToolCall, tr toolRun) (resp any, status string, ask *askedCommand, unavailable error) {
	allowed := allowedSkills(run.Inputs)
	args := tc.Function.Arguments
	if !gjson.Valid(args) {
		return toolError("the arguments are not a JSON object; call it like " + skillExample(tc.Function.Name)), "error", nil, nil
	}
	name := gjson.Get(args, "name").String()
	if tc.Function.Name != ListSkillsTool && !slices.Contains(allowed, name) {
		return toolError(fmt.Sprintf("no skill %q for you; list_skills lists those you may use", name)), "error", nil, nil
	}
	switch tc.Function.Name {
	case ListSkillsTool:
		return map[string]any{"skills": n.usableSkills(ctx, allowed)}, statusSuccess, nil, nil
	case LoadSkillTool:
		s, body, err := n.cfg.Skills.Body(ctx, name)
		if err != nil {
			return toolError(err.Error()), "error", nil, nil
		}
		return map[string]any{"name": s.Name, "description": s.Description, "instructions": body, "files": s.Files,
			"location": path.Join(sandbox.SkillsDir, s.Name)}, statusSuccess, nil, nil
	case ReadSkillFileTool:
		file := gjson.Get(args, "path").String()
		b, err := n.cfg.Skills.Resource(ctx, name, file)
		if err != nil {
			return toolError(err.Error()), "error", nil, nil
		}
		if !utf8.Valid(b) {
			return toolError(fmt.Sprintf("%s is not text; use it from the sandbox at %s", file, path.Join(sandbox.SkillsDir, name, file))), "error", nil, nil
		}
		return map[string]any{"name": name, "path": file, "content": string(b)}, statusSuccess, nil, nil
	case RunSkillScriptTool:
		cmd, timeout, clamped, problem := n.scriptCommand(ctx, name, args)
		if problem != "" {
			return toolError(problem), "error", nil, nil
		}
		return n.command(ctx, run, tc, tr, ShellArgs{Command: cmd, Timeout: timeout, Clamped: clamped})
	}
	return toolError("unknown skill tool " + tc.Function.Name), "error", nil, nil
}

func skillExample(tool string) string {
	switch tool {
	case LoadSkillTool:
		return `{"name": "csv-analyzer"}`
	case ReadSkillFileTool:
		return `{"name": "csv-analyzer", "path": "references/format.md"}`
	case RunSkillScriptTool:
		return `{"name": "csv-analyzer", "script": "scripts/analyze.py", "args": ["/workspace/uploads/data.csv"]}`
	}
	return `{}`
}

// scriptCommand is the command line that runs a skill's script with the
// model's arguments: every word quoted by the shell parser's own quoting,
// so an argument is always one argument and never shell syntax, in a
// subshell so the chat's working directory stays where it was.
func (n *Node) scriptCommand(ctx context.Context, name, args string) (cmd string, timeout time.Duration, clamped bool, problem string) {
	script := gjson.Get(args, "script").String()
	if script == "" {
		return "", 0, false, "script is required; call it like " + skillExample(RunSkillScriptTool)
	}
	inSandbox, err := n.cfg.Skills.Script(ctx, name, script)
	if err != nil {
		return "", 0, false, err.Error()
	}
	var argv []string
	for _, a := range gjson.Get(args, "args").Array() {
		if a.Type != gjson.String {
			return "", 0, false, "args must be an array of strings; call it like " + skillExample(RunSkillScriptTool)
		}
		argv = append(argv, a.String())
	}
	if cmd, err = registry.ScriptCommand(inSandbox, argv); err != nil {
		return "", 0, false, err.Error()
	}
	timeout = 60 * time.Second
	if t := gjson.Get(args, "timeout"); t.Exists() {
		secs := t.Float()
		switch {
		case secs < 1:
			timeout, clamped = time.Second, true
		case secs > MaxScriptTimeout.Seconds():
			timeout, clamped = MaxScriptTimeout, true
		default:
			timeout = time.Duration(secs * float64(time.Second))
		}
	}
	return cmd, timeout, clamped, ""
}

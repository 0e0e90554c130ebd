package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/sandbox"
	"github.com/flowbox/flowbox/sandbox/skills"
)

// Skills is the "skill" backend: the installed skills (K4), read on the
// host, their scripts run in the session's sandbox. The catalog is shared
// by every session.
type Skills struct {
	Catalog   *skills.Catalog
	Sandboxes Sandboxes
}

func (Skills) Prefix() string { return "skill" }

const skillName = `"name":{"type":"string","minLength":1,"description":"The skill's name, as list_skills gives it"}`

// The skill tools, without their Run: what callers are told of them.
var (
	SkillListTool = Tool{Name: "skill:list", ModelName: ListSkillsName, ReadOnly: true, ConcurrencySafe: true,
		Description: "List the skills you may use: their names and what each is for.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), Example: `{}`}
	SkillLoadTool = Tool{Name: "skill:load", ModelName: LoadSkillName, ReadOnly: true, ConcurrencySafe: true,
		Description: "Load a skill's instructions (its SKILL.md) and the list of its files. Load a skill before you use it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `},"required":["name"]}`),
		Example:     `{"name": "csv-analyzer"}`}
	SkillReadTool = Tool{Name: "skill:read", ModelName: ReadSkillFileName, ReadOnly: true, ConcurrencySafe: true,
		Description: "Read one of a skill's files (a reference, a template), by its path as load_skill lists it.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `,` +
			`"path":{"type":"string","minLength":1,"description":"The file's path in the skill, e.g. references/format.md"}},` +
			`"required":["name","path"]}`),
		Example: `{"name": "csv-analyzer", "path": "references/format.md"}`}
	SkillRunTool = Tool{Name: "skill:run", ModelName: RunSkillScriptName, ReadParams: readRunParams, Fail: commandFailed,
		Description: "Run one of a skill's scripts in your sandbox, in /workspace/intermediate (write results there). " +
			"Arguments are passed as they are, one per element, never through a shell.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `,` +
			`"script":{"type":"string","minLength":1,"description":"The script's path in the skill, e.g. scripts/analyze.py"},` +
			`"args":{"type":"array","items":{"type":"string"},"description":"The script's arguments"},` +
			`"timeout":{"type":"number","minimum":1,"maximum":300,"description":"Timeout in seconds (1-300, default 30)"}},` +
			`"required":["name","script"]}`),
		Example: skillRunExample}
)

func (s Skills) Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	list, load, read, run := SkillListTool, SkillLoadTool, SkillReadTool, SkillRunTool
	list.Run, load.Run, read.Run, run.Run = s.list, s.load, s.read, s.run
	return []Tool{list, load, read, run}, nil
}

type skillParams struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// SkillInfo is a skill as list_skills and load_skill give it.
type SkillInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Files       []string `json:"files,omitempty"`
	// Body is its SKILL.md without the front matter: its instructions
	// (load_skill).
	Body string `json:"body,omitempty"`
	// Location is where the skill is in the sandbox (load_skill).
	Location string `json:"location,omitempty"`
}

// SkillList is list_skills' result.
type SkillList struct {
	Skills []SkillInfo `json:"skills"`
}

func (s Skills) list(ctx context.Context, call Call) (Result, error) {
	list, _, err := s.Catalog.List(ctx)
	if err != nil {
		return Result{}, err
	}
	out := SkillList{Skills: []SkillInfo{}}
	for _, sk := range list {
		if call.Skills == nil || slices.Contains(call.Skills, sk.Name) {
			out.Skills = append(out.Skills, SkillInfo{Name: sk.Name, Description: sk.Description, Files: sk.Files})
		}
	}
	text, _ := json.Marshal(out.Skills)
	return Result{Output: out, Text: string(text)}, nil
}

// allowed is a failed result when the caller may not use the skill.
func allowed(call Call, name string) (Result, bool) {
	if call.Skills == nil || slices.Contains(call.Skills, name) {
		return Result{}, true
	}
	return failure(fmt.Sprintf("no skill %q for you; %s lists those you may use", name, ListSkillsName)), false
}

func (s Skills) load(ctx context.Context, call Call) (Result, error) {
	var p skillParams
	_ = json.Unmarshal(call.Params, &p)
	if r, ok := allowed(call, p.Name); !ok {
		return r, nil
	}
	sk, err := s.Catalog.Get(ctx, p.Name)
	if err != nil {
		return skillFailure(err)
	}
	body, err := s.Catalog.Body(ctx, p.Name)
	if err != nil {
		return skillFailure(err)
	}
	out := SkillInfo{Name: sk.Name, Description: sk.Description, Files: sk.Files, Body: body,
		Location: path.Join(sandbox.SkillsDir, sk.Name)}
	return Result{Output: out, Text: body}, nil
}

// SkillFile is read_skill_resource's result.
type SkillFile struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (s Skills) read(ctx context.Context, call Call) (Result, error) {
	var p skillParams
	_ = json.Unmarshal(call.Params, &p)
	if r, ok := allowed(call, p.Name); !ok {
		return r, nil
	}
	b, err := s.Catalog.ReadResource(ctx, p.Name, p.Path)
	if err != nil {
		return skillFailure(err)
	}
	if !utf8.Valid(b) {
		return failure(fmt.Sprintf("%s is not text; use it from the sandbox at %s", p.Path, path.Join(sandbox.SkillsDir, p.Name, p.Path))), nil
	}
	return Result{Output: SkillFile{Name: p.Name, Path: p.Path, Content: string(b)}, Text: string(b)}, nil
}

const skillRunExample = `{"name": "csv-analyzer", "script": "scripts/analyze.py", "args": ["/workspace/uploads/data.csv"]}`

// runParams are skill:run's params as the script will run.
type runParams struct {
	name, script string
	args         []string
	timeout      ShellArgs
}

// parseRunParams reads skill:run's params leniently, like shell:exec's.
func parseRunParams(params json.RawMessage) (runParams, error) {
	args := string(params)
	bad := func(problem string) (runParams, error) {
		return runParams{}, &ParamsError{Tool: "skill:run", Problem: problem, Example: skillRunExample}
	}
	if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
		return bad("they are not a JSON object")
	}
	p := runParams{name: gjson.Get(args, "name").String(), script: gjson.Get(args, "script").String()}
	switch {
	case p.name == "":
		return bad("name is required")
	case p.script == "":
		return bad("script is required")
	}
	for _, a := range gjson.Get(args, "args").Array() {
		if a.Type != gjson.String {
			return bad("args must be an array of strings")
		}
		p.args = append(p.args, a.String())
	}
	timeout, clamped, problem := timeoutParam(args)
	if problem != "" {
		return bad(problem)
	}
	p.timeout = ShellArgs{Timeout: timeout, Clamped: clamped}
	return p, nil
}

func readRunParams(params json.RawMessage) error {
	_, err := parseRunParams(params)
	return err
}

func (s Skills) run(ctx context.Context, call Call) (Result, error) {
	p, err := parseRunParams(call.Params)
	if err != nil {
		return Result{}, err
	}
	if r, ok := allowed(call, p.name); !ok {
		return r, nil
	}
	inSandbox, err := s.Catalog.ScriptPath(ctx, p.name, p.script)
	if err != nil {
		return skillFailure(err)
	}
	cmd, err := ScriptCommand(inSandbox, p.args)
	if err != nil {
		return Result{}, &ParamsError{Tool: SkillRunTool.Name, Problem: err.Error(), Example: SkillRunTool.Example}
	}
	if call.Actor.Tool == "" {
		call.Actor.Tool = SkillRunTool.Name
	}
	args := p.timeout
	args.Command = cmd
	return RunCommand(ctx, s.Sandboxes, call, args)
}

// failure is a call that was wrong (a skill that is not there, a file
// that is not text): a result the caller reads, nothing ran.
func failure(msg string) Result {
	return Result{IsError: true, Status: StatusError, Text: msg}
}

// skillFailure makes a missing skill or file a failed result.
func skillFailure(err error) (Result, error) {
	if errors.Is(err, skills.ErrNotFound) || errors.Is(err, skills.ErrInvalid) ||
		errors.Is(err, skills.ErrInvalidPath) || errors.Is(err, skills.ErrTooLarge) {
		return failure(err.Error()), nil
	}
	return Result{}, err
}

// ScriptCommand is the command line that runs a skill's script (its path
// inside the sandbox) with args: every word quoted by the shell parser's
// own quoting, so an argument is always one argument and never shell
// syntax, in a subshell in /workspace/intermediate so the session's
// working directory stays where it was.
func ScriptCommand(inSandbox string, args []string) (string, error) {
	argv := []string{inSandbox}
	switch path.Ext(inSandbox) {
	case ".py":
		argv = []string{"python3", inSandbox}
	case ".sh":
		argv = []string{"bash", inSandbox}
	}
	argv = append(argv, args...)
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return "", fmt.Errorf("argument %d cannot be passed to a program (%v)", i, err)
		}
		words[i] = q
	}
	dir, _ := syntax.Quote(sandbox.IntermediateDir, syntax.LangBash)
	return "(cd " + dir + " && exec " + strings.Join(words, " ") + ")", nil
}

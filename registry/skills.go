package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

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

const skillName = `"name":{"type":"string","minLength":1,"description":"The skill's name, as skill:list gives it"}`

var (
	skillList = Tool{Name: "skill:list", ReadOnly: true, ConcurrencySafe: true,
		Description: "List the installed skills: their names and what each is for.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
	skillLoad = Tool{Name: "skill:load", ReadOnly: true, ConcurrencySafe: true,
		Description: "Load a skill's instructions (its SKILL.md without the front matter) and the list of its files.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `},"required":["name"],"additionalProperties":false}`)}
	skillRead = Tool{Name: "skill:read", ReadOnly: true, ConcurrencySafe: true,
		Description: "Read one of a skill's text files (a reference, a template) by its path in the skill.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `,` +
			`"path":{"type":"string","minLength":1,"description":"The file's path in the skill, e.g. references/format.md"}},` +
			`"required":["name","path"],"additionalProperties":false}`)}
	skillRun = Tool{Name: "skill:run",
		Description: "Run one of a skill's scripts in the sandbox, in /workspace/intermediate; each argument is passed as it is, never through a shell.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` + skillName + `,` +
			`"script":{"type":"string","minLength":1,"description":"The script's path in the skill, e.g. scripts/analyze.py"},` +
			`"args":{"type":"array","items":{"type":"string"},"description":"The script's arguments"},` +
			`"timeoutSeconds":{"type":"integer","minimum":1,"maximum":300,"description":"Timeout in seconds (default 60)"}},` +
			`"required":["name","script"],"additionalProperties":false}`)}
)

func (s Skills) Tools(ctx context.Context, scope sandbox.Scope) ([]Tool, error) {
	list, load, read, run := skillList, skillLoad, skillRead, skillRun
	list.Run, load.Run, read.Run, run.Run = s.list, s.load, s.read, s.run
	return []Tool{list, load, read, run}, nil
}

type skillParams struct {
	Name           string   `json:"name"`
	Path           string   `json:"path"`
	Script         string   `json:"script"`
	Args           []string `json:"args"`
	TimeoutSeconds int      `json:"timeoutSeconds"`
}

// SkillInfo is a skill as skill:list and skill:load give it.
type SkillInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Files       []string `json:"files,omitempty"`
	Body        string   `json:"body,omitempty"`
}

func (s Skills) list(ctx context.Context, call Call) (Result, error) {
	list, _, err := s.Catalog.List(ctx)
	if err != nil {
		return Result{}, err
	}
	out := make([]SkillInfo, len(list))
	for i, sk := range list {
		out[i] = SkillInfo{Name: sk.Name, Description: sk.Description, Files: sk.Files}
	}
	text, _ := json.Marshal(out)
	return Result{Output: map[string]any{"skills": out}, Text: string(text)}, nil
}

func (s Skills) load(ctx context.Context, call Call) (Result, error) {
	var p skillParams
	_ = json.Unmarshal(call.Params, &p)
	sk, err := s.Catalog.Get(ctx, p.Name)
	if err != nil {
		return skillFailure(err)
	}
	body, err := s.Catalog.Body(ctx, p.Name)
	if err != nil {
		return skillFailure(err)
	}
	return Result{Output: SkillInfo{Name: sk.Name, Description: sk.Description, Files: sk.Files, Body: body}, Text: body}, nil
}

func (s Skills) read(ctx context.Context, call Call) (Result, error) {
	var p skillParams
	_ = json.Unmarshal(call.Params, &p)
	b, err := s.Catalog.ReadResource(ctx, p.Name, p.Path)
	if err != nil {
		return skillFailure(err)
	}
	if !utf8.Valid(b) {
		return Result{IsError: true, Status: "failed", Text: fmt.Sprintf("%s is not text; use it from the sandbox at %s",
			p.Path, path.Join(sandbox.SkillsDir, p.Name, p.Path))}, nil
	}
	return Result{Output: map[string]any{"name": p.Name, "path": p.Path, "content": string(b)}, Text: string(b)}, nil
}

func (s Skills) run(ctx context.Context, call Call) (Result, error) {
	var p skillParams
	_ = json.Unmarshal(call.Params, &p)
	inSandbox, err := s.Catalog.ScriptPath(ctx, p.Name, p.Script)
	if err != nil {
		return skillFailure(err)
	}
	cmd, err := ScriptCommand(inSandbox, p.Args)
	if err != nil {
		return Result{}, &ParamsError{Tool: "skill:run", Problem: err.Error()}
	}
	call.Actor.Tool = "skill:run"
	return RunCommand(ctx, s.Sandboxes, call, cmd, time.Duration(p.TimeoutSeconds)*time.Second)
}

// skillFailure makes a missing skill or file a failed result.
func skillFailure(err error) (Result, error) {
	if errors.Is(err, skills.ErrNotFound) || errors.Is(err, skills.ErrInvalid) ||
		errors.Is(err, skills.ErrInvalidPath) || errors.Is(err, skills.ErrTooLarge) {
		return Result{IsError: true, Status: "failed", Text: err.Error()}, nil
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

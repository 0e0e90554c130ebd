package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flowbox/flowbox/schemas"
)

// Decision is what a rule, or the policy as a whole, says about a command.
// Forbid is stricter than Ask, Ask stricter than Allow.
type Decision string

const (
	Allow  Decision = "allow"
	Ask    Decision = "ask"
	Forbid Decision = "forbid"
)

func (d Decision) rank() int {
	switch d {
	case Forbid:
		return 2
	case Ask:
		return 1
	}
	return 0
}

// Mode says what runs when no rule matches.
type Mode string

const (
	// Denylist (the default, also for ""): everything runs except what a
	// forbid or ask rule matches.
	Denylist Mode = "denylist"
	// Allowlist: only what an allow rule matches runs, and a command whose
	// name cannot be known before it runs is refused.
	Allowlist Mode = "allowlist"
)

// Check names a structural check a rule can ask for (Rule.Check).
type Check string

// CheckForkBomb matches a function that runs itself in a pipeline or in
// the background.
const CheckForkBomb Check = "fork-bomb"

// Policy is the data a command is judged by; its JSON form is
// schemas/policy.schema.json. The zero value is a denylist with the
// built-in rules and no limits.
type Policy struct {
	Mode Mode `json:"mode,omitempty"`
	// UseBuiltinDenylist: nil means true.
	UseBuiltinDenylist *bool  `json:"useBuiltinDenylist,omitempty"`
	Rules              []Rule `json:"rules,omitempty"`
	Limits             Limits `json:"limits,omitzero"`
	// Egress, in an app's policy, narrows the operator's egress allowlist
	// (FLOWBOX_SANDBOX_EGRESS) for the app's sandboxes: only the patterns
	// the operator's list covers are kept, and an empty list turns egress
	// off. nil keeps the operator's list. Carried as it is: the sandbox
	// manager narrows it.
	Egress []string `json:"egress,omitempty"`
	// DestructiveTools is what becomes of a call of a tool marked
	// destructive (an exec tool's "destructive", an MCP tool its server
	// does not mark read-only): allow (the default), ask a person, or
	// forbid. Commands are judged by the rules; this judges the tool.
	DestructiveTools Decision `json:"destructiveTools,omitempty"`
	// Redaction is the output redaction of the same operator or app
	// (package sandbox/redact's Config), carried as it is: this package
	// neither reads nor merges it.
	Redaction json.RawMessage `json:"redaction,omitempty"`
	// Terminal is what the audit keeps of web terminal sessions (L1),
	// which no rule judges.
	Terminal TerminalAudit `json:"terminal,omitzero"`
}

// TerminalAudit: with Transcript, each terminal session's audit record
// keeps what the terminal showed (the echo of what was typed included),
// redacted as the app's command output is, up to MaxTranscript bytes. An
// app may ask for it where the operator does not; it cannot turn the
// operator's off.
type TerminalAudit struct {
	Transcript bool `json:"transcript,omitempty"`
}

// MaxTranscript bounds a terminal session's transcript: its first bytes.
const MaxTranscript = 1 << 20

// Rule matches simple commands. All of its set matchers must match.
type Rule struct {
	ID string `json:"id"`
	// Command: globs of the program's name (no slash: its base name, run
	// by name or from a system directory) or cleaned path (with a slash).
	Command Globs      `json:"command,omitempty"`
	Args    []ArgMatch `json:"args,omitempty"`
	// Redirect: the command's output goes to a matching file.
	Redirect Globs `json:"redirect,omitempty"`
	// FedBy: the command reads the output of a matching command.
	FedBy Globs `json:"fedBy,omitempty"`
	Check Check `json:"check,omitempty"`
	// WhenMode limits the rule to one mode.
	WhenMode      Mode     `json:"whenMode,omitempty"`
	Decision      Decision `json:"decision"`
	Justification string   `json:"justification"`
}

// ArgMatch matches when some argument does: exactly one of Equals, Prefix,
// Glob and Option is set.
type ArgMatch struct {
	Equals Globs `json:"equals,omitempty"`
	Prefix Globs `json:"prefix,omitempty"`
	Glob   Globs `json:"glob,omitempty"`
	Option Globs `json:"option,omitempty"`
	// Position, when set, compares only argv[Position].
	Position   int  `json:"position,omitempty"`
	IgnoreCase bool `json:"ignoreCase,omitempty"`
}

// Globs is one string or a list of them; JSON accepts either form.
type Globs []string

func (g *Globs) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*g = Globs{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("want a string or a list of strings")
	}
	*g = many
	return nil
}

func (g Globs) MarshalJSON() ([]byte, error) {
	if len(g) == 1 {
		return json.Marshal(g[0])
	}
	return json.Marshal([]string(g))
}

// Limits bound what commands may use; zero means no bound from this
// policy.
type Limits struct {
	TimeoutSeconds   int     `json:"timeoutSeconds,omitempty"`
	MemoryMiB        int64   `json:"memoryMiB,omitempty"`
	CPUs             float64 `json:"cpus,omitempty"`
	Pids             int64   `json:"pids,omitempty"`
	OutputBytes      int64   `json:"outputBytes,omitempty"`
	ToolCallsPerRun  int     `json:"toolCallsPerRun,omitempty"`
	ToolCallsPerChat int     `json:"toolCallsPerChat,omitempty"`
}

func (p Policy) mode() Mode {
	if p.Mode == Allowlist {
		return Allowlist
	}
	return Denylist
}

func (p Policy) builtin() bool { return p.UseBuiltinDenylist == nil || *p.UseBuiltinDenylist }

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

func compiledSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		data, err := fs.ReadFile(schemas.FS, "policy.schema.json")
		if err != nil {
			schemaErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			schemaErr = fmt.Errorf("policy schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("flowbox/policy", doc); err != nil {
			schemaErr = fmt.Errorf("policy schema: %w", err)
			return
		}
		schema, schemaErr = c.Compile("flowbox/policy")
	})
	return schema, schemaErr
}

// Parse reads a policy from JSON, checked against
// schemas/policy.schema.json. The error names every field at fault
// ("rules/0/decision: value must be one of ...").
func Parse(data []byte) (Policy, error) {
	sch, err := compiledSchema()
	if err != nil {
		return Policy{}, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return Policy{}, fmt.Errorf("policy: not JSON: %w", err)
	}
	if err := sch.Validate(doc); err != nil {
		return Policy{}, fmt.Errorf("policy: %s", schemas.Problems(err))
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// ForDestructiveTools is the decision for a call of a destructive tool.
func (p Policy) ForDestructiveTools() Decision {
	if p.DestructiveTools == "" {
		return Allow
	}
	return p.DestructiveTools
}

// strictness orders decisions from the loosest.
func strictness(d Decision) int { return slices.Index([]Decision{Allow, Ask, Forbid}, d) }

// Validate checks what the schema cannot: unique rule ids, globs that
// parse, and options that look like options. Policies built in Go should
// be validated before use; Parse does it.
func (p Policy) Validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch p.Mode {
	case "", Denylist, Allowlist:
	default:
		bad("mode: %q is neither %q nor %q", p.Mode, Denylist, Allowlist)
	}
	switch p.DestructiveTools {
	case "", Allow, Ask, Forbid:
	default:
		bad("destructiveTools: %q is not allow, ask or forbid", p.DestructiveTools)
	}
	ids := map[string]bool{}
	for i, r := range p.Rules {
		where := fmt.Sprintf("rules[%d] (%q)", i, r.ID)
		if r.ID == "" {
			bad("rules[%d]: id is empty", i)
		} else if ids[r.ID] {
			bad("%s: id is used twice", where)
		}
		ids[r.ID] = true
		switch r.Decision {
		case Allow, Ask, Forbid:
		default:
			bad("%s: decision %q is not allow, ask or forbid", where, r.Decision)
		}
		if len(r.Command) == 0 && r.Check == "" {
			bad("%s: command is empty", where)
		}
		if r.Check != "" && r.Check != CheckForkBomb {
			bad("%s: check %q is unknown", where, r.Check)
		}
		if strings.TrimSpace(r.Justification) == "" {
			bad("%s: justification is empty", where)
		}
		for _, g := range append(append(append(Globs{}, r.Command...), r.Redirect...), r.FedBy...) {
			if !validGlob(g) {
				bad("%s: glob %q is malformed", where, g)
			}
		}
		for j, a := range r.Args {
			n := 0
			for _, set := range []Globs{a.Equals, a.Prefix, a.Glob, a.Option} {
				if len(set) > 0 {
					n++
				}
			}
			if n != 1 {
				bad("%s: args[%d] needs exactly one of equals, prefix, glob, option", where, j)
			}
			for _, g := range a.Glob {
				if !validGlob(g) {
					bad("%s: args[%d]: glob %q is malformed", where, j, g)
				}
			}
			for _, o := range a.Option {
				if len(o) < 2 || o[0] != '-' || o == "--" {
					bad("%s: args[%d]: option %q must start with - or --", where, j, o)
				}
			}
			if a.Position < 0 {
				bad("%s: args[%d]: position must be 1 or more", where, j)
			}
		}
	}
	l := p.Limits
	if l.TimeoutSeconds < 0 || l.MemoryMiB < 0 || l.CPUs < 0 || l.Pids < 0 || l.OutputBytes < 0 || l.ToolCallsPerRun < 0 || l.ToolCallsPerChat < 0 {
		bad("limits: no limit may be negative")
	}
	if len(problems) > 0 {
		return errors.New("policy: " + strings.Join(problems, "; "))
	}
	return nil
}

// AllowedCommands lists the command globs the policy's allow rules name,
// sorted and without repeats: what an allowlist lets run.
func (p Policy) AllowedCommands() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range p.Rules {
		if r.Decision != Allow || (r.WhenMode != "" && r.WhenMode != p.mode()) {
			continue
		}
		for _, c := range r.Command {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sortStrings(out)
	return out
}

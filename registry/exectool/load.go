package exectool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"mvdan.cc/sh/v3/syntax"

	"github.com/flowbox/flowbox/registry"
	"github.com/flowbox/flowbox/schemas"
)

// declaration is one tool as its file declares it
// (schemas/exectool.schema.json).
type declaration struct {
	Comment         string          `json:"$comment"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	InputSchema     json.RawMessage `json:"input_schema"`
	Exec            []string        `json:"exec"`
	TimeoutSeconds  int             `json:"timeout_seconds"`
	RunIn           RunIn           `json:"runIn"`
	ReadOnly        bool            `json:"readOnly"`
	Destructive     bool            `json:"destructive"`
	ConcurrencySafe bool            `json:"concurrencySafe"`
	PermissionClass string          `json:"permissionClass"`
	AuditOperation  string          `json:"auditOperation"`
}

// reserved are the model names of the engine's own tools, which an exec
// tool would shadow. The schema lists them too.
var reserved = []string{registry.ShellModelName, registry.ListSkillsName, registry.LoadSkillName, registry.ReadSkillFileName, registry.RunSkillScriptName}

// Reserved reports whether name is taken by one of the engine's own
// tools.
func Reserved(name string) bool { return slices.Contains(reserved, name) }

// defaultInputSchema is the schema of a tool that declares none: an
// object, whatever it holds.
var defaultInputSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Load reads the tool declarations of files, each one object or an array
// of them. An error names the file, the declaration's index in an array,
// the field and what is wrong with it ("tools.json[2]: exec: must have at
// least one element"); nothing is loaded then. Names must be unique
// across the files. Programs are not looked for: one installed later
// works, one missing is the call's error.
func Load(files ...string) ([]*Tool, error) {
	var tools []*Tool
	where := map[string]string{} // name → its declaration's source
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("exec tools: %w", err)
		}
		ts, err := parse(f, data)
		if err != nil {
			return nil, fmt.Errorf("exec tools: %w", err)
		}
		for _, t := range ts {
			if prev, dup := where[t.decl.Name]; dup {
				return nil, fmt.Errorf("exec tools: %s: name: %q is declared at %s already; rename one of them", t.source, t.decl.Name, prev)
			}
			where[t.decl.Name] = t.source
		}
		tools = append(tools, ts...)
	}
	return tools, nil
}

// parse reads the declarations of one file.
func parse(file string, data []byte) ([]*Tool, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not JSON: %w", file, err)
	}
	var raws []json.RawMessage
	single := false
	switch v := doc.(type) {
	case map[string]any:
		raws, single = []json.RawMessage{data}, true
	case []any:
		if len(v) == 0 {
			return nil, fmt.Errorf("%s: the array declares no tool; remove the file or declare one", file)
		}
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	default:
		return nil, fmt.Errorf("%s: want a tool declaration (a JSON object) or an array of them, got %s", file, jsonType(doc))
	}
	sch, err := toolSchema()
	if err != nil {
		return nil, err
	}
	tools := make([]*Tool, 0, len(raws))
	for i, raw := range raws {
		source := fmt.Sprintf("%s[%d]", file, i)
		if single {
			source = file
		}
		el, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: not JSON: %w", source, err)
		}
		if err := sch.Validate(el); err != nil {
			return nil, fmt.Errorf("%s: %s", source, problems(err, "", declarationWords))
		}
		t, err := build(file, source, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// build makes a tool of a declaration the schema accepted, checking what
// the schema cannot.
func build(file, source string, raw json.RawMessage) (*Tool, error) {
	var d declaration
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	if Reserved(d.Name) {
		return nil, fmt.Errorf("name: %q is one of the engine's own tools; choose another name", d.Name)
	}
	t := &Tool{decl: d, source: source, argv: slices.Clone(d.Exec), input: defaultInputSchema}
	if len(d.InputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(d.InputSchema), []byte("null")) {
		var b bytes.Buffer
		if err := json.Compact(&b, d.InputSchema); err != nil {
			return nil, fmt.Errorf("input_schema: %w", err)
		}
		t.input = b.Bytes()
	}
	sch, err := compileInput(d.Name, t.input)
	if err != nil {
		return nil, err
	}
	t.schema = sch
	t.timeout = DefaultTimeout
	if d.TimeoutSeconds > 0 {
		t.timeout = time.Duration(d.TimeoutSeconds) * time.Second
	}
	if d.RunIn == "" {
		// The seed's format names no place: the chat's sandbox, where
		// the policy, audit and redaction hold (Defaulted says so).
		d.RunIn, t.decl.RunIn, t.defaulted = InSandbox, InSandbox, true
	}
	switch d.RunIn {
	case OnHost:
		// The program runs in a fresh directory: a relative path can only
		// mean one next to the declaration.
		if p := t.argv[0]; strings.Contains(p, "/") && !filepath.IsAbs(p) {
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(file), p))
			if err != nil {
				return nil, fmt.Errorf("exec[0]: %w", err)
			}
			t.argv[0] = abs
		}
	case InSandbox:
		// Every shell a sandbox may have must read the words as written:
		// POSIX quoting refuses what only bash could quote.
		for i, a := range t.argv {
			if _, err := syntax.Quote(a, syntax.LangPOSIX); err != nil {
				return nil, fmt.Errorf("exec[%d]: %q cannot be passed through the sandbox's shell (%v); use printable characters", i, a, err)
			}
		}
	}
	return t, nil
}

// refusingLoader keeps input schemas from reading files or the network
// at load: a $ref may only point inside the schema.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refers to %s; an input schema may only refer to its own parts", url)
}

// compileInput compiles a tool's input_schema.
func compileInput(name string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{})
	c.AssertFormat()
	url := "mem:///exectool/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		var invalid *jsonschema.SchemaValidationError
		if errors.As(err, &invalid) {
			return nil, fmt.Errorf("input_schema is not a valid JSON Schema: %s", problems(invalid.Err, "input_schema", declarationWords))
		}
		var load *jsonschema.LoadURLError
		if errors.As(err, &load) {
			return nil, fmt.Errorf("input_schema %v", load.Err)
		}
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	return sch, nil
}

var toolSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	data, err := fs.ReadFile(schemas.FS, "exectool.schema.json")
	if err != nil {
		return nil, fmt.Errorf("exec tool schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("exec tool schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("flowbox/exectool", doc); err != nil {
		return nil, fmt.Errorf("exec tool schema: %w", err)
	}
	// One declaration at a time, so that errors can name its index.
	sch, err := c.Compile("flowbox/exectool#/$defs/tool")
	if err != nil {
		return nil, fmt.Errorf("exec tool schema: %w", err)
	}
	return sch, nil
})

var english = message.NewPrinter(language.English)

// words are how problems speak of what they check: fields of a
// declaration, or the model's arguments.
type words struct {
	top, unknown string
}

var (
	declarationWords = words{top: "(declaration)", unknown: "unknown field; see schemas/exectool.schema.json for the fields"}
	argumentWords    = words{top: "(arguments)", unknown: "unknown argument"}
)

// problems turns a validation error into one "field: what is wrong" per
// failing field, "; "-separated. prefix is the path of the document
// validated, if it is part of a larger one.
func problems(err error, prefix string, w words) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	field := func(loc []string, more ...string) string {
		parts := append(slices.Clone(loc), more...)
		if prefix != "" {
			parts = append([]string{prefix}, parts...)
		}
		if len(parts) == 0 {
			return w.top
		}
		// Array elements as the declarations' own errors name them: exec[1].
		var b strings.Builder
		for i, p := range parts {
			if _, err := strconv.Atoi(p); err == nil && i > 0 {
				b.WriteString("[" + p + "]")
				continue
			}
			if i > 0 {
				b.WriteString("/")
			}
			b.WriteString(p)
		}
		return b.String()
	}
	var lines []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		for _, c := range e.Causes {
			walk(c)
		}
		if len(e.Causes) > 0 {
			return
		}
		loc := e.InstanceLocation
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				lines = append(lines, field(loc, m)+": is required")
			}
		case *kind.AdditionalProperties:
			for _, p := range k.Properties {
				lines = append(lines, field(loc, p)+": "+w.unknown)
			}
		case *kind.MinItems:
			if k.Want == 1 {
				lines = append(lines, field(loc)+": must have at least one element")
			} else {
				lines = append(lines, fmt.Sprintf("%s: must have at least %d elements", field(loc), k.Want))
			}
		case *kind.MinLength:
			if k.Want == 1 {
				lines = append(lines, field(loc)+": must not be empty")
			} else {
				lines = append(lines, field(loc)+": "+k.LocalizedString(english))
			}
		case *kind.Not:
			if prefix == "" && slices.Equal(loc, []string{"name"}) && w == declarationWords {
				lines = append(lines, "name: is one of the engine's own tools; choose another name")
			} else {
				lines = append(lines, field(loc)+": "+k.LocalizedString(english))
			}
		case *kind.Pattern:
			if prefix == "" && slices.Equal(loc, []string{"name"}) && w == declarationWords {
				lines = append(lines, fmt.Sprintf("name: %q must be 1 to 64 letters, digits, _ or -", k.Got))
			} else {
				lines = append(lines, field(loc)+": "+k.LocalizedString(english))
			}
		default:
			lines = append(lines, field(loc)+": "+e.ErrorKind.LocalizedString(english))
		}
	}
	walk(ve)
	seen := map[string]bool{}
	out := lines[:0]
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

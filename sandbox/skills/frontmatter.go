package skills

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Limits of the Agent Skills format.
const (
	maxNameLen          = 64
	maxDescriptionLen   = 1024
	maxCompatibilityLen = 500
)

// ValidationError says which rule of the format a skill breaks. It
// matches ErrInvalid with errors.Is.
type ValidationError struct {
	// Skill is the skill's directory name, or its front matter name, or
	// "(archive)" when neither is known yet.
	Skill string
	// Field is the front matter key ("name", "description", ...) or the
	// part of the skill ("SKILL.md", "front matter", "files").
	Field string
	// Rule says what is wrong and what is expected.
	Rule string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("skill %q: %s: %s", e.Skill, e.Field, e.Rule)
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// validationErrors reports every broken rule at once, on one line, so
// that an admin fixes a SKILL.md in one round.
type validationErrors []*ValidationError

func (es validationErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (es validationErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// err returns nil, the only error, or all of them.
func (es validationErrors) err() error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return es
}

// frontMatter is SKILL.md's YAML header.
type frontMatter struct {
	Name          string            `yaml:"name"`
	Description   string            `yaml:"description"`
	License       string            `yaml:"license"`
	Compatibility string            `yaml:"compatibility"`
	Metadata      map[string]string `yaml:"metadata"`
	AllowedTools  string            `yaml:"allowed-tools"`
}

// knownKeys are the front matter keys of the format; any other is an error
// rather than ignored, so that a misspelt "descripton" does not silently
// leave a skill without its description.
var knownKeys = map[string]yaml.Kind{
	"name":          yaml.ScalarNode,
	"description":   yaml.ScalarNode,
	"license":       yaml.ScalarNode,
	"compatibility": yaml.ScalarNode,
	"metadata":      yaml.MappingNode,
	"allowed-tools": yaml.ScalarNode,
}

// splitSkillMD separates the front matter from the body. The front matter
// is the text between a first line "---" and the next line "---".
func splitSkillMD(data []byte) (front, body []byte, ok bool) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	first, rest, found := bytes.Cut(data, []byte("\n"))
	if !found || !isFence(first) {
		return nil, nil, false
	}
	for off := 0; off < len(rest); {
		line, after, _ := bytes.Cut(rest[off:], []byte("\n"))
		if isFence(line) {
			return rest[:off], after, true
		}
		off += len(line) + 1
	}
	return nil, nil, false
}

func isFence(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == "---"
}

// parseSkillMD parses and validates SKILL.md. label names the skill in
// errors; dirName, when not empty, is the directory the name must equal.
func parseSkillMD(label, dirName string, data []byte) (frontMatter, string, error) {
	var fm frontMatter
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Skill: label, Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	if !utf8.Valid(data) {
		return fm, "", bad("SKILL.md", "is not valid UTF-8 text")
	}
	front, body, ok := splitSkillMD(data)
	if !ok {
		return fm, "", bad("front matter", "SKILL.md must begin with a line \"---\", then YAML with name and description, then a line \"---\"")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(front, &doc); err != nil {
		return fm, "", bad("front matter", "is not valid YAML: %v", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return fm, "", bad("front matter", "is empty; it needs at least name and description")
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fm, "", bad("front matter", "must be a YAML mapping of keys to values (name: ..., description: ...)")
	}
	var errs validationErrors
	if err := checkNoAliases(top); err != nil {
		return fm, "", bad("front matter", "%v", err)
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		want, known := knownKeys[k.Value]
		switch {
		case !known:
			errs = append(errs, &ValidationError{Skill: label, Field: k.Value,
				Rule: "is not a front matter key of the format; allowed: name, description, license, compatibility, metadata, allowed-tools"})
		case isNull(v):
			// An empty value is the empty string; required keys are
			// checked below.
		case v.Kind != want:
			what := "a string"
			if want == yaml.MappingNode {
				what = "a mapping of string keys to string values"
			}
			errs = append(errs, &ValidationError{Skill: label, Field: k.Value, Rule: "must be " + what})
		case want == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				if v.Content[j].Kind != yaml.ScalarNode || v.Content[j+1].Kind != yaml.ScalarNode {
					errs = append(errs, &ValidationError{Skill: label, Field: k.Value,
						Rule: fmt.Sprintf("key %q: values must be strings, not lists or mappings", v.Content[j].Value)})
					break
				}
			}
		}
	}
	if len(errs) > 0 {
		return fm, "", errs.err()
	}
	if err := top.Decode(&fm); err != nil {
		return fm, "", bad("front matter", "cannot be read: %v", err)
	}
	if fm.Name == "" {
		errs = append(errs, &ValidationError{Skill: label, Field: "name", Rule: "is required"})
	} else if err := checkName(fm.Name); err != nil {
		errs = append(errs, &ValidationError{Skill: label, Field: "name", Rule: err.Error()})
	} else if dirName != "" && fm.Name != dirName {
		errs = append(errs, &ValidationError{Skill: label, Field: "name",
			Rule: fmt.Sprintf("is %q but the skill's directory is %q; they must be equal", fm.Name, dirName)})
	}
	switch n := utf8.RuneCountInString(fm.Description); {
	case strings.TrimSpace(fm.Description) == "":
		errs = append(errs, &ValidationError{Skill: label, Field: "description", Rule: "is required: say what the skill does and when to use it"})
	case n > maxDescriptionLen:
		errs = append(errs, &ValidationError{Skill: label, Field: "description",
			Rule: fmt.Sprintf("is %d characters, over the limit of %d", n, maxDescriptionLen)})
	}
	if n := utf8.RuneCountInString(fm.Compatibility); n > maxCompatibilityLen {
		errs = append(errs, &ValidationError{Skill: label, Field: "compatibility",
			Rule: fmt.Sprintf("is %d characters, over the limit of %d", n, maxCompatibilityLen)})
	}
	if err := errs.err(); err != nil {
		return fm, "", err
	}
	return fm, strings.TrimLeft(string(body), "\r\n"), nil
}

// checkName applies the format's rule for names. The message is the rule,
// without the skill's label, for the caller to place.
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("must be 1 to %d characters, got %d", maxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%q: only lowercase letters a-z, digits and hyphens are allowed", name)
		}
	}
	if name[0] == '-' || name[len(name)-1] == '-' {
		return fmt.Errorf("%q: must not begin or end with a hyphen", name)
	}
	if strings.Contains(name, "--") {
		return fmt.Errorf("%q: must not contain two hyphens in a row", name)
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// checkNoAliases refuses YAML anchors and aliases: a skill's header has no
// use for them, and aliases are how a small YAML text expands into a huge
// value.
func checkNoAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return fmt.Errorf("uses a YAML anchor or alias (line %d); write the values out", n.Line)
	}
	for _, c := range n.Content {
		if err := checkNoAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// Describe reads the name and description of a SKILL.md, without
// checking the rest of the skill: for lists of skills not installed yet
// (the examples an engine offers).
func Describe(skillMD []byte) (name, description string, err error) {
	front, _, ok := splitSkillMD(skillMD)
	if !ok {
		return "", "", fmt.Errorf("%w: SKILL.md has no front matter between two --- lines", ErrInvalid)
	}
	var fm frontMatter
	if err := yaml.Unmarshal(front, &fm); err != nil {
		return "", "", fmt.Errorf("%w: SKILL.md's front matter: %v", ErrInvalid, err)
	}
	return fm.Name, fm.Description, nil
}

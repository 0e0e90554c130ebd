package nodes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The interactive nodes ask the person chatting and wait for the answer,
// as FastGPT's do: userSelect offers options and takes the branch of the
// one chosen; formInput asks for a form's fields and outputs them. Both
// pause the run like a command approval (see Interrupt): the question is
// kept with the paused run, and the answer resumes it in any engine
// process.

// SelectOption is one option of a userSelect: Key names its branch,
// Value is the text the person sees (and the node's selectResult).
type SelectOption struct {
	Value string `json:"value"`
	Key   string `json:"key"`
}

// FormField is one field of a formInput, in FastGPT's userInputForms
// shape. Its answer becomes the node's output Key.
type FormField struct {
	Type        string `json:"type"` // one of FieldTypes
	Key         string `json:"key"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// DefaultValue stands for a field the person leaves empty.
	DefaultValue any `json:"defaultValue,omitempty"`
	// MaxLength bounds a text's characters (input, textarea); Min and
	// Max a number.
	MaxLength int      `json:"maxLength,omitempty"`
	Min       *float64 `json:"min,omitempty"`
	Max       *float64 `json:"max,omitempty"`
	// List is what a select or multipleSelect offers.
	List []FieldOption `json:"list,omitempty"`
}

// FieldOption is one choice of a select field.
type FieldOption struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// The types of form fields, with FastGPT's names; the answer's JSON type
// follows from it: text for input, textarea and select, a number for
// numberInput, true or false for switch, a list of texts for
// multipleSelect.
const (
	FieldInput          = "input"
	FieldTextarea       = "textarea"
	FieldNumber         = "numberInput"
	FieldSwitch         = "switch"
	FieldSelect         = "select"
	FieldMultipleSelect = "multipleSelect"
)

// FieldTypes lists the types a form field may have.
var FieldTypes = []string{FieldInput, FieldTextarea, FieldNumber, FieldSwitch, FieldSelect, FieldMultipleSelect}

// formResult is the formInput output that holds every answered field.
const formResult = "formInputResult"

// ErrBadAnswer is wrapped by the errors of Request.Check: what a person
// sent does not answer the question.
var ErrBadAnswer = errors.New("the answer does not fit the question")

// InteractiveDetail is what an interactive node keeps in its response:
// the question, until when it waits (set by the edge that keeps the
// paused run), and the answer once the run has resumed.
type InteractiveDetail struct {
	Request   Request   `json:"request"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	Answer    *Answer   `json:"answer,omitempty"`
}

// Check reads what a person sent as the answer to an interactive node's
// question (JSON types: numbers are float64): for a userSelect an
// option's key or its text; for a formInput an object of field keys and
// values. It returns the answer the node resumes with, or an error
// wrapping ErrBadAnswer that says what to send.
func (r *Request) Check(value any) (Answer, error) {
	switch r.Kind {
	case KindUserSelect:
		s, ok := value.(string)
		if !ok {
			return Answer{}, fmt.Errorf("%w: answer with the key or the text of one of the options (%s), not %s", ErrBadAnswer, r.optionList(), jsonTypeName(value))
		}
		o, ok := r.option(s)
		if !ok {
			return Answer{}, fmt.Errorf("%w: %q is not one of the options; choose one of %s", ErrBadAnswer, s, r.optionList())
		}
		return Answer{Choice: o.Key}, nil
	case KindFormInput:
		values, ok := value.(map[string]any)
		if !ok {
			return Answer{}, fmt.Errorf("%w: answer with the form's fields as a JSON object like {%q: ...}, not %s", ErrBadAnswer, r.firstFieldKey(), jsonTypeName(value))
		}
		form, err := checkForm(r.Fields, values)
		if err != nil {
			return Answer{}, err
		}
		return Answer{Form: form}, nil
	}
	return Answer{}, fmt.Errorf("%w: a %s is answered with a decision, not a value", ErrBadAnswer, kindName(r.Kind))
}

// Said is the answer as the person's message of the turn that resumes
// the run: the option's text, or one "label: value" line per field.
func (r *Request) Said(a Answer) string {
	switch r.Kind {
	case KindUserSelect:
		if o, ok := r.option(a.Choice); ok {
			return o.Value
		}
		return a.Choice
	case KindFormInput:
		var lines []string
		for _, f := range r.Fields {
			v, ok := a.Form[f.Key]
			if !ok {
				continue
			}
			label := f.Label
			if label == "" {
				label = f.Key
			}
			lines = append(lines, label+": "+fieldText(f, v))
		}
		return strings.Join(lines, "\n")
	}
	return ""
}

// option finds the option whose key, or else whose text, is s.
func (r *Request) option(s string) (SelectOption, bool) {
	s = strings.TrimSpace(s)
	if i := slices.IndexFunc(r.Options, func(o SelectOption) bool { return o.Key == s }); i >= 0 {
		return r.Options[i], true
	}
	if i := slices.IndexFunc(r.Options, func(o SelectOption) bool { return strings.TrimSpace(o.Value) == s }); i >= 0 {
		return r.Options[i], true
	}
	return SelectOption{}, false
}

func (r *Request) optionList() string {
	names := make([]string, len(r.Options))
	for i, o := range r.Options {
		names[i] = fmt.Sprintf("%q (key %s)", o.Value, o.Key)
	}
	return strings.Join(names, ", ")
}

func (r *Request) firstFieldKey() string {
	if len(r.Fields) > 0 {
		return r.Fields[0].Key
	}
	return "key"
}

func kindName(kind string) string {
	if kind == KindApproval {
		return "command approval"
	}
	return kind
}

// checkForm checks the answered fields against the form: no unknown
// field, every required one given, each of its type and within its
// bounds. Empty fields take their default.
func checkForm(fields []FormField, values map[string]any) (map[string]any, error) {
	var problems []string
	for k := range values {
		if !slices.ContainsFunc(fields, func(f FormField) bool { return f.Key == k }) {
			keys := make([]string, len(fields))
			for i, f := range fields {
				keys[i] = f.Key
			}
			problems = append(problems, fmt.Sprintf("the form has no field %q (its fields: %s)", k, strings.Join(keys, ", ")))
		}
	}
	slices.Sort(problems)
	out := map[string]any{}
	for _, f := range fields {
		v := values[f.Key]
		if isEmpty(v) {
			v = f.DefaultValue
		}
		if isEmpty(v) {
			if f.Required {
				problems = append(problems, fmt.Sprintf("field %s is required; give it a value", f.name()))
			}
			continue
		}
		if why := f.problem(v); why != "" {
			problems = append(problems, fmt.Sprintf("field %s %s", f.name(), why))
			continue
		}
		out[f.Key] = v
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadAnswer, strings.Join(problems, "; "))
	}
	return out, nil
}

func (f FormField) name() string {
	if f.Label != "" && f.Label != f.Key {
		return fmt.Sprintf("%q (%s)", f.Key, f.Label)
	}
	return fmt.Sprintf("%q", f.Key)
}

// problem says what is wrong with a field's (non-empty) value, or "".
func (f FormField) problem(v any) string {
	switch f.Type {
	case FieldNumber:
		n, ok := v.(float64)
		switch {
		case !ok:
			return "must be a number, not " + jsonTypeName(v)
		case f.Min != nil && n < *f.Min:
			return fmt.Sprintf("must be at least %g", *f.Min)
		case f.Max != nil && n > *f.Max:
			return fmt.Sprintf("must be at most %g", *f.Max)
		}
	case FieldSwitch:
		if _, ok := v.(bool); !ok {
			return "must be true or false, not " + jsonTypeName(v)
		}
	case FieldSelect:
		s, ok := v.(string)
		if !ok {
			return "must be the value of one of its choices, not " + jsonTypeName(v)
		}
		if !f.offers(s) {
			return fmt.Sprintf("has no choice %q; choose one of %s", s, f.choices())
		}
	case FieldMultipleSelect:
		list, ok := v.([]any)
		if !ok {
			return "must be a list of values of its choices, not " + jsonTypeName(v)
		}
		for _, item := range list {
			if s, ok := item.(string); !ok || !f.offers(s) {
				return fmt.Sprintf("has no choice %v; choose among %s", item, f.choices())
			}
		}
	default: // input, textarea
		s, ok := v.(string)
		switch {
		case !ok:
			return "must be text, not " + jsonTypeName(v)
		case f.MaxLength > 0 && utf8.RuneCountInString(s) > f.MaxLength:
			return fmt.Sprintf("is longer than %d characters", f.MaxLength)
		}
	}
	return ""
}

func (f FormField) offers(s string) bool {
	return slices.ContainsFunc(f.List, func(o FieldOption) bool { return o.Value == s })
}

func (f FormField) choices() string {
	values := make([]string, len(f.List))
	for i, o := range f.List {
		values[i] = fmt.Sprintf("%q", o.Value)
	}
	return strings.Join(values, ", ")
}

// fieldText writes a field's value for a person: a choice by its label.
func fieldText(f FormField, v any) string {
	label := func(s string) string {
		if i := slices.IndexFunc(f.List, func(o FieldOption) bool { return o.Value == s }); i >= 0 && f.List[i].Label != "" {
			return f.List[i].Label
		}
		return s
	}
	switch v := v.(type) {
	case string:
		return label(v)
	case []any:
		parts := make([]string, len(v))
		for i, item := range v {
			parts[i] = label(Text(item))
		}
		return strings.Join(parts, ", ")
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return fmt.Sprintf("%d", int64(v))
		}
	}
	return Text(v)
}

// jsonTypeName names the JSON type of a decoded value for a sentence.
func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "text"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func newQuestionID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "itr_" + hex.EncodeToString(b)
}

// decodeInput reads a resolved input into a typed value.
func decodeInput(in map[string]any, key string, into any) error {
	b, err := json.Marshal(in[key])
	if err == nil {
		err = json.Unmarshal(b, into)
	}
	if err != nil {
		return fmt.Errorf("input %s: %w", key, err)
	}
	return nil
}

// resumed is the question a resumed interactive node was asked, checked
// to be of its kind.
func resumed(run *NodeRun, kind string) (*Request, error) {
	r := &run.Resume.Request
	if r.Kind != kind {
		return nil, fmt.Errorf("the run paused here for a %s, but this node is a %s: the workflow changed while it waited; send a new message", kindName(r.Kind), kind)
	}
	return r, nil
}

// userSelect offers options and takes the branch of the one chosen; its
// output selectResult is the chosen option's text.
type userSelect struct{}

var _ Brancher = userSelect{}

// Branches are the keys of the node's options.
func (userSelect) Branches(n *Node) []string {
	var options []SelectOption
	_ = json.Unmarshal(n.Inputs["userSelectOptions"], &options)
	var keys []string
	for _, o := range options {
		if o.Key != "" && !slices.Contains(keys, o.Key) {
			keys = append(keys, o.Key)
		}
	}
	return keys
}

func (userSelect) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	if run.Resume != nil {
		req, err := resumed(run, KindUserSelect)
		if err != nil {
			return nil, err
		}
		o, ok := req.option(run.Resume.Answer.Choice)
		if !ok {
			return nil, fmt.Errorf("the answer %q is none of the options %s", run.Resume.Answer.Choice, req.optionList())
		}
		answer := Answer{Choice: o.Key}
		run.Detail = &InteractiveDetail{Request: *req, Answer: &answer}
		run.Branches = []string{o.Key}
		return map[string]any{"selectResult": o.Value}, nil
	}
	var options []SelectOption
	if err := decodeInput(run.Inputs, "userSelectOptions", &options); err != nil {
		return nil, err
	}
	if len(options) == 0 {
		return nil, errors.New("the node has no options to choose from; add some")
	}
	seen := map[string]bool{}
	for i, o := range options {
		switch {
		case o.Key == "" || strings.TrimSpace(o.Value) == "":
			return nil, fmt.Errorf("option %d needs a key and a text", i+1)
		case seen[o.Key]:
			return nil, fmt.Errorf("option key %q appears twice; each option's key names its own branch", o.Key)
		}
		seen[o.Key] = true
	}
	return nil, ask(run, Request{ID: newQuestionID(), Kind: KindUserSelect, Description: StringInput(run.Inputs, "description"), Options: options})
}

// formInput asks for a form's fields; its outputs are formInputResult
// (every answered field) and one output per field (x-dynamic-outputs).
type formInput struct{}

func (formInput) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	if run.Resume != nil {
		req, err := resumed(run, KindFormInput)
		if err != nil {
			return nil, err
		}
		// As it would have come over the wire: JSON types only.
		var values map[string]any
		if b, err := json.Marshal(run.Resume.Answer.Form); err == nil {
			_ = json.Unmarshal(b, &values)
		}
		if values == nil {
			values = map[string]any{}
		}
		form, err := checkForm(req.Fields, values)
		if err != nil {
			return nil, err
		}
		run.Detail = &InteractiveDetail{Request: *req, Answer: &Answer{Form: form}}
		out := map[string]any{formResult: form}
		for k, v := range form {
			out[k] = v
		}
		return out, nil
	}
	var fields []FormField
	if err := decodeInput(run.Inputs, "userInputForms", &fields); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, errors.New("the form has no fields; add some")
	}
	seen := map[string]bool{}
	for _, f := range fields {
		switch {
		case !variableKeyRe.MatchString(f.Key) || f.Key == formResult:
			return nil, fmt.Errorf("form field key %q must start with a letter or '_', hold only letters, digits and '_', and not be %s", f.Key, formResult)
		case seen[f.Key]:
			return nil, fmt.Errorf("form field key %q appears twice; each field's key names its own output", f.Key)
		case !slices.Contains(FieldTypes, f.Type):
			return nil, fmt.Errorf("form field %q has type %q; use one of %s", f.Key, f.Type, strings.Join(FieldTypes, ", "))
		case (f.Type == FieldSelect || f.Type == FieldMultipleSelect) && len(f.List) == 0:
			return nil, fmt.Errorf("form field %q is a %s without choices; list them", f.Key, f.Type)
		}
		seen[f.Key] = true
	}
	return nil, ask(run, Request{ID: newQuestionID(), Kind: KindFormInput, Description: StringInput(run.Inputs, "description"), Fields: fields})
}

// ask pauses the run with the question.
func ask(run *NodeRun, req Request) *Interrupt {
	run.Detail = &InteractiveDetail{Request: req}
	run.Emit(req)
	return &Interrupt{Request: req}
}

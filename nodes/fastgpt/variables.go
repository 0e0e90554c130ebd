package fastgpt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/flowbox/flowbox/nodes"
)

// fvariable is one of FastGPT's global variables (VariableItemType).
type fvariable struct {
	Key          string          `json:"key"`
	Label        string          `json:"label"`
	Type         string          `json:"type"`
	ValueType    string          `json:"valueType"`
	Required     bool            `json:"required"`
	Description  string          `json:"description"`
	DefaultValue json.RawMessage `json:"defaultValue"`
	List         []foption       `json:"list"`
	Enums        []foption       `json:"enums"` // the older name of list
}

type foption struct {
	Value json.RawMessage `json:"value"`
}

var variableKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// config is the FastGPT system-configuration node, if any.
func (c *converter) config() *fnode {
	for i := range c.wf.Nodes {
		if t := c.wf.Nodes[i].FlowNodeType; t == "userGuide" || t == "pluginConfig" {
			return &c.wf.Nodes[i]
		}
	}
	return nil
}

func configInput(n *fnode, key string) json.RawMessage {
	if n == nil {
		return nil
	}
	for _, in := range n.Inputs {
		if in.Key == key {
			return in.Value
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// variables maps FastGPT's global variables (chatConfig.variables, or the
// older system-configuration node's) to the graph's.
func (c *converter) variables() {
	raw := c.wf.ChatConfig["variables"]
	if isNull(raw) {
		raw = configInput(c.config(), "variables")
	}
	if isNull(raw) {
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		c.field("", "variables", "FastGPT's variables are not a list (%v); none were imported", err)
		return
	}
	seen := map[string]bool{}
	for i, item := range items {
		var v fvariable
		if err := json.Unmarshal(item, &v); err != nil {
			c.field("", fmt.Sprintf("variables[%d]", i), "the variable does not have FastGPT's shape (%v); it is left out", err)
			continue
		}
		field := "variables." + v.Key
		switch {
		case !variableKey.MatchString(v.Key):
			c.field("", field, "the variable's key %q is not one Flowbox accepts (a letter or _, then letters, digits and _); it is left out", v.Key)
			continue
		case nodes.SystemVariables[v.Key] != "":
			c.field("", field, "%q is a system variable in Flowbox; the app's own variable of that key is left out", v.Key)
			continue
		case seen[v.Key]:
			c.field("", field, "the variable is declared twice; the second is left out")
			continue
		}
		seen[v.Key] = true
		c.g.Variables = append(c.g.Variables, c.variable(v, field))
	}
}

func (c *converter) variable(v fvariable, field string) nodes.Variable {
	out := nodes.Variable{Key: v.Key, Label: v.Label, Required: v.Required, Description: v.Description}
	if out.Label == v.Key {
		out.Label = ""
	}
	typ, note := variableType(v)
	if typ == "select" {
		out.Options = options(v)
		if len(out.Options) == 0 {
			typ, note = "string", "a select without options becomes a text variable"
		}
	}
	out.Type = typ
	if note != "" {
		c.field("", field, "%s", note)
	}
	def, why := defaultValue(out, v.DefaultValue)
	if why != "" {
		c.field("", field+".defaultValue", "the default %s; it is left out", why)
	}
	out.Default = def
	return out
}

// variableType maps a FastGPT variable type (VariableInputEnum) and value
// type to Flowbox's, and says what was lost.
func variableType(v fvariable) (typ, note string) {
	byValue := func() string {
		switch v.ValueType {
		case "", "string":
			return "string"
		case "number", "boolean":
			return v.ValueType
		}
		return "json"
	}
	switch v.Type {
	case "input":
		return byValue(), ""
	case "textarea", "password":
		return "string", ""
	case "numberInput":
		return "number", ""
	case "switch":
		return "boolean", ""
	case "select":
		return "select", ""
	case "JSONEditor":
		return "json", ""
	case "custom", "":
		return byValue(), ""
	case "multipleSelect":
		return "json", "FastGPT's multiple choice becomes a json variable (a list of the choices); Flowbox has no multiple choice"
	case "internal":
		return byValue(), "FastGPT hides internal variables from the chat's form; Flowbox has no hidden variables"
	case "timePointSelect":
		return "string", "FastGPT's time picker becomes a text variable"
	case "timeRangeSelect":
		return "json", "FastGPT's time range becomes a json variable"
	case "file":
		return "json", "FastGPT's file variable becomes a json variable; Flowbox chats give files through their uploads"
	case "modelSelect", "llmSelect":
		return "string", "FastGPT's model picker becomes a text variable (a model name)"
	case "datasetSelect":
		return "json", "FastGPT's knowledge-base picker becomes a json variable; Flowbox has no knowledge bases"
	}
	return byValue(), fmt.Sprintf("FastGPT's variable type %q is mapped by its value type", v.Type)
}

func options(v fvariable) []string {
	list := v.List
	if len(list) == 0 {
		list = v.Enums
	}
	var out []string
	for _, o := range list {
		var s string
		if json.Unmarshal(o.Value, &s) != nil {
			s = strings.TrimSpace(string(o.Value))
		}
		if s != "" && s != "null" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// defaultValue converts a FastGPT default (often a text, whatever the
// type) to the variable's type.
func defaultValue(x nodes.Variable, raw json.RawMessage) (json.RawMessage, string) {
	if isNull(raw) {
		return nil, ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, "is not JSON"
	}
	if s, ok := v.(string); ok && s == "" {
		return nil, ""
	}
	switch x.Type {
	case "string", "select":
		switch d := v.(type) {
		case float64:
			v = strconv.FormatFloat(d, 'f', -1, 64)
		case bool:
			v = strconv.FormatBool(d)
		}
	case "number":
		if s, ok := v.(string); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return nil, fmt.Sprintf("%q is not a number", s)
			}
			v = f
		}
	case "boolean":
		if s, ok := v.(string); ok {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Sprintf("%q is not true or false", s)
			}
			v = b
		}
	case "json":
		if s, ok := v.(string); ok {
			var parsed any
			if json.Unmarshal([]byte(s), &parsed) == nil {
				v = parsed
			}
		}
	}
	if why := nodes.VariableValueProblem(x, v); why != "" {
		return nil, why
	}
	out, _ := json.Marshal(v)
	return out, ""
}

// settings reports FastGPT's chat settings that Flowbox has no place
// for, when they are switched on or filled in.
func (c *converter) settings() {
	type setting struct {
		nodeID, field string
		raw           json.RawMessage
	}
	found := map[string]setting{}
	if cfg := c.config(); cfg != nil {
		for _, in := range cfg.Inputs {
			key := in.Key
			if key == "scheduleTrigger" {
				key = "scheduledTriggerConfig"
			}
			found[key] = setting{cfg.NodeID, in.Key, in.Value}
		}
	}
	for k, raw := range c.wf.ChatConfig {
		found[k] = setting{"", "chatConfig." + k, raw}
	}
	keys := make([]string, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := found[k]
		if k == "variables" || k == "_id" || !switchedOn(k, s.raw) {
			continue
		}
		why := settingReasons[k]
		if why == "" {
			why = fmt.Sprintf("FastGPT's chat setting %s is not used by Flowbox", k)
		}
		nodeID := s.nodeID
		if nodeID != "" {
			nodeID = c.ids[nodeID]
		}
		c.field(nodeID, s.field, "%s", why)
	}
}

var settingReasons = map[string]string{
	"welcomeText":            "the chat's welcome text: Flowbox shows no welcome message",
	"welcomeConfig":          "the chat's welcome text and questions: Flowbox shows no welcome message",
	"questionGuide":          "suggested follow-up questions: Flowbox does not suggest them",
	"tts":                    "reading answers aloud with a voice model: Flowbox does not",
	"whisper":                "voice input: Flowbox chats take text",
	"scheduledTriggerConfig": "scheduled runs: Flowbox runs an app when a chat sends a message",
	"chatInputGuide":         "input suggestions: Flowbox does not offer them",
	"fileSelectConfig":       "FastGPT's chat upload settings: Flowbox chats take files through their uploads",
	"autoExecute":            "running the app when a chat opens: Flowbox runs it when a message is sent",
	"instruction":            "the app's instructions: Flowbox does not show them",
}

// switchedOn says whether a setting changes anything: a text filled in, a
// switch on, a schedule set.
func switchedOn(key string, raw json.RawMessage) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil || isEmpty(v) {
		return false
	}
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.TrimSpace(v) != ""
	case map[string]any:
		switch key {
		case "tts":
			return v["type"] == "model"
		case "scheduledTriggerConfig":
			s, _ := v["cronString"].(string)
			return s != ""
		case "welcomeConfig":
			return !isEmpty(v["welcomeText"]) || !isEmpty(v["welcomeQuestions"])
		case "fileSelectConfig":
			for _, k := range []string{"canSelectFile", "canSelectImg", "canSelectVideo", "canSelectAudio", "canSelectCustomFileExtension"} {
				if v[k] == true {
					return true
				}
			}
			return false
		}
		if open, ok := v["open"].(bool); ok {
			return open
		}
		return true
	}
	return true
}

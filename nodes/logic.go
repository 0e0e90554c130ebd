package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The logic nodes: ifElseNode, textEditor and variableUpdate, with
// FastGPT's names, keys and meanings. The references in their lists
// (a condition's variable, an update's value) are resolved by the engine
// like any other input's (see resolve).

var (
	_ Brancher = ifElseNode{}
	_ Checker  = ifElseNode{}
	_ Checker  = variableUpdate{}
)

// The branches of an ifElseNode: IF for its first list entry, ELSE IF n
// for entry n, and ELSE when no entry's conditions hold.
const (
	ifBranch     = "IF"
	elseIfBranch = "ELSE IF"
	elseBranch   = "ELSE"
)

// ifElseBranch names the branch of entry i of an ifElseList.
func ifElseBranch(i int) string {
	if i == 0 {
		return ifBranch
	}
	return elseIfBranch + " " + strconv.Itoa(i)
}

// ifElseNode takes the first branch whose conditions hold (FastGPT's
// 判断器). Its output ifElseResult names the branch.
type ifElseNode struct{}

// Branches lists a node's branches: one per entry of its ifElseList, and
// ELSE.
func (ifElseNode) Branches(n *Node) []string {
	var list []json.RawMessage
	_ = json.Unmarshal(n.Inputs["ifElseList"], &list) // a broken list is the validator's to report
	out := make([]string, 0, len(list)+1)
	for i := range list {
		out = append(out, ifElseBranch(i))
	}
	return append(out, elseBranch)
}

func (ifElseNode) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	list, _ := run.Inputs["ifElseList"].([]any)
	taken := elseBranch
	for i, entry := range list {
		e, _ := entry.(map[string]any)
		holds, err := branchHolds(e)
		if err != nil {
			return nil, fmt.Errorf("branch %s: %w", ifElseBranch(i), err)
		}
		if holds {
			taken = ifElseBranch(i)
			break
		}
	}
	run.Branches = []string{taken}
	return map[string]any{"ifElseResult": taken}, nil
}

// branchHolds reports whether an ifElseList entry's conditions hold: all
// of them for AND, one for OR.
func branchHolds(entry map[string]any) (bool, error) {
	conds, _ := entry["list"].([]any)
	or := entry["condition"] == "OR"
	for j, c := range conds {
		m, _ := c.(map[string]any)
		op, _ := m["condition"].(string)
		ok, err := compare(op, m["variable"], m["value"])
		if err != nil {
			return false, fmt.Errorf("condition %d: %w", j+1, err)
		}
		if ok == or {
			return ok, nil
		}
	}
	return !or, nil
}

// compare applies an operator of FastGPT's ifElse node to a resolved
// condition, with FastGPT's meanings: equality compares texts, trimmed;
// include looks for a substring of a text or an item of an array, by its
// text; startWith, endWith and reg apply to a text, trimmed; the order
// operators to numbers, text that holds one included; the length operators
// to the length of a text or an array. Where FastGPT's meaning is
// JavaScript's accident, Flowbox says what a person means: a number equals
// a number however it is written ("3.0" is 3), blank text is no number
// (not 0), a text's length counts characters (not UTF-16 units), and a
// text operator on something else is false (not an error). As in FastGPT,
// a value without a length (a number, an object) meets lengthNotEqualTo
// only. Regular expressions are Go's (RE2).
func compare(op string, left, right any) (bool, error) {
	switch op {
	case "isEmpty":
		return isEmpty(left), nil
	case "isNotEmpty":
		return !isEmpty(left), nil
	case "equalTo":
		return equal(left, right), nil
	case "notEqual":
		return !equal(left, right), nil
	case "include":
		return include(left, Text(right)), nil
	case "notInclude":
		return !include(left, Text(right)), nil
	case "startWith":
		s, ok := left.(string)
		return ok && strings.HasPrefix(strings.TrimSpace(s), Text(right)), nil
	case "endWith":
		s, ok := left.(string)
		return ok && strings.HasSuffix(strings.TrimSpace(s), Text(right)), nil
	case "reg":
		s, ok := left.(string)
		pattern := Text(right)
		if !ok || pattern == "" {
			return false, nil
		}
		re, err := compileCondition(pattern)
		if err != nil {
			return false, err
		}
		return re.MatchString(strings.TrimSpace(s)), nil
	case "greaterThan", "greaterThanOrEqualTo", "lessThan", "lessThanOrEqualTo":
		l, okl := number(left)
		r, okr := number(right)
		return okl && okr && ordered(op, l, r), nil
	case "lengthEqualTo", "lengthNotEqualTo", "lengthGreaterThan", "lengthGreaterThanOrEqualTo", "lengthLessThan", "lengthLessThanOrEqualTo":
		n, okl := length(left)
		r, okr := number(right)
		if !okl || !okr {
			return op == "lengthNotEqualTo", nil
		}
		return ordered(op, float64(n), r), nil
	}
	return false, fmt.Errorf("unknown operator %q", op)
}

// ordered applies an order or length operator to two numbers.
func ordered(op string, l, r float64) bool {
	switch op {
	case "lengthEqualTo":
		return l == r
	case "lengthNotEqualTo":
		return l != r
	case "greaterThan", "lengthGreaterThan":
		return l > r
	case "greaterThanOrEqualTo", "lengthGreaterThanOrEqualTo":
		return l >= r
	case "lessThan", "lengthLessThan":
		return l < r
	case "lessThanOrEqualTo", "lengthLessThanOrEqualTo":
		return l <= r
	}
	return false
}

// isEmpty is nothing, blank text, an empty array or an empty object.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(v) == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func equal(left, right any) bool {
	if l, ok := left.(float64); ok {
		switch right.(type) {
		case float64, string:
			if r, ok := number(right); ok {
				return l == r
			}
		}
	}
	return strings.TrimSpace(Text(left)) == strings.TrimSpace(Text(right))
}

func include(v any, target string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, target)
	case []any:
		for _, item := range v {
			if Text(item) == target {
				return true
			}
		}
	}
	return false
}

// number reads a value as a number: a number, text that holds one, or
// true and false as 1 and 0.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func length(v any) (int, bool) {
	switch v := v.(type) {
	case string:
		return utf8.RuneCountInString(v), true
	case []any:
		return len(v), true
	}
	return 0, false
}

// compileCondition compiles a reg condition's pattern, with or without
// the slashes around it that FastGPT's builder shows.
func compileCondition(pattern string) (*regexp.Regexp, error) {
	p := strings.TrimSuffix(strings.TrimPrefix(pattern, "/"), "/")
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("the regular expression %q is not valid (RE2 syntax: no lookarounds or backreferences): %v", pattern, err)
	}
	return re, nil
}

// textEditor writes a text from fixed words and references (FastGPT's
// 文本拼接); the engine has replaced the references when it runs.
type textEditor struct{}

func (textEditor) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	return map[string]any{"system_text": Text(run.Inputs["system_textareaInput"])}, nil
}

// variableUpdate gives global variables new values when it ends (FastGPT's
// 变量更新). FastGPT may also overwrite a node's output; Flowbox changes
// global variables only, so that an output always is what its node gave.
type variableUpdate struct{}

// update is one entry of an updateList as the graph holds it.
type update struct {
	Variable   any             `json:"variable"`
	Value      json.RawMessage `json:"value"`
	RenderType string          `json:"renderType"`
}

func (variableUpdate) Run(ctx context.Context, run *NodeRun) (map[string]any, error) {
	// The engine resolved each entry's variable to its value; which
	// variable it names is read from the graph.
	var updates []update
	if err := json.Unmarshal(run.Node.Inputs["updateList"], &updates); err != nil {
		return nil, fmt.Errorf("updateList: %w", err)
	}
	resolved, _ := run.Inputs["updateList"].([]any)
	set := make(map[string]any, len(updates))
	result := make([]any, 0, len(updates))
	for i, u := range updates {
		key, why := globalVariable(u.Variable)
		if why != "" {
			return nil, fmt.Errorf("update %d: %s", i+1, why)
		}
		decl, ok := declared(run.Declared, key)
		if !ok {
			return nil, fmt.Errorf("update %d: the app has no variable %q; declare it, or choose another", i+1, key)
		}
		var val any
		if i < len(resolved) {
			m, _ := resolved[i].(map[string]any)
			val = m["value"]
		}
		if why := VariableValueProblem(decl, val); why != "" {
			return nil, fmt.Errorf("variable %q: the new value %s, and it is %s", key, why, describe(val))
		}
		set[key] = val
		result = append(result, map[string]any{"variable": key, "value": val})
	}
	run.SetVariables = set
	run.Detail = map[string]any{"updateVarResult": result}
	return map[string]any{}, nil
}

// globalVariable is the key of the global variable an update names, or
// why it names none.
func globalVariable(v any) (key, why string) {
	s, _ := v.(string)
	ref, ok := pureRefIn(s)
	switch {
	case !ok:
		return "", "choose the variable to change, as one reference {{$VARIABLE_NODE_ID.key$}}"
	case ref.NodeID != VariablesNode:
		return "", fmt.Sprintf("%s.%s is a node's output, which cannot be changed; only global variables can ({{$%s.key$}})", ref.NodeID, ref.Key, VariablesNode)
	case SystemVariables[ref.Key] != "":
		return "", fmt.Sprintf("%s is a system variable, which a workflow cannot change", ref.Key)
	}
	return ref.Key, ""
}

func declared(vars []Variable, key string) (Variable, bool) {
	for _, v := range vars {
		if v.Key == key {
			return v, true
		}
	}
	return Variable{}, false
}

// describe names a value's type, and shows it when it is short.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		if utf8.RuneCountInString(v) <= 40 {
			return fmt.Sprintf("text %q", v)
		}
		return "text"
	case float64:
		return "the number " + Text(v)
	case bool:
		return Text(v)
	case []any:
		return "a list"
	}
	return "an object"
}

// Check refuses what would make a condition meaningless: a left side that
// is not one reference, a value marked as a reference that is not one, a
// number operator given a value that is not a number, a regular
// expression that does not compile.
func (ifElseNode) Check(g *Graph, n *Node) []Problem {
	var entries []struct {
		List []struct {
			Variable  any    `json:"variable"`
			Condition string `json:"condition"`
			Value     any    `json:"value"`
			ValueType string `json:"valueType"`
		} `json:"list"`
	}
	if json.Unmarshal(n.Inputs["ifElseList"], &entries) != nil {
		return nil // the schema's problem, reported by the validator
	}
	var out []Problem
	for i, e := range entries {
		for j, c := range e.List {
			at := fmt.Sprintf("ifElseList/%d/list/%d", i, j)
			bad := func(field, format string, args ...any) {
				out = append(out, Problem{NodeID: n.NodeID, Field: at + "/" + field,
					Message: fmt.Sprintf("branch %s, condition %d: ", ifElseBranch(i), j+1) + fmt.Sprintf(format, args...)})
			}
			if s, _ := c.Variable.(string); !isRef(s) {
				bad("variable", "choose what to compare, a variable or a node's output, as one reference like {{$nodeId.key$}}")
			}
			s, isText := c.Value.(string)
			switch {
			case c.ValueType == "reference":
				if !isRef(s) {
					bad("value", "the value is marked as a reference but is not one reference; choose one, or mark it as input")
				}
				continue
			case isText && strings.Contains(s, refMark):
				continue // known when the node runs
			}
			switch {
			case c.Condition == "reg" && Text(c.Value) != "":
				if _, err := compileCondition(Text(c.Value)); err != nil {
					bad("value", "%v", err)
				}
			case strings.HasPrefix(c.Condition, "greater") || strings.HasPrefix(c.Condition, "less") || strings.HasPrefix(c.Condition, "length"):
				if _, ok := number(c.Value); !ok {
					bad("value", "%s compares with a number, and the value is %s", c.Condition, describe(c.Value))
				}
			}
		}
	}
	return out
}

func isRef(s string) bool {
	_, ok := pureRefIn(s)
	return ok
}

// Check refuses updates of what is not a global variable, values marked
// as references that are not one, and written values that do not fit
// their variable's type. (A variable the app does not declare is the
// validator's to report.)
func (variableUpdate) Check(g *Graph, n *Node) []Problem {
	var updates []update
	if json.Unmarshal(n.Inputs["updateList"], &updates) != nil {
		return nil
	}
	var out []Problem
	for i, u := range updates {
		at := fmt.Sprintf("updateList/%d", i)
		key, why := globalVariable(u.Variable)
		if why != "" {
			out = append(out, Problem{NodeID: n.NodeID, Field: at + "/variable", Message: why})
			continue
		}
		decl, ok := declared(g.Variables, key)
		if !ok || len(u.Value) == 0 {
			continue // the validator says what is missing
		}
		var val any
		if json.Unmarshal(u.Value, &val) != nil {
			continue
		}
		s, isText := val.(string)
		switch {
		case u.RenderType == "reference":
			if !isRef(s) {
				out = append(out, Problem{NodeID: n.NodeID, Field: at + "/value",
					Message: "the value is marked as a reference but is not one reference; choose one, or mark it as input"})
			}
		case isText && strings.Contains(s, refMark):
			// known when the node runs
		default:
			if why := VariableValueProblem(decl, val); why != "" {
				out = append(out, Problem{NodeID: n.NodeID, Field: at + "/value",
					Message: fmt.Sprintf("variable %q: the new value %s, and it is %s", key, why, describe(val))})
			}
		}
	}
	return out
}

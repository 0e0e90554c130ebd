package nodes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowbox/flowbox/nodes"
)

// conditionGraph is start → an ifElseNode with one condition on the
// global variable v (declared as JSON with the given default) → answer
// "yes" on IF, "no" on ELSE. w is a second variable for values given by
// reference.
func conditionGraph(t *testing.T, v, op, value, valueType, w string) *nodes.Graph {
	t.Helper()
	cond := map[string]any{"variable": "{{$VARIABLE_NODE_ID.v$}}", "condition": op}
	if value != "" {
		var val any
		if err := json.Unmarshal([]byte(value), &val); err != nil {
			t.Fatalf("value %s: %v", value, err)
		}
		cond["value"] = val
	}
	if valueType != "" {
		cond["valueType"] = valueType
	}
	list, _ := json.Marshal([]any{map[string]any{"condition": "AND", "list": []any{cond}}})
	if w == "" {
		w = "null"
	}
	return graph(t, fmt.Sprintf(`{"variables":[{"key":"v","type":"json","defaultValue":%s},{"key":"w","type":"json","defaultValue":%s}],
		"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":%s}},
		{"nodeId":"yes","type":"answerNode","inputs":{"text":"yes"}},
		{"nodeId":"no","type":"answerNode","inputs":{"text":"no"}}],
		"edges":[{"source":"start","target":"if"},
			{"source":"if","target":"yes","sourceHandle":"IF"},{"source":"if","target":"no","sourceHandle":"ELSE"}]}`, v, w, list))
}

func TestIfElseOperators(t *testing.T) {
	e := engine(t)
	tests := []struct {
		name         string
		v, op, value string // v and value as JSON
		valueType, w string
		want         string // the answer: yes (IF) or no (ELSE)
	}{
		{"equal text, trimmed", `"hello"`, "equalTo", `" hello "`, "", "", "yes"},
		{"equal is case-sensitive", `"hello"`, "equalTo", `"Hello"`, "", "", "no"},
		{"equal numbers as numbers", `3`, "equalTo", `"3.0"`, "", "", "yes"},
		{"equal a number given as a number", `3`, "equalTo", `3`, "", "", "yes"},
		{"equal true as text", `true`, "equalTo", `"true"`, "", "", "yes"},
		{"equal nothing and empty", `null`, "equalTo", `""`, "", "", "yes"},
		{"not equal", `"a"`, "notEqual", `"b"`, "", "", "yes"},
		{"not equal when equal", `"a"`, "notEqual", `"a"`, "", "", "no"},
		{"empty: nothing", `null`, "isEmpty", "", "", "", "yes"},
		{"empty: blank text", `"  "`, "isEmpty", "", "", "", "yes"},
		{"empty: empty list", `[]`, "isEmpty", "", "", "", "yes"},
		{"empty: empty object", `{}`, "isEmpty", "", "", "", "yes"},
		{"empty: zero is not", `0`, "isEmpty", "", "", "", "no"},
		{"empty: false is not", `false`, "isEmpty", "", "", "", "no"},
		{"not empty", `"x"`, "isNotEmpty", "", "", "", "yes"},
		{"not empty: nothing", `null`, "isNotEmpty", "", "", "", "no"},
		{"include in text", `"hello world"`, "include", `"lo w"`, "", "", "yes"},
		{"include in a list", `["a","b"]`, "include", `"b"`, "", "", "yes"},
		{"include a number in a list", `[1,2]`, "include", `"2"`, "", "", "yes"},
		{"include is whole items in a list", `["ab"]`, "include", `"a"`, "", "", "no"},
		{"include in a number", `12`, "include", `"1"`, "", "", "no"},
		{"not include", `"hello"`, "notInclude", `"x"`, "", "", "yes"},
		{"not include when it does", `["x"]`, "notInclude", `"x"`, "", "", "no"},
		{"start with, trimmed", `"  hello"`, "startWith", `"he"`, "", "", "yes"},
		{"start with: not", `"hello"`, "startWith", `"lo"`, "", "", "no"},
		{"start with: a number is no text", `12`, "startWith", `"1"`, "", "", "no"},
		{"end with", `"hello  "`, "endWith", `"lo"`, "", "", "yes"},
		{"regex between slashes", `"hello"`, "reg", `"/^h.l+o$/"`, "", "", "yes"},
		{"regex without", `"abc"`, "reg", `"^\\d+$"`, "", "", "no"},
		{"regex on a number", `123`, "reg", `"\\d"`, "", "", "no"},
		{"greater", `5`, "greaterThan", `"3"`, "", "", "yes"},
		{"greater: text holding a number", `"10"`, "greaterThan", `9`, "", "", "yes"},
		{"greater: not", `3`, "greaterThan", `3`, "", "", "no"},
		{"greater: text without a number", `"abc"`, "greaterThan", `1`, "", "", "no"},
		{"greater or equal", `3`, "greaterThanOrEqualTo", `3`, "", "", "yes"},
		{"less", `2.5`, "lessThan", `3`, "", "", "yes"},
		{"less or equal", `4`, "lessThanOrEqualTo", `3`, "", "", "no"},
		{"length of a list", `["a","b"]`, "lengthEqualTo", `2`, "", "", "yes"},
		{"length of text in characters", `"héllo"`, "lengthEqualTo", `"5"`, "", "", "yes"},
		{"length not equal", `[1]`, "lengthNotEqualTo", `2`, "", "", "yes"},
		{"length not equal: a number has none", `5`, "lengthNotEqualTo", `1`, "", "", "yes"},
		{"length equal: a number has none", `5`, "lengthEqualTo", `1`, "", "", "no"},
		{"length greater", `"abcd"`, "lengthGreaterThan", `3`, "", "", "yes"},
		{"length greater or equal", `[1,2]`, "lengthGreaterThanOrEqualTo", `3`, "", "", "no"},
		{"length less", `[]`, "lengthLessThan", `1`, "", "", "yes"},
		{"length less or equal", `"ab"`, "lengthLessThanOrEqualTo", `2`, "", "", "yes"},
		{"value by reference", `"same"`, "equalTo", `"{{$VARIABLE_NODE_ID.w$}}"`, "reference", `"same"`, "yes"},
		{"value by reference keeps its type", `[1,2,3]`, "lengthEqualTo", `"{{$VARIABLE_NODE_ID.w$}}"`, "reference", `3`, "yes"},
		{"value by reference: different", `"same"`, "equalTo", `"{{$VARIABLE_NODE_ID.w$}}"`, "reference", `"other"`, "no"},
		{"reference inside a written value", `"v=7"`, "equalTo", `"v={{$VARIABLE_NODE_ID.w$}}"`, "", `7`, "yes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := conditionGraph(t, tt.v, tt.op, tt.value, tt.valueType, tt.w)
			if err := e.Check(g); err != nil {
				t.Fatalf("the graph is refused: %v", err)
			}
			res, answer := run(t, e, g, nodes.Chat{Question: "q"})
			if res.Failed != "" {
				t.Fatal(res.Failed)
			}
			if answer != tt.want {
				t.Fatalf("%s %s %s: answer %q, want %q", tt.v, tt.op, tt.value, answer, tt.want)
			}
		})
	}
}

// branchesGraph: IF the question is "a"; ELSE IF 1 it starts with b OR
// ends with z; ELSE IF 2 it holds c AND is longer than 3; ELSE. Every
// branch's answer leads to "end", which runs whichever branch was taken.
const branchesGraph = `{"nodes":[{"nodeId":"start","type":"workflowStart"},
	{"nodeId":"if","type":"ifElseNode","name":"Route","inputs":{"ifElseList":[
		{"condition":"AND","list":[{"variable":"{{$start.userChatInput$}}","condition":"equalTo","value":"a"}]},
		{"condition":"OR","list":[{"variable":"{{$start.userChatInput$}}","condition":"startWith","value":"b"},
			{"variable":"{{$start.userChatInput$}}","condition":"endWith","value":"z"}]},
		{"condition":"AND","list":[{"variable":"{{$start.userChatInput$}}","condition":"include","value":"c"},
			{"variable":"{{$start.userChatInput$}}","condition":"lengthGreaterThan","value":3}]}]}},
	{"nodeId":"if0","type":"answerNode","inputs":{"text":"if"}},
	{"nodeId":"if1","type":"answerNode","inputs":{"text":"else if 1"}},
	{"nodeId":"if2","type":"answerNode","inputs":{"text":"else if 2"}},
	{"nodeId":"else","type":"answerNode","inputs":{"text":"else"}},
	{"nodeId":"end","type":"answerNode","inputs":{"text":"took {{$if.ifElseResult$}}"}}],
	"edges":[{"source":"start","target":"if"},
		{"source":"if","target":"if0","sourceHandle":"IF"},{"source":"if","target":"if1","sourceHandle":"ELSE IF 1"},
		{"source":"if","target":"if2","sourceHandle":"ELSE IF 2"},{"source":"if","target":"else","sourceHandle":"ELSE"},
		{"source":"if0","target":"end"},{"source":"if1","target":"end"},{"source":"if2","target":"end"},{"source":"else","target":"end"}]}`

func TestIfElseTakesTheFirstBranchThatHolds(t *testing.T) {
	e := engine(t)
	g := graph(t, branchesGraph)
	if err := e.Check(g); err != nil {
		t.Fatalf("the graph is refused: %v", err)
	}
	tests := []struct {
		question, branch, ran string
	}{
		{"a", "IF", "if0"},
		{"bx", "ELSE IF 1", "if1"},
		{"xz", "ELSE IF 1", "if1"},
		{"bcccz", "ELSE IF 1", "if1"}, // ELSE IF 2 holds too, but comes later
		{"cccc", "ELSE IF 2", "if2"},
		{"cc", "ELSE", "else"},
		{"", "ELSE", "else"},
	}
	for _, tt := range tests {
		t.Run(tt.question, func(t *testing.T) {
			res, answer := run(t, e, g, nodes.Chat{Question: tt.question})
			if res.Failed != "" {
				t.Fatal(res.Failed)
			}
			got := ran(res)
			for _, id := range []string{"if0", "if1", "if2", "else"} {
				if _, did := got[id]; did != (id == tt.ran) {
					t.Errorf("node %s ran: %v, want only %s to run", id, did, tt.ran)
				}
			}
			cond := got["if"]
			if cond.Outputs["ifElseResult"] != tt.branch || len(cond.Branches) != 1 || cond.Branches[0] != tt.branch {
				t.Fatalf("the node's output %v and branches %v, want %q", cond.Outputs["ifElseResult"], cond.Branches, tt.branch)
			}
			if !strings.HasSuffix(answer, "took "+tt.branch) {
				t.Fatalf("answer %q: the node after the branches did not run, or saw another result", answer)
			}
		})
	}
}

func TestIfElseFailsOnABadRegularExpression(t *testing.T) {
	e := engine(t)
	// The pattern comes from the question, so only the run can find it bad.
	g := graph(t, `{"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"if","type":"ifElseNode","name":"Route","inputs":{"ifElseList":[{"condition":"AND","list":[
			{"variable":"{{$start.userChatInput$}}","condition":"reg","value":"{{$start.userChatInput$}}","valueType":"reference"}]}]}},
		{"nodeId":"yes","type":"answerNode","inputs":{"text":"yes"}}],
		"edges":[{"source":"start","target":"if"},{"source":"if","target":"yes","sourceHandle":"IF"}]}`)
	if err := e.Check(g); err != nil {
		t.Fatalf("the graph is refused: %v", err)
	}
	res, _ := run(t, e, g, nodes.Chat{Question: "(a"})
	if !strings.Contains(res.Failed, "node Route failed") || !strings.Contains(res.Failed, "branch IF: condition 1") ||
		!strings.Contains(res.Failed, `regular expression "(a" is not valid`) {
		t.Fatalf("Failed = %q, want it to name the node, the condition and the pattern", res.Failed)
	}
	if _, did := ran(res)["yes"]; did {
		t.Fatal("a branch ran after the node failed")
	}
}

func TestNestedReferencesOrderTheNodes(t *testing.T) {
	e := engine(t)
	// No edge from text to if: only the reference inside the condition
	// says that if must wait for text.
	g := graph(t, `{"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"text","type":"textEditor","inputs":{"system_textareaInput":"<{{$start.userChatInput$}}>"}},
		{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":[{"condition":"AND","list":[
			{"variable":"{{$text.system_text$}}","condition":"equalTo","value":"<q>"}]}]}},
		{"nodeId":"yes","type":"answerNode","inputs":{"text":"yes"}},
		{"nodeId":"no","type":"answerNode","inputs":{"text":"no"}}],
		"edges":[{"source":"start","target":"text"},{"source":"start","target":"if"},
			{"source":"if","target":"yes","sourceHandle":"IF"},{"source":"if","target":"no","sourceHandle":"ELSE"}]}`)
	for i := 0; i < 20; i++ {
		res, answer := run(t, e, g, nodes.Chat{Question: "q"})
		if answer != "yes" {
			t.Fatalf("answer %q, want yes: the condition ran before the node it references (inputs %v)", answer, ran(res)["if"].Inputs)
		}
	}
}

func TestNestedReferencesResolveWithTheirTypes(t *testing.T) {
	e := engine(t)
	g := graph(t, `{"variables":[{"key":"n","type":"number","defaultValue":2}],
		"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"loop","type":"loop","inputs":{"loopInputArray":["{{$start.userChatInput$}}","{{$VARIABLE_NODE_ID.n$}}","n={{$VARIABLE_NODE_ID.n$}}"]}},
		{"nodeId":"ls","type":"loopStart","parentNodeId":"loop"},
		{"nodeId":"le","type":"loopEnd","parentNodeId":"loop","inputs":{"loopEndInput":"{{$ls.loopStartInput$}}"}}],
		"edges":[{"source":"start","target":"loop"},{"source":"ls","target":"le"}]}`)
	res, _ := run(t, e, g, nodes.Chat{Question: "q"})
	got, _ := json.Marshal(ran(res)["loop"].Outputs["loopArray"])
	if string(got) != `["q",2,"n=2"]` {
		t.Fatalf("loop results %s, want the list's references resolved, a whole reference keeping its type", got)
	}
}

func TestTextEditor(t *testing.T) {
	e := engine(t)
	tests := []struct {
		name, text, want string
	}{
		{"fixed text", "hello", "hello"},
		{"references in text", "Q: {{$start.userChatInput$}}, n={{$VARIABLE_NODE_ID.n$}}", "Q: why?, n=3"},
		{"a whole reference to a number", "{{$VARIABLE_NODE_ID.n$}}", "3"},
		{"an object as JSON", "obj: {{$VARIABLE_NODE_ID.o$}}", `obj: {"a":[1,true]}`},
		{"a missing value as nothing", "[{{$VARIABLE_NODE_ID.empty$}}]", "[]"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, _ := json.Marshal(tt.text)
			g := graph(t, fmt.Sprintf(`{"variables":[{"key":"n","type":"number","defaultValue":3},
				{"key":"o","type":"json","defaultValue":{"a":[1,true]}},{"key":"empty","type":"string"}],
				"nodes":[{"nodeId":"start","type":"workflowStart"},
				{"nodeId":"t","type":"textEditor","inputs":{"system_textareaInput":%s}},
				{"nodeId":"say","type":"answerNode","inputs":{"text":"{{$t.system_text$}}"}}],
				"edges":[{"source":"start","target":"t"},{"source":"t","target":"say"}]}`, text))
			if err := e.Check(g); err != nil {
				t.Fatalf("the graph is refused: %v", err)
			}
			res, answer := run(t, e, g, nodes.Chat{Question: "why?"})
			if res.Failed != "" {
				t.Fatal(res.Failed)
			}
			if out := ran(res)["t"].Outputs["system_text"]; out != tt.want || answer != tt.want {
				t.Fatalf("system_text %q, answered %q, want %q", out, answer, tt.want)
			}
		})
	}
}

// updateGraph declares n (number), name (string), lang (select en/zh) and
// data (json); start → update (with the given updateList) → if n > 4 →
// say all variables, else say "small".
func updateGraph(t *testing.T, updateList string) *nodes.Graph {
	t.Helper()
	return graph(t, `{"variables":[{"key":"n","type":"number","defaultValue":1},{"key":"name","type":"string","defaultValue":"nobody"},
		{"key":"lang","type":"select","options":["en","zh"],"defaultValue":"en"},{"key":"data","type":"json"}],
		"nodes":[{"nodeId":"start","type":"workflowStart"},
		{"nodeId":"up","type":"variableUpdate","name":"Set","inputs":{"updateList":`+updateList+`}},
		{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":[{"condition":"AND","list":[
			{"variable":"{{$VARIABLE_NODE_ID.n$}}","condition":"greaterThan","value":4}]}]}},
		{"nodeId":"say","type":"answerNode","inputs":{"text":"{{$VARIABLE_NODE_ID.n$}} {{$VARIABLE_NODE_ID.name$}} {{$VARIABLE_NODE_ID.lang$}} {{$VARIABLE_NODE_ID.data$}}"}},
		{"nodeId":"small","type":"answerNode","inputs":{"text":"small"}}],
		"edges":[{"source":"start","target":"up"},{"source":"up","target":"if"},
			{"source":"if","target":"say","sourceHandle":"IF"},{"source":"if","target":"small","sourceHandle":"ELSE"}]}`)
}

func TestVariableUpdate(t *testing.T) {
	e := engine(t)
	tests := []struct {
		name, updates string
		question      string
		want          string // the answer; or, with failed, what Failed says
		failed        bool
	}{
		{"written values", `[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":5,"renderType":"input"},
			{"variable":"{{$VARIABLE_NODE_ID.name$}}","value":"Ann","renderType":"input"},
			{"variable":"{{$VARIABLE_NODE_ID.lang$}}","value":"zh"},
			{"variable":"{{$VARIABLE_NODE_ID.data$}}","value":{"k":[1]}}]`, "q", `5 Ann zh {"k":[1]}`, false},
		{"values by reference", `[{"variable":"{{$VARIABLE_NODE_ID.name$}}","value":"{{$start.userChatInput$}}","renderType":"reference"},
			{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":7}]`, "Bo", "7 Bo en ", false},
		{"references inside written text", `[{"variable":"{{$VARIABLE_NODE_ID.name$}}","value":"Dr {{$start.userChatInput$}}"},
			{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":9}]`, "Who", "9 Dr Who en ", false},
		{"the last update of a variable wins", `[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":5},{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":2}]`, "q", "small", false},
		{"a number variable given text", `[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":"{{$start.userChatInput$}}","renderType":"reference"}]`,
			"five", `node Set failed: variable "n": the new value must be a number, and it is text "five"`, true},
		{"a select given another option", `[{"variable":"{{$VARIABLE_NODE_ID.lang$}}","value":"{{$start.userChatInput$}}","renderType":"reference"}]`,
			"fr", `variable "lang": the new value must be one of en, zh, and it is text "fr"`, true},
		{"a node's output", `[{"variable":"{{$start.userChatInput$}}","value":"x"}]`,
			"q", "update 1: start.userChatInput is a node's output, which cannot be changed", true},
		{"a system variable", `[{"variable":"{{$VARIABLE_NODE_ID.chatId$}}","value":"x"}]`,
			"q", "update 1: chatId is a system variable", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, answer := run(t, e, updateGraph(t, tt.updates), nodes.Chat{Question: tt.question})
			if tt.failed {
				if !strings.Contains(res.Failed, tt.want) {
					t.Fatalf("Failed = %q, want it to say %q", res.Failed, tt.want)
				}
				if _, did := ran(res)["if"]; did {
					t.Fatal("the nodes after the failed update ran")
				}
				return
			}
			if res.Failed != "" {
				t.Fatal(res.Failed)
			}
			if answer != tt.want {
				t.Fatalf("answer %q, want %q", answer, tt.want)
			}
		})
	}
}

func TestVariableUpdateRecordsWhatItSet(t *testing.T) {
	e := engine(t)
	res, _ := run(t, e, updateGraph(t, `[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":5}]`), nodes.Chat{Question: "q"})
	up := ran(res)["up"]
	got, _ := json.Marshal(up.Detail)
	if string(got) != `{"updateVarResult":[{"value":5,"variable":"n"}]}` {
		t.Fatalf("detail %s, want the variable and its new value", got)
	}
	// The run record shows the variable's value before the update.
	list, _ := up.Inputs["updateList"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["variable"] != 1.0 {
		t.Fatalf("recorded inputs %v, want the value before the update", up.Inputs)
	}
}

func TestVariableUpdateOfAnUndeclaredVariableIsRefused(t *testing.T) {
	e := engine(t)
	_, err := e.Run(context.Background(), updateGraph(t, `[{"variable":"{{$VARIABLE_NODE_ID.nope$}}","value":1}]`), nodes.Chat{}, nil)
	if !errors.Is(err, nodes.ErrInvalid) || !strings.Contains(err.Error(), `node "up" updateList: references the variable "nope"`) {
		t.Fatalf("err = %v, want the validator to name the node, the input and the variable", err)
	}
}

func TestCheckRefusesLogicNodes(t *testing.T) {
	e := engine(t)
	start := `{"nodeId":"start","type":"workflowStart"}`
	ifElse := func(list string) string {
		return `{"nodes":[` + start + `,{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":` + list + `}}],
			"edges":[{"source":"start","target":"if"}]}`
	}
	cond := func(c string) string { return `[{"condition":"AND","list":[` + c + `]}]` }
	update := func(list string) string {
		return `{"variables":[{"key":"n","type":"number"},{"key":"lang","type":"select","options":["en"]}],
			"nodes":[` + start + `,{"nodeId":"up","type":"variableUpdate","inputs":{"updateList":` + list + `}}],
			"edges":[{"source":"start","target":"up"}]}`
	}
	tests := []struct {
		name, graph string
		node, field string
		want        string
	}{
		{"a branch the node does not have", `{"nodes":[` + start + `,
			{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":[
				{"condition":"AND","list":[{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"}]},
				{"condition":"OR","list":[{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"}]}]}},
			{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}],
			"edges":[{"source":"start","target":"if"},{"source":"if","target":"a","sourceHandle":"ELSE IF 2"}]}`,
			"if", "sourceHandle", `the node has no branch "ELSE IF 2" (its branches: IF, ELSE IF 1, ELSE)`},
		{"the error branch, which it has not", `{"nodes":[` + start + `,
			{"nodeId":"if","type":"ifElseNode","inputs":{"ifElseList":` + cond(`{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"}`) + `}},
			{"nodeId":"a","type":"answerNode","inputs":{"text":"x"}}],
			"edges":[{"source":"start","target":"if"},{"source":"if","target":"a","sourceHandle":"catch"}]}`,
			"if", "sourceHandle", "no error branch"},
		{"no branches", ifElse(`[]`), "if", "ifElseList", "minItems"},
		{"an unknown operator", ifElse(cond(`{"variable":"{{$start.userChatInput$}}","condition":"sortOf"}`)),
			"if", "ifElseList/0/list/0/condition", "must be one of"},
		{"a join that is neither AND nor OR", ifElse(`[{"condition":"XOR","list":[{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"}]}]`),
			"if", "ifElseList/0/condition", "must be one of"},
		{"a variable that is no reference", ifElse(cond(`{"variable":"hello","condition":"isEmpty"}`)),
			"if", "ifElseList/0/list/0/variable", "branch IF, condition 1: choose what to compare"},
		{"a reference to a missing node", ifElse(cond(`{"variable":"{{$ghost.x$}}","condition":"isEmpty"}`)),
			"if", "ifElseList", `references node "ghost"`},
		{"a reference to a missing output in a value", ifElse(cond(`{"variable":"{{$start.userChatInput$}}","condition":"equalTo","value":"{{$start.nothing$}}","valueType":"reference"}`)),
			"if", "ifElseList", `have no output "nothing"`},
		{"a value marked as a reference that is none", ifElse(cond(`{"variable":"{{$start.userChatInput$}}","condition":"equalTo","value":"x","valueType":"reference"}`)),
			"if", "ifElseList/0/list/0/value", "marked as a reference but is not one"},
		{"a number operator with text", ifElse(cond(`{"variable":"{{$start.userChatInput$}}","condition":"greaterThan","value":"many"}`)),
			"if", "ifElseList/0/list/0/value", `greaterThan compares with a number, and the value is text "many"`},
		{"a length operator without a value", ifElse(cond(`{"variable":"{{$start.userChatInput$}}","condition":"lengthEqualTo"}`)),
			"if", "ifElseList/0/list/0/value", "lengthEqualTo compares with a number, and the value is nothing"},
		{"a bad regular expression", ifElse(`[{"condition":"AND","list":[{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"}]},
			{"condition":"AND","list":[{"variable":"{{$start.userChatInput$}}","condition":"isEmpty"},{"variable":"{{$start.userChatInput$}}","condition":"reg","value":"/(?=x)/"}]}]`),
			"if", "ifElseList/1/list/1/value", `branch ELSE IF 1, condition 2: the regular expression "/(?=x)/" is not valid`},
		{"text without its text", `{"nodes":[` + start + `,{"nodeId":"t","type":"textEditor"}],"edges":[{"source":"start","target":"t"}]}`,
			"t", "system_textareaInput", "missing"},
		{"text referencing a missing node", `{"nodes":[` + start + `,{"nodeId":"t","type":"textEditor","inputs":{"system_textareaInput":"{{$ghost.x$}}"}}],"edges":[{"source":"start","target":"t"}]}`,
			"t", "system_textareaInput", `references node "ghost"`},
		{"text referencing a missing node with escapes", `{"nodes":[` + start + `,{"nodeId":"t","type":"textEditor","inputs":{"system_textareaInput":"\u007b{$ghost.x$}}"}}],"edges":[{"source":"start","target":"t"}]}`,
			"t", "system_textareaInput", `references node "ghost"`},
		{"updating a node's output", update(`[{"variable":"{{$start.userChatInput$}}","value":"x"}]`),
			"up", "updateList/0/variable", "start.userChatInput is a node's output, which cannot be changed; only global variables can"},
		{"updating a system variable", update(`[{"variable":"{{$VARIABLE_NODE_ID.userId$}}","value":"x"}]`),
			"up", "updateList/0/variable", "userId is a system variable"},
		{"updating what is no reference", update(`[{"variable":"n","value":1}]`),
			"up", "updateList/0/variable", "choose the variable to change"},
		{"updating an undeclared variable", update(`[{"variable":"{{$VARIABLE_NODE_ID.nope$}}","value":1}]`),
			"up", "updateList", `references the variable "nope", which the app does not declare`},
		{"a number given text", update(`[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":"7"}]`),
			"up", "updateList/0/value", `variable "n": the new value must be a number, and it is text "7"`},
		{"a select given another option", update(`[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":1},{"variable":"{{$VARIABLE_NODE_ID.lang$}}","value":"de"}]`),
			"up", "updateList/1/value", `variable "lang": the new value must be one of en`},
		{"a value marked as a reference that is none", update(`[{"variable":"{{$VARIABLE_NODE_ID.n$}}","value":3,"renderType":"reference"}]`),
			"up", "updateList/0/value", "marked as a reference but is not one"},
		{"an update without a value", update(`[{"variable":"{{$VARIABLE_NODE_ID.n$}}"}]`),
			"up", "updateList/0/value", "missing"},
		{"no updates", update(`[]`), "up", "updateList", "minItems"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Check(graph(t, tt.graph))
			var invalid *nodes.ValidationError
			if !errors.As(err, &invalid) {
				t.Fatalf("Check = %v, want a refusal", err)
			}
			for _, p := range invalid.Problems {
				if p.NodeID == tt.node && p.Field == tt.field && strings.Contains(p.Message, tt.want) {
					return
				}
			}
			t.Fatalf("problems %+v, want one at node %q field %q saying %q", invalid.Problems, tt.node, tt.field, tt.want)
		})
	}
}

func TestLogicTemplates(t *testing.T) {
	e := engine(t)
	tests := []struct {
		typ, en, zh string
		outputs     []string
	}{
		{"ifElseNode", "Condition", "判断器", []string{"ifElseResult"}},
		{"textEditor", "Text concatenation", "文本拼接", []string{"system_text"}},
		{"variableUpdate", "Variable update", "变量更新", nil},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			tmpl := e.Templates[tt.typ]
			if tmpl == nil || e.Types[tt.typ] == nil {
				t.Fatalf("%s: template %v, installed %v", tt.typ, tmpl != nil, e.Types[tt.typ] != nil)
			}
			if tmpl.Label["en"] != tt.en || tmpl.Label["zh"] != tt.zh || tmpl.Group != "tools" {
				t.Fatalf("label %v, group %q", tmpl.Label, tmpl.Group)
			}
			if len(tmpl.Outputs) != len(tt.outputs) {
				t.Fatalf("outputs %v, want %v", tmpl.Outputs, tt.outputs)
			}
			for _, o := range tt.outputs {
				if tmpl.Outputs[o].Type != "string" {
					t.Fatalf("output %s: %+v", o, tmpl.Outputs[o])
				}
			}
			if _, ok := e.Types[tt.typ].(nodes.Brancher); ok != (tt.typ == "ifElseNode") || tmpl.Branches != ok {
				t.Fatalf("brancher %v, x-branches %v", ok, tmpl.Branches)
			}
		})
	}
}

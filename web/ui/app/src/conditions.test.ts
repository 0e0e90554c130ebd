import {
  branchName,
  branchesFrom,
  defaultOperator,
  edgesWithout,
  fitsVariable,
  isReference,
  newBranch,
  newCondition,
  newUpdate,
  numericValue,
  operators,
  operatorsFor,
  problemsAt,
  shownValue,
  takesValue,
  typedValue,
  updatesFrom,
  valueTypeFor,
  withGivenAs,
  withOperator,
  withVariable,
} from "./conditions";
import { branchesOf } from "./graph";

describe("operators", () => {
  it("offers those that mean something for the variable's type", () => {
    expect(operatorsFor("string")).toEqual([
      "equalTo",
      "notEqual",
      "isEmpty",
      "isNotEmpty",
      "include",
      "notInclude",
      "startWith",
      "endWith",
      "reg",
      "lengthEqualTo",
      "lengthNotEqualTo",
      "lengthGreaterThan",
      "lengthGreaterThanOrEqualTo",
      "lengthLessThan",
      "lengthLessThanOrEqualTo",
    ]);
    const numbers = ["equalTo", "notEqual", "isEmpty", "isNotEmpty", "greaterThan", "greaterThanOrEqualTo", "lessThan", "lessThanOrEqualTo"];
    expect(operatorsFor("number")).toEqual(numbers);
    expect(operatorsFor("integer")).toEqual(numbers);
    expect(operatorsFor("boolean")).toEqual(["equalTo", "notEqual", "isEmpty", "isNotEmpty"]);
    expect(operatorsFor("array")).toEqual([
      "isEmpty",
      "isNotEmpty",
      "include",
      "notInclude",
      "lengthEqualTo",
      "lengthNotEqualTo",
      "lengthGreaterThan",
      "lengthGreaterThanOrEqualTo",
      "lengthLessThan",
      "lengthLessThanOrEqualTo",
    ]);
    expect(operatorsFor("arrayString")).toEqual(operatorsFor("array"));
    expect(operatorsFor("object")).toEqual(["isEmpty", "isNotEmpty"]);
  });
  it("offers all of them when the type is not known", () => {
    for (const type of ["any", "", "something new"]) expect(operatorsFor(type)).toEqual(operators);
    expect(operators).toHaveLength(19);
  });
  it("knows which compare with a value, and which with a number", () => {
    expect(operators.filter((o) => !takesValue(o))).toEqual(["isEmpty", "isNotEmpty"]);
    expect(operators.filter(numericValue)).toEqual([
      "greaterThan",
      "greaterThanOrEqualTo",
      "lessThan",
      "lessThanOrEqualTo",
      "lengthEqualTo",
      "lengthNotEqualTo",
      "lengthGreaterThan",
      "lengthGreaterThanOrEqualTo",
      "lengthLessThan",
      "lengthLessThanOrEqualTo",
    ]);
  });
  it("says what type a value given by reference should have", () => {
    const cases: [string, string, string][] = [
      ["isEmpty", "string", ""],
      ["greaterThan", "any", "number"],
      ["lengthLessThan", "array", "number"],
      ["include", "string", "string"],
      ["include", "array", "any"],
      ["reg", "any", "string"],
      ["equalTo", "number", "number"],
      ["equalTo", "boolean", "boolean"],
      ["equalTo", "any", "any"],
      ["notEqual", "", "any"],
    ];
    for (const [op, type, want] of cases) expect([op, type, valueTypeFor(op, type)]).toEqual([op, type, want]);
  });
  it("starts a variable's condition with an operator that takes a value", () => {
    expect(defaultOperator("string")).toBe("equalTo");
    expect(defaultOperator("array")).toBe("include");
    expect(defaultOperator("object")).toBe("isEmpty");
  });
});

describe("a condition being edited", () => {
  it("starts blank, typed, comparing for equality", () => {
    expect(newCondition()).toEqual({ variable: "", condition: "equalTo", value: "", valueType: "input" });
    expect(newBranch()).toEqual({ condition: "AND", list: [newCondition()] });
  });
  it("drops its value for an operator that takes none, and gets a typed one back", () => {
    const c = { variable: "{{$a.b$}}", condition: "include", value: "x", valueType: "input" as const };
    const empty = withOperator(c, "isEmpty");
    expect(empty).toEqual({ variable: "{{$a.b$}}", condition: "isEmpty" });
    expect(withOperator(empty, "startWith")).toEqual({ variable: "{{$a.b$}}", condition: "startWith", value: "", valueType: "input" });
    expect(withOperator(c, "notInclude")).toEqual({ ...c, condition: "notInclude" });
  });
  it("keeps its operator for a variable it fits, else takes the type's first", () => {
    const c = { variable: "", condition: "include", value: "x", valueType: "input" as const };
    expect(withVariable(c, "{{$start.userChatInput$}}", "string")).toEqual({ ...c, variable: "{{$start.userChatInput$}}" });
    expect(withVariable(c, "{{$n.count$}}", "number")).toEqual({ ...c, variable: "{{$n.count$}}", condition: "equalTo" });
    expect(withVariable(c, "{{$n.obj$}}", "object")).toEqual({ variable: "{{$n.obj$}}", condition: "isEmpty" });
    expect(withVariable(c, "{{$n.x$}}", "any").condition).toBe("include");
  });
  it("chooses a reference anew when the value becomes one, and keeps a typed value", () => {
    const c = { variable: "{{$a.b$}}", condition: "equalTo", value: "typed", valueType: "input" as const };
    expect(withGivenAs(c, "reference")).toEqual({ ...c, value: "", valueType: "reference" });
    expect(withGivenAs({ ...c, value: "{{$x.y$}}" }, "reference")).toEqual({ ...c, value: "{{$x.y$}}", valueType: "reference" });
    expect(withGivenAs({ ...c, value: "{{$x.y$}}", valueType: "reference" }, "input")).toEqual({ ...c, value: "{{$x.y$}}" });
  });
  it("tells one reference from text", () => {
    expect(isReference("{{$start.userChatInput$}}")).toBe(true);
    expect(isReference(" {{$VARIABLE_NODE_ID.mood$}} ")).toBe(true);
    expect(isReference("say {{$a.b$}}")).toBe(false);
    expect(isReference("{{$a.b$}}{{$c.d$}}")).toBe(false);
    expect(isReference(3)).toBe(false);
  });
});

describe("the lists as the graph holds them", () => {
  it("names the branches as the node's handles are named", () => {
    const node = { nodeId: "if", type: "ifElseNode", inputs: { ifElseList: [newBranch(), newBranch(), newBranch()] } };
    expect([0, 1, 2].map(branchName)).toEqual(branchesOf(node).slice(0, -1));
  });
  it("reads a branch list, one blank branch for none, null for what is not one", () => {
    expect(branchesFrom(undefined)).toEqual([newBranch()]);
    expect(branchesFrom([])).toEqual([newBranch()]);
    const list = [{ condition: "OR", list: [{ variable: "{{$a.b$}}", condition: "isEmpty" }] }];
    expect(branchesFrom(list)).toEqual(list);
    expect(branchesFrom([{ list: [] }])).toEqual([newBranch()]);
    expect(branchesFrom("{{$a.b$}}")).toBeNull();
    expect(branchesFrom([{ condition: "AND", list: "x" }])).toBeNull();
    expect(branchesFrom([3])).toBeNull();
  });
  it("reads an update list likewise", () => {
    expect(updatesFrom(undefined)).toEqual([newUpdate()]);
    expect(newUpdate()).toEqual({ variable: "", value: "", renderType: "input" });
    const list = [{ variable: "{{$VARIABLE_NODE_ID.mood$}}", value: "calm" }];
    expect(updatesFrom(list)).toEqual(list);
    expect(updatesFrom({ variable: "x" })).toBeNull();
  });
  it("moves the edges of the later branches when a branch is deleted", () => {
    const edges = [
      { source: "start", target: "if" },
      { source: "if", target: "a", sourceHandle: "IF" },
      { source: "if", target: "b", sourceHandle: "ELSE IF 1" },
      { source: "if", target: "c", sourceHandle: "ELSE IF 2" },
      { source: "if", target: "d", sourceHandle: "ELSE" },
      { source: "other", target: "e", sourceHandle: "ELSE IF 2" },
    ];
    expect(edgesWithout(edges, "if", 1)).toEqual([
      { source: "start", target: "if" },
      { source: "if", target: "a", sourceHandle: "IF" },
      { source: "if", target: "c", sourceHandle: "ELSE IF 1" },
      { source: "if", target: "d", sourceHandle: "ELSE" },
      { source: "other", target: "e", sourceHandle: "ELSE IF 2" },
    ]);
    expect(edgesWithout(edges, "if", 0).filter((e) => e.source === "if")).toEqual([
      { source: "if", target: "b", sourceHandle: "IF" },
      { source: "if", target: "c", sourceHandle: "ELSE IF 1" },
      { source: "if", target: "d", sourceHandle: "ELSE" },
    ]);
  });
  it("picks the problems the engine placed inside a row", () => {
    const problems = [
      { field: "ifElseList/0/list/1/value", message: "a" },
      { field: "ifElseList/0/list/10/value", message: "b" },
      { field: "ifElseList/0", message: "c" },
      { field: "ifElseList", message: "d" },
    ];
    expect(problemsAt(problems, "ifElseList/0/list/1").map((p) => p.message)).toEqual(["a"]);
    expect(problemsAt(problems, "ifElseList/0").map((p) => p.message)).toEqual(["a", "b", "c"]);
  });
});

describe("a new value for a global variable", () => {
  it("is read as the variable's type wants it, else stays text for the engine to name", () => {
    const cases: [string, string, unknown][] = [
      ["string", " 3 ", " 3 "],
      ["number", "3.5", 3.5],
      ["number", " 42 ", 42],
      ["number", "", ""],
      ["number", "many", "many"],
      ["boolean", "true", true],
      ["boolean", "false", false],
      ["boolean", "maybe", "maybe"],
      ["select", "tea", "tea"],
      ["json", '{"a": [1]}', { a: [1] }],
      ["json", "not json", "not json"],
    ];
    for (const [type, text, want] of cases) expect([type, text, typedValue(type, text)]).toEqual([type, text, want]);
  });
  it("fits its variable as the engine checks it", () => {
    expect(fitsVariable({ type: "string" }, "x")).toBe(true);
    expect(fitsVariable({ type: "string" }, 3)).toBe(false);
    expect(fitsVariable({ type: "number" }, "3")).toBe(false);
    expect(fitsVariable({ type: "boolean" }, false)).toBe(true);
    expect(fitsVariable({ type: "select", options: ["tea", "coffee"] }, "tea")).toBe(true);
    expect(fitsVariable({ type: "select", options: ["tea"] }, "milk")).toBe(false);
    expect(fitsVariable({ type: "json" }, [1])).toBe(true);
  });
  it("is shown as text", () => {
    expect([undefined, null, "x", 3, true, { a: 1 }].map(shownValue)).toEqual(["", "", "x", "3", "true", '{"a":1}']);
  });
});

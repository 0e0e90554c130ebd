// The condition node's branches (ifElseList) and the variable update
// node's updates (updateList) in FastGPT's shapes, and the rules their
// side-panel editors follow. The operators mean what nodes/logic.go makes
// of them.
import type { GraphEdge } from "./graph";

export type Join = "AND" | "OR";
export type GivenAs = "input" | "reference";

// Condition compares a variable (one reference) with a value.
export interface Condition {
  variable: string;
  condition: string;
  value?: unknown;
  valueType?: GivenAs;
}

export interface Branch {
  condition: Join;
  list: Condition[];
}

// Update gives a global variable a new value; valueType is the
// variable's type as the builder saw it, renderType how the value is given.
export interface Update {
  variable: string;
  value: unknown;
  valueType?: string;
  renderType?: GivenAs;
}

// operators are the condition node's, in the order the editor lists them.
export const operators = [
  "equalTo",
  "notEqual",
  "isEmpty",
  "isNotEmpty",
  "include",
  "notInclude",
  "startWith",
  "endWith",
  "reg",
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
];

const emptiness = ["isEmpty", "isNotEmpty"];
const equality = ["equalTo", "notEqual"];
const texts = ["include", "notInclude", "startWith", "endWith", "reg"];
const order = ["greaterThan", "greaterThanOrEqualTo", "lessThan", "lessThanOrEqualTo"];
const lengths = operators.filter((o) => o.startsWith("length"));

// kindOf sorts a value type into what the operators tell apart; "" is a
// type not known (any, or nothing chosen yet).
export function kindOf(type: string): "string" | "number" | "boolean" | "array" | "object" | "" {
  if (type === "string") return "string";
  if (type === "number" || type === "integer") return "number";
  if (type === "boolean") return "boolean";
  if (type === "object") return "object";
  if (type.startsWith("array") || type === "chatHistory") return "array";
  return "";
}

// operatorsFor lists the operators that mean something for a variable of
// the type: the engine applies text operators to text only, order
// operators to numbers, length operators to texts and lists, include to
// a text or a list's items; an object is only empty or not.
export function operatorsFor(type: string): string[] {
  let allowed: string[];
  switch (kindOf(type)) {
    case "string":
      allowed = [...equality, ...emptiness, ...texts, ...lengths];
      break;
    case "number":
      allowed = [...equality, ...emptiness, ...order];
      break;
    case "boolean":
      allowed = [...equality, ...emptiness];
      break;
    case "array":
      allowed = [...emptiness, "include", "notInclude", ...lengths];
      break;
    case "object":
      allowed = emptiness;
      break;
    default:
      return operators;
  }
  return operators.filter((o) => allowed.includes(o));
}

// takesValue reports whether an operator compares with a value: the
// emptiness ones look at the variable alone.
export const takesValue = (op: string) => !emptiness.includes(op);

// numericValue reports whether an operator compares with a number (order
// and length operators).
export const numericValue = (op: string) => order.includes(op) || lengths.includes(op);

// valueTypeFor is the type a value given by reference should have for an
// operator on a variable of the type ("any": whatever; "": none at all).
export function valueTypeFor(op: string, type: string): string {
  if (!takesValue(op)) return "";
  if (numericValue(op)) return "number";
  if (op === "include" || op === "notInclude") return kindOf(type) === "array" ? "any" : "string";
  if (texts.includes(op)) return "string";
  return kindOf(type) || "any";
}

// defaultOperator is the first operator for the type that compares with
// a value (equalTo for most), else the first there is.
export function defaultOperator(type: string): string {
  const ops = operatorsFor(type);
  return ops.find(takesValue) ?? ops[0];
}

export const newCondition = (): Condition => ({ variable: "", condition: "equalTo", value: "", valueType: "input" });

export const newBranch = (): Branch => ({ condition: "AND", list: [newCondition()] });

// withOperator is the condition with another operator: without a value
// for the operators that take none, with an empty typed one where it had
// none before.
export function withOperator(c: Condition, op: string): Condition {
  const { value, valueType, ...rest } = c;
  if (!takesValue(op)) return { ...rest, condition: op };
  return { ...rest, condition: op, value: value ?? "", valueType: valueType ?? "input" };
}

// withVariable is the condition on another variable, of the type given:
// the operator stays when it fits the type, else becomes the type's first.
export function withVariable(c: Condition, variable: string, type: string): Condition {
  const next = { ...c, variable };
  return operatorsFor(type).includes(c.condition) ? next : withOperator(next, defaultOperator(type));
}

// withGivenAs switches how the value is given: a typed value stays as it
// is (references in text are replaced by text), a reference is chosen
// anew unless the value already is one.
export function withGivenAs(c: Condition, valueType: GivenAs): Condition {
  if (valueType === "reference" && !isReference(c.value)) return { ...c, valueType, value: "" };
  return { ...c, valueType };
}

// isReference reports whether a value is exactly one reference, spaces
// around it aside (the engine's rule).
export const isReference = (v: unknown) => typeof v === "string" && /^\{\{\$[A-Za-z0-9_-]+\.[A-Za-z0-9_]+\$\}\}$/.test(v.trim());

// branchName is the name of branch i, as its handle on the canvas (and
// the engine) calls it.
export const branchName = (i: number) => (i === 0 ? "IF" : "ELSE IF " + i);

const isRecord = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

// branchesFrom reads the node's ifElseList for the editor: one blank
// branch when it has none yet, null when it is not a list of branches (the
// panel then shows it as JSON rather than lose it).
export function branchesFrom(v: unknown): Branch[] | null {
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) return [newBranch()];
  if (!Array.isArray(v) || !v.every((b) => isRecord(b) && (b.list === undefined || (Array.isArray(b.list) && b.list.every(isRecord)))))
    return null;
  return (v as Record<string, unknown>[]).map((b) => ({
    ...b,
    condition: b.condition === "OR" ? "OR" : "AND",
    list: Array.isArray(b.list) && b.list.length > 0 ? (b.list as unknown as Condition[]) : [newCondition()],
  }));
}

// updatesFrom reads the node's updateList for the editor, like branchesFrom.
export function updatesFrom(v: unknown): Update[] | null {
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) return [newUpdate()];
  if (!Array.isArray(v) || !v.every(isRecord)) return null;
  return v as unknown as Update[];
}

export const newUpdate = (): Update => ({ variable: "", value: "", renderType: "input" });

// edgesWithout is the graph's edges once branch removed of the node is
// deleted: its edges go, and those of the branches after it follow their
// branch to its new name (ELSE IF 2 becomes ELSE IF 1, ELSE IF 1 IF).
export function edgesWithout(edges: GraphEdge[], nodeId: string, removed: number): GraphEdge[] {
  const index = (handle: string | undefined) => {
    if (handle === "IF") return 0;
    const m = /^ELSE IF (\d+)$/.exec(handle ?? "");
    return m ? Number(m[1]) : -1;
  };
  const out: GraphEdge[] = [];
  for (const e of edges) {
    const i = e.source === nodeId ? index(e.sourceHandle) : -1;
    if (i === removed) continue;
    out.push(i > removed ? { ...e, sourceHandle: branchName(i - 1) } : e);
  }
  return out;
}

// typedValue reads a new value typed for a variable of the declared type
// (string, number, boolean, select, json) as the engine wants it; what
// does not read as the type stays text, for the engine to name.
export function typedValue(type: string, text: string): unknown {
  const s = text.trim();
  switch (type) {
    case "number":
      return s !== "" && Number.isFinite(Number(s)) ? Number(s) : text;
    case "boolean":
      return s === "true" ? true : s === "false" ? false : text;
    case "json":
      try {
        return JSON.parse(s);
      } catch {
        return text;
      }
  }
  return text;
}

// fitsVariable reports whether a value fits a global variable as the
// engine checks it: text for text, a number for a number, true or false,
// one of a select's options; JSON takes anything.
export function fitsVariable(v: { type: string; options?: string[] }, value: unknown): boolean {
  switch (v.type) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number";
    case "boolean":
      return typeof value === "boolean";
    case "select":
      return typeof value === "string" && (v.options ?? []).includes(value);
  }
  return true;
}

// shownValue is a value as its text input shows it.
export const shownValue = (v: unknown) => (v === undefined || v === null ? "" : typeof v === "string" ? v : JSON.stringify(v));

// problemsAt picks the problems the engine placed at a path of the list
// (field "ifElseList/0/list/1/value" is at "ifElseList/0/list/1" and at
// "ifElseList/0").
export const problemsAt = <P extends { field?: string }>(problems: P[], path: string) =>
  problems.filter((p) => p.field === path || p.field?.startsWith(path + "/"));

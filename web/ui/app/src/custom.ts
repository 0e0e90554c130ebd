// A node's custom inputs (FastGPT's dynamic inputs): the code and HTTP
// nodes take, beside their own inputs, any inputs the builder names, each
// a value or a reference. They are the node's top-level inputs whose keys
// the schema does not list, named as its patternProperties allow.
import type { Template } from "./templates";

// takesCustom reports whether a node type takes custom inputs.
export const takesCustom = (t: Template | undefined) => !!t && Object.keys(t.schema.patternProperties ?? {}).length > 0;

// customInputs lists a node's custom inputs, in their order.
export function customInputs(t: Template, inputs: Record<string, unknown>): [string, unknown][] {
  const own = t.schema.properties ?? {};
  return Object.entries(inputs).filter(([k]) => !(k in own));
}

// keyProblem says what is wrong with a new key for a custom input, or ""
// when it will do: it must match the type's pattern, and be no input the
// node has already (its own or another custom one).
export function keyProblem(t: Template, inputs: Record<string, unknown>, key: string, from?: string): "" | "empty" | "pattern" | "taken" {
  if (key === "") return "empty";
  const patterns = Object.keys(t.schema.patternProperties ?? {});
  if (!patterns.some((p) => new RegExp(p).test(key))) return "pattern";
  if (key !== from && (key in inputs || key in (t.schema.properties ?? {}))) return "taken";
  return "";
}

// renamed is the inputs with one key renamed, its place in the order kept.
export function renamed(inputs: Record<string, unknown>, from: string, to: string): Record<string, unknown> {
  return Object.fromEntries(Object.entries(inputs).map(([k, v]) => [k === from ? to : k, v]));
}

// freeKey is the first of input1, input2, ... that the node does not have.
export function freeKey(t: Template, inputs: Record<string, unknown>): string {
  for (let i = 1; ; i++) {
    const k = "input" + i;
    if (keyProblem(t, inputs, k) === "") return k;
  }
}

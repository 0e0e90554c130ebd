// The node types the engine offers (GET /api/node-templates), and what
// the palette and the side panel read of them.
import type { Graph, GraphNode } from "./graph";

export interface Output {
  type: string;
  "x-label"?: Record<string, string>;
}

export interface Template {
  type: string;
  label: Record<string, string>;
  description: string;
  group: string;
  catch?: boolean;
  branches?: boolean;
  dynamicOutputs?: boolean;
  // a list input whose records' keys are outputs too
  outputsFrom?: string;
  outputs: Record<string, Output>;
  schema: {
    properties?: Record<string, Property>;
    // inputs the builder names (custom inputs), by the keys' patterns
    patternProperties?: Record<string, Property>;
    required?: string[];
  };
}

export interface Property {
  type?: string | string[];
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  items?: { type?: string; properties?: Record<string, Property>; required?: string[] };
  "x-label"?: Record<string, string>;
  "x-description"?: Record<string, string>;
  "x-render"?: string;
  "x-reference"?: string;
  description?: string;
}

export type Templates = Record<string, Template>;

// The palette's groups, in FastGPT's order; "hidden" types (the start,
// a loop's start and end) are placed by the canvas, not the builder.
export const groups = ["ai", "tools", "interactive", "other"];

export const label = (t: Template | undefined, lang: string, fallback: string) =>
  (t && (t.label[lang] || t.label.en)) || fallback;

// palette lists the types a builder may add, by group, those matching the
// search (in a label of either language, the type or the description).
export function palette(ts: Templates, search: string): { group: string; types: Template[] }[] {
  const q = search.trim().toLowerCase();
  const match = (t: Template) =>
    !q || [t.type, t.description, ...Object.values(t.label)].some((s) => (s || "").toLowerCase().includes(q));
  return groups
    .map((group) => ({
      group,
      types: Object.values(ts)
        .filter((t) => t.group === group && match(t))
        .sort((a, b) => a.type.localeCompare(b.type)),
    }))
    .filter((g) => g.types.length > 0);
}

// Field is one input as the side panel draws it.
export interface Field {
  key: string;
  label: string;
  hint: string;
  // how to draw it: switch, number, select, text, textarea, lines (a list
  // of texts, one per line), choices (skills or tools), reference (a pick
  // from what comes before), json
  kind: string;
  type: string;
  required: boolean;
  options?: unknown[];
  min?: number;
  max?: number;
  // the value the engine uses when the node gives none
  def?: unknown;
  // for a list of records: each record's fields
  items?: Record<string, Property>;
  // the schema's x-render: an editor of its own (ifElse, variableUpdate)
  // or a hint for the kind (switch, textarea)
  render?: string;
}

export function fields(t: Template, lang: string): Field[] {
  const props = t.schema.properties ?? {};
  const required = new Set(t.schema.required ?? []);
  return Object.entries(props).map(([key, p]) => {
    const type = (Array.isArray(p.type) ? p.type[0] : p.type) ?? p["x-reference"] ?? "any";
    const render = p["x-render"];
    let kind: string;
    if (key === "skills" || key === "tools") kind = "choices";
    else if (render === "switch" || type === "boolean") kind = "switch";
    else if (p.enum) kind = "select";
    else if (p["x-reference"]) kind = "reference";
    else if (type === "integer" || type === "number") kind = "number";
    else if (type === "array" && p.items?.type === "string") kind = "lines";
    else if (type === "array" && p.items?.type === "object" && p.items.properties) kind = "rows";
    else if (type === "string" && (render === "textarea" || /prompt|text|code|content|description/i.test(key))) kind = "textarea";
    else if (type === "string") kind = "text";
    else if (render === "textarea") kind = "textarea";
    else kind = "json";
    return {
      key,
      label: p["x-label"]?.[lang] || p["x-label"]?.en || key,
      hint: p["x-description"]?.[lang] || p["x-description"]?.en || p.description || "",
      kind,
      type,
      required: required.has(key),
      options: p.enum,
      min: p.minimum,
      max: p.maximum,
      def: p.default,
      items: p.items?.properties,
      render,
    };
  });
}

// Source is a value a node may reference: an output of a node that runs
// before it, or a variable.
export interface Source {
  nodeId: string;
  nodeName: string;
  key: string;
  label: string;
  type: string;
}

export const variablesNode = "VARIABLE_NODE_ID";

export const reference = (s: { nodeId: string; key: string }) => "{{$" + s.nodeId + "." + s.key + "$}}";

// upstream lists what a node may reference: the outputs of the nodes
// that run before it (along edges, and for a node inside a loop those
// before it in the loop's body and before the loop), the app's variables
// and the system's.
export function upstream(g: Graph, nodeId: string, ts: Templates, lang: string, systemVariables: Record<string, string>): Source[] {
  const byId = new Map(g.nodes.map((n) => [n.nodeId, n]));
  const before = new Map<string, string[]>();
  for (const e of g.edges) before.set(e.target, [...(before.get(e.target) ?? []), e.source]);
  const seen = new Set<string>();
  const walk = (id: string) => {
    for (const s of before.get(id) ?? []) {
      if (!seen.has(s)) {
        seen.add(s);
        walk(s);
      }
    }
  };
  for (let n = byId.get(nodeId); n; n = n.parentNodeId ? byId.get(n.parentNodeId) : undefined) walk(n.nodeId);
  const out: Source[] = [];
  for (const n of g.nodes) {
    if (!seen.has(n.nodeId)) continue;
    const t = ts[n.type];
    const name = n.name || n.nodeId;
    for (const [key, o] of Object.entries(t?.outputs ?? {}))
      out.push({ nodeId: n.nodeId, nodeName: name, key, label: o["x-label"]?.[lang] || o["x-label"]?.en || key, type: o.type });
    for (const o of n.outputs ?? []) out.push({ nodeId: n.nodeId, nodeName: name, key: o.key, label: o.label || o.key, type: o.type || "any" });
    const records = t?.outputsFrom ? n.inputs?.[t.outputsFrom] : undefined;
    if (Array.isArray(records))
      for (const r of records as { key?: string; valueType?: string; desc?: string }[])
        if (r.key) out.push({ nodeId: n.nodeId, nodeName: name, key: r.key, label: r.desc || r.key, type: r.valueType || "string" });
    if (t?.catch) out.push({ nodeId: n.nodeId, nodeName: name, key: "error", label: "error", type: "string" });
  }
  for (const v of g.variables ?? []) {
    const type = v.type === "select" ? "string" : v.type === "json" ? "any" : v.type;
    out.push({ nodeId: variablesNode, nodeName: "", key: v.key, label: v.label || v.key, type });
  }
  for (const [key, type] of Object.entries(systemVariables))
    out.push({ nodeId: variablesNode, nodeName: "", key, label: key, type });
  return out;
}

// fits reports whether a value of type got may go where want is taken,
// by the engine's rule: equal types, or either side any.
export const fits = (got: string, want: string) =>
  !got || !want || got === "any" || want === "any" || got === want || (want === "number" && got === "integer") || (want === "integer" && got === "number");

// newNode is a node of type t with the template's defaults, named after
// its type, with an id no node of the graph has.
export function newNode(t: Template, g: Graph, lang: string): GraphNode {
  const taken = new Set(g.nodes.map((n) => n.nodeId));
  let i = 1;
  while (taken.has(t.type + i)) i++;
  const inputs: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(t.schema.properties ?? {})) if (p.default !== undefined) inputs[k] = p.default;
  return { nodeId: t.type + i, type: t.type, name: label(t, lang, t.type), inputs };
}

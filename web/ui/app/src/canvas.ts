// The canvas's state: the graph being edited with its nodes' positions,
// and the history that Undo and Redo walk. Every edit is an action; reduce
// is pure, so the rules are tested without a browser.
import {
  layout,
  positioned,
  sameEdge,
  withPositions,
  type Graph,
  type GraphEdge,
  type GraphNode,
  type Note,
  type Position,
  type Variable,
} from "./graph";

// Meta is what the canvas edits of the app beside its graph.
export interface Meta {
  name: string;
  public: boolean;
}

export interface Snapshot {
  graph: Graph;
  at: Record<string, Position>;
  meta: Meta;
}

export interface Canvas {
  past: Snapshot[];
  present: Snapshot;
  future: Snapshot[];
  // saved is the snapshot the engine holds: the canvas is unsaved while
  // present is another one (Undo back to it makes it saved again).
  saved: Snapshot;
}

// Clip is what Copy takes: nodes with their positions and the edges
// between them.
export interface Clip {
  nodes: GraphNode[];
  edges: GraphEdge[];
  at: Record<string, Position>;
}

export type Action =
  | { type: "move"; id: string; to: Position }
  | { type: "layout" }
  | { type: "connect"; source: string; target: string; sourceHandle?: string }
  | { type: "disconnect"; source: string; target: string; sourceHandle?: string }
  | { type: "remove"; ids: string[] }
  | { type: "add"; nodes: GraphNode[]; edges?: GraphEdge[]; at: Record<string, Position> }
  | { type: "paste"; clip: Clip; offset: Position }
  // edges, when given, replace the graph's in the same edit: deleting a
  // condition node's branch drops its edges and renames those after it
  | { type: "update"; id: string; patch: Partial<GraphNode>; edges?: GraphEdge[] }
  | { type: "variables"; variables: Variable[] }
  | { type: "note"; note: Note }
  | { type: "meta"; meta: Meta }
  | { type: "undo" }
  | { type: "redo" }
  | { type: "saved"; sent: Snapshot };

// historyLimit bounds how many edits Undo can take back.
export const historyLimit = 100;

// Notes are drawn as canvas nodes whose ids carry this prefix.
export const notePrefix = "note:";

// open is the canvas of a graph as the engine keeps it.
export function open(graph: Graph, meta: Meta = { name: "", public: false }): Canvas {
  const s = { graph, at: positioned(graph), meta };
  return { past: [], present: s, future: [], saved: s };
}

export const unsaved = (c: Canvas) => c.present !== c.saved;

// toSave is the graph to send to the engine: the present graph with the
// canvas's positions.
export const toSave = (c: Canvas) => withPositions(c.present.graph, c.present.at);

function edit(c: Canvas, next: Snapshot): Canvas {
  return { ...c, past: [...c.past, c.present].slice(-historyLimit), present: next, future: [] };
}

const hasEdge = (g: Graph, e: GraphEdge) => g.edges.some((x) => sameEdge(x, e));

// copy takes the nodes named (never the start) and the edges between them.
export function copy(s: Snapshot, ids: string[]): Clip {
  const chosen = new Set(ids);
  // A loop comes with its body.
  for (const n of s.graph.nodes) if (n.parentNodeId && chosen.has(n.parentNodeId)) chosen.add(n.nodeId);
  const nodes = s.graph.nodes.filter((n) => chosen.has(n.nodeId) && n.type !== "workflowStart");
  const kept = new Set(nodes.map((n) => n.nodeId));
  return {
    nodes,
    edges: s.graph.edges.filter((e) => kept.has(e.source) && kept.has(e.target)),
    at: Object.fromEntries(nodes.map((n) => [n.nodeId, s.at[n.nodeId]])),
  };
}

// freshIds renames a clip's nodes to ids the graph does not have, and
// rewrites the references and edges among them.
function freshIds(g: Graph, clip: Clip): { nodes: GraphNode[]; edges: GraphEdge[]; rename: Map<string, string> } {
  const taken = new Set(g.nodes.map((n) => n.nodeId));
  const rename = new Map<string, string>();
  for (const n of clip.nodes) {
    const base = n.nodeId.replace(/_\d+$/, "");
    let i = 2;
    while (taken.has(base + "_" + i)) i++;
    const id = base + "_" + i;
    taken.add(id);
    rename.set(n.nodeId, id);
  }
  const refs = (v: unknown): unknown => {
    if (typeof v === "string")
      return v.replace(/\{\{\$([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)\$\}\}/g, (m, id: string, key: string) =>
        rename.has(id) ? "{{$" + rename.get(id) + "." + key + "$}}" : m,
      );
    if (Array.isArray(v)) return v.map(refs);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, refs(x)]));
    return v;
  };
  const nodes = clip.nodes.map((n) => ({
    ...n,
    nodeId: rename.get(n.nodeId)!,
    parentNodeId: n.parentNodeId && rename.has(n.parentNodeId) ? rename.get(n.parentNodeId) : n.parentNodeId,
    inputs: n.inputs && (refs(n.inputs) as Record<string, unknown>),
  }));
  const edges = clip.edges.map((e) => ({ ...e, source: rename.get(e.source)!, target: rename.get(e.target)! }));
  return { nodes, edges, rename };
}

export function reduce(c: Canvas, a: Action): Canvas {
  const { graph, at, meta } = c.present;
  switch (a.type) {
    case "move": {
      if (a.id.startsWith(notePrefix)) {
        const id = a.id.slice(notePrefix.length);
        const note = graph.notes?.find((n) => n.id === id);
        if (!note || (note.position.x === a.to.x && note.position.y === a.to.y)) return c;
        return reduce(c, { type: "note", note: { ...note, position: a.to } });
      }
      const p = at[a.id];
      if (!p || (p.x === a.to.x && p.y === a.to.y)) return c;
      return edit(c, { graph, meta, at: { ...at, [a.id]: a.to } });
    }
    case "layout":
      return edit(c, { graph, meta, at: layout(graph) });
    case "connect": {
      const known = (id: string) => graph.nodes.some((n) => n.nodeId === id);
      const e: GraphEdge = { source: a.source, target: a.target };
      if (a.sourceHandle) e.sourceHandle = a.sourceHandle;
      if (a.source === a.target || !known(a.source) || !known(a.target) || hasEdge(graph, e)) return c;
      return edit(c, { graph: { ...graph, edges: [...graph.edges, e] }, at, meta });
    }
    case "disconnect": {
      const e = { source: a.source, target: a.target, sourceHandle: a.sourceHandle };
      if (!hasEdge(graph, e)) return c;
      return edit(c, { graph: { ...graph, edges: graph.edges.filter((x) => !sameEdge(x, e)) }, at, meta });
    }
    case "remove": {
      const notes = new Set(a.ids.filter((id) => id.startsWith(notePrefix)).map((id) => id.slice(notePrefix.length)));
      // The start node stays: every workflow has one; a loop goes with its body.
      const gone = new Set(a.ids.filter((id) => graph.nodes.some((n) => n.nodeId === id && n.type !== "workflowStart")));
      for (const n of graph.nodes) if (n.parentNodeId && gone.has(n.parentNodeId)) gone.add(n.nodeId);
      const keptNotes = (graph.notes ?? []).filter((n) => !notes.has(n.id));
      if (gone.size === 0 && keptNotes.length === (graph.notes ?? []).length) return c;
      const nodes = graph.nodes.filter((n) => !gone.has(n.nodeId));
      const edges = graph.edges.filter((e) => !gone.has(e.source) && !gone.has(e.target));
      const rest = Object.fromEntries(Object.entries(at).filter(([id]) => !gone.has(id)));
      return edit(c, { graph: { ...graph, nodes, edges, notes: keptNotes }, at: rest, meta });
    }
    case "add": {
      if (a.nodes.some((n) => graph.nodes.some((m) => m.nodeId === n.nodeId))) return c;
      return edit(c, {
        graph: { ...graph, nodes: [...graph.nodes, ...a.nodes], edges: [...graph.edges, ...(a.edges ?? [])] },
        at: { ...at, ...a.at },
        meta,
      });
    }
    case "paste": {
      if (a.clip.nodes.length === 0) return c;
      const { nodes, edges, rename } = freshIds(graph, a.clip);
      const placed: Record<string, Position> = {};
      for (const [old, id] of rename) {
        const p = a.clip.at[old] ?? { x: 0, y: 0 };
        placed[id] = { x: p.x + a.offset.x, y: p.y + a.offset.y };
      }
      return reduce(c, { type: "add", nodes, edges, at: placed });
    }
    case "update": {
      const i = graph.nodes.findIndex((n) => n.nodeId === a.id);
      if (i < 0) return c;
      const nodes = graph.nodes.slice();
      nodes[i] = { ...nodes[i], ...a.patch, nodeId: a.id };
      return edit(c, { graph: { ...graph, nodes, edges: a.edges ?? graph.edges }, at, meta });
    }
    case "variables":
      return edit(c, { graph: { ...graph, variables: a.variables }, at, meta });
    case "note": {
      const notes = graph.notes ?? [];
      const i = notes.findIndex((n) => n.id === a.note.id);
      const next = i < 0 ? [...notes, a.note] : notes.map((n, j) => (j === i ? a.note : n));
      return edit(c, { graph: { ...graph, notes: next }, at, meta });
    }
    case "meta":
      if (a.meta.name === meta.name && a.meta.public === meta.public) return c;
      return edit(c, { graph, at, meta: a.meta });
    case "undo": {
      if (c.past.length === 0) return c;
      return { ...c, past: c.past.slice(0, -1), present: c.past[c.past.length - 1], future: [c.present, ...c.future] };
    }
    case "redo": {
      if (c.future.length === 0) return c;
      return { ...c, past: [...c.past, c.present], present: c.future[0], future: c.future.slice(1) };
    }
    case "saved":
      // The engine holds what was sent; edits made while it was on the
      // way stay unsaved.
      return { ...c, saved: a.sent };
  }
}

// The canvas's state: the graph being edited with its nodes' positions,
// and the history that Undo and Redo walk. Every edit is an action; reduce
// is pure, so the rules are tested without a browser.
import {
  bodyOf,
  holders,
  layout,
  loopHead,
  loopPad,
  loopSizes,
  nestable,
  nodeSize,
  positioned,
  rowGap,
  sameEdge,
  withPositions,
  type Graph,
  type GraphEdge,
  type GraphNode,
  type Note,
  type Position,
  type Size,
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

// A move to a point may also put the node inside a loop (into: the
// loop's id) or take it out of any ("").
export type Action =
  | { type: "move"; id: string; to: Position; into?: string }
  | { type: "resize"; id: string; size: Size }
  | { type: "layout" }
  | { type: "connect"; source: string; target: string; sourceHandle?: string }
  | { type: "disconnect"; source: string; target: string; sourceHandle?: string }
  | { type: "remove"; ids: string[]; edges?: GraphEdge[] }
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
// A loop comes with its body; a loop's start and end only with their loop
// (a loop has one start).
export function copy(s: Snapshot, ids: string[]): Clip {
  const chosen = new Set(ids);
  for (const id of ids) for (const k of bodyOf(s.graph, id)) chosen.add(k);
  const own = (n: GraphNode) => n.type !== "loopStart" && n.type !== "loopEnd";
  const nodes = s.graph.nodes.filter(
    (n) => chosen.has(n.nodeId) && n.type !== "workflowStart" && (own(n) || (n.parentNodeId !== undefined && chosen.has(n.parentNodeId))),
  );
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

// nest puts a node inside a loop ("": outside any) at a point; the edges
// that would then cross the loop's border go, as the engine refuses them.
// Null when the node may not go there.
function nest(s: Snapshot, id: string, into: string, to: Position, patch: Partial<GraphNode> = {}): Snapshot | null {
  const { graph, at, meta } = s;
  const n = graph.nodes.find((x) => x.nodeId === id);
  const loop = graph.nodes.find((x) => x.nodeId === into);
  if (!n || !nestable(n) || (into !== "" && loop?.type !== "loop")) return null;
  const parentNodeId = into || undefined;
  const nodes = graph.nodes.map((x) => (x.nodeId === id ? { ...x, ...patch, nodeId: id, parentNodeId } : x));
  const scope = new Map(nodes.map((x) => [x.nodeId, x.parentNodeId ?? ""]));
  const edges = graph.edges.filter((e) => (e.source !== id && e.target !== id) || scope.get(e.source) === scope.get(e.target));
  return { graph: { ...graph, nodes, edges }, at: { ...at, [id]: to }, meta };
}

// inBody is the point nearest to p where a node is inside a loop's body:
// below its header, right of its margin.
function inBody(at: Record<string, Position>, loop: string, p: Position): Position {
  const q = at[loop];
  return { x: Math.max(p.x, q.x + loopPad), y: Math.max(p.y, q.y + loopHead) };
}

// placeFor is where a node goes when the side panel puts it in a loop
// (below the loop's body) or takes it out (below the loop).
function placeFor(s: Snapshot, id: string, into: string): Position {
  const { graph, at } = s;
  const up = holders(graph);
  if (into) {
    const bottom = Math.max(at[into].y + loopHead - rowGap, ...[...up].filter(([k, h]) => h === into && k !== id).map(([k]) => at[k].y));
    return { x: at[into].x + loopPad, y: bottom + rowGap };
  }
  const from = up.get(id);
  if (from === undefined) return at[id];
  return { x: at[from].x, y: at[from].y + loopSizes(graph, at)[from].height + rowGap - nodeSize.height };
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
      const n = graph.nodes.find((x) => x.nodeId === a.id);
      if (!p || !n) return c;
      let next = c.present;
      if (a.into !== undefined && a.into !== (n.parentNodeId ?? "")) next = nest(c.present, a.id, a.into, p) ?? c.present;
      // Inside a loop a node stays within the loop's body.
      const holder = holders(next.graph).get(a.id);
      const to = holder !== undefined ? inBody(at, holder, a.to) : a.to;
      if (next === c.present && p.x === to.x && p.y === to.y) return c;
      // A loop moves with its body.
      const moved = { ...next.at, [a.id]: to };
      for (const k of bodyOf(graph, a.id)) moved[k] = { x: at[k].x + to.x - p.x, y: at[k].y + to.y - p.y };
      return edit(c, { ...next, at: moved });
    }
    case "resize": {
      const i = graph.nodes.findIndex((n) => n.nodeId === a.id);
      const size = { width: Math.round(a.size.width), height: Math.round(a.size.height) };
      const old = graph.nodes[i]?.size;
      if (i < 0 || graph.nodes[i].type !== "loop" || (old && old.width === size.width && old.height === size.height)) return c;
      const nodes = graph.nodes.slice();
      nodes[i] = { ...nodes[i], size };
      return edit(c, { graph: { ...graph, nodes }, at, meta });
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
      // The start node stays: every workflow has one, and so does a loop
      // its start and end; a loop goes with its body.
      const byId = new Map(graph.nodes.map((n) => [n.nodeId, n]));
      const fixed = (n: GraphNode) => n.type === "workflowStart" || n.type === "loopStart" || n.type === "loopEnd";
      const gone = new Set(a.ids.filter((id) => byId.has(id) && !fixed(byId.get(id)!)));
      for (const id of [...gone]) for (const k of bodyOf(graph, id)) gone.add(k);
      const keptNotes = (graph.notes ?? []).filter((n) => !notes.has(n.id));
      const cut = (e: GraphEdge) => gone.has(e.source) || gone.has(e.target) || (a.edges ?? []).some((x) => sameEdge(x, e));
      const edges = graph.edges.filter((e) => !cut(e));
      if (gone.size === 0 && keptNotes.length === (graph.notes ?? []).length && edges.length === graph.edges.length) return c;
      const nodes = graph.nodes.filter((n) => !gone.has(n.nodeId));
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
      const { nodes: fresh, edges, rename } = freshIds(graph, a.clip);
      // A node copied from a loop goes back into it if it is still there.
      const loops = new Set([...graph.nodes, ...fresh].filter((n) => n.type === "loop").map((n) => n.nodeId));
      const nodes = fresh.map((n) => (n.parentNodeId && !loops.has(n.parentNodeId) ? { ...n, parentNodeId: undefined } : n));
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
      // Put inside a loop or taken out of it, a node moves there.
      if ("parentNodeId" in a.patch && (a.patch.parentNodeId ?? "") !== (graph.nodes[i].parentNodeId ?? "")) {
        const into = a.patch.parentNodeId ?? "";
        const next = nest(c.present, a.id, into, placeFor(c.present, a.id, into), a.patch);
        return next ? edit(c, next) : c;
      }
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

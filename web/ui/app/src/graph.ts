// The engine's workflow graph and its form on the canvas. The engine keeps
// nodes with their inputs and, once the builder has placed them, their
// positions; edges say which node runs after which.

export interface Position {
  x: number;
  y: number;
}

export interface Size {
  width: number;
  height: number;
}

export interface NodeOutput {
  key: string;
  type: string;
  label?: string;
}

export interface GraphNode {
  nodeId: string;
  type: string;
  name?: string;
  inputs?: Record<string, unknown>;
  // outputs the node declares itself (types with dynamic outputs)
  outputs?: NodeOutput[];
  // the loop the node is inside, if any
  parentNodeId?: string;
  position?: Position;
  // how large the canvas draws a loop, as the builder resized it
  size?: Size;
}

// An edge leaves its source from a handle: "" (or none) is the ordinary
// way out, "catch" the error branch, anything else a branch of the node.
export interface GraphEdge {
  source: string;
  target: string;
  sourceHandle?: string;
}

export interface Variable {
  key: string;
  label?: string;
  type: string;
  required?: boolean;
  defaultValue?: unknown;
  options?: string[];
  description?: string;
}

export interface Note {
  id: string;
  text: string;
  position: Position;
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  variables?: Variable[];
  notes?: Note[];
}

export const catchBranch = "catch";

// edgeId names an edge on the canvas: its ends and its handle.
export const edgeId = (e: GraphEdge) => e.source + "->" + e.target + (e.sourceHandle ? "#" + e.sourceHandle : "");

export const sameEdge = (a: GraphEdge, b: GraphEdge) =>
  a.source === b.source && a.target === b.target && (a.sourceHandle ?? "") === (b.sourceHandle ?? "");

// branchesOf lists the branches a node chooses among, as the engine
// derives them from its inputs; empty for a node with one way out.
export function branchesOf(n: GraphNode): string[] {
  const list = (key: string) => (Array.isArray(n.inputs?.[key]) ? (n.inputs![key] as unknown[]) : []);
  const keys = (key: string) =>
    list(key)
      .map((x) => (x && typeof x === "object" ? String((x as Record<string, unknown>).key ?? "") : ""))
      .filter((k) => k !== "");
  switch (n.type) {
    case "ifElseNode": {
      const conditions = list("ifElseList").length || 1;
      return ["IF", ...Array.from({ length: conditions - 1 }, (_, i) => "ELSE IF " + (i + 1)), "ELSE"];
    }
    case "classifyQuestion":
      return keys("agents");
    case "userSelect":
      return keys("userSelectOptions");
  }
  return [];
}

// Spacing of the automatic layout, in canvas units: between columns
// (the order in which nodes run) and between nodes of one column.
export const columnGap = 320;
export const rowGap = 140;

// A node's size on the canvas before it is measured, and the layout's.
export const nodeSize: Size = { width: 200, height: 80 };

// A loop is drawn as a box holding its body: its own header above the
// body, a margin around it, and at least this size.
export const loopHead = 72;
export const loopPad = 24;
export const loopMin: Size = { width: 560, height: 200 };

// nestable says whether a node may be put inside a loop: a start, a loop
// or a loop's own start and end never move from where they are.
export const nestable = (n: GraphNode) => !["workflowStart", "loop", "loopStart", "loopEnd"].includes(n.type);

// holders maps each node drawn inside a loop to that loop: its
// parentNodeId when that names a loop of the graph (a chain of parents
// that comes back on itself holds nothing).
export function holders(graph: Graph): Map<string, string> {
  const loops = new Set(graph.nodes.filter((n) => n.type === "loop").map((n) => n.nodeId));
  const up = new Map<string, string>();
  for (const n of graph.nodes) if (n.parentNodeId && loops.has(n.parentNodeId)) up.set(n.nodeId, n.parentNodeId);
  const out = new Map<string, string>();
  for (const [id, p] of up) {
    const seen = new Set([id]);
    let q: string | undefined = p;
    while (q !== undefined && !seen.has(q)) {
      seen.add(q);
      q = up.get(q);
    }
    if (q === undefined) out.set(id, p);
  }
  return out;
}

// parentsFirst orders the nodes so that a loop comes before the nodes
// inside it (React Flow draws a child only after its parent), otherwise
// in the graph's order.
export function parentsFirst(graph: Graph): GraphNode[] {
  const up = holders(graph);
  const depth = (id: string): number => (up.has(id) ? depth(up.get(id)!) + 1 : 0);
  return graph.nodes
    .map((n, i) => ({ n, i, d: depth(n.nodeId) }))
    .sort((a, b) => a.d - b.d || a.i - b.i)
    .map((x) => x.n);
}

// bodyOf lists the nodes inside a loop, and inside the loops in it.
export function bodyOf(graph: Graph, id: string): string[] {
  const up = holders(graph);
  const inside = (n: string): boolean => up.has(n) && (up.get(n) === id || inside(up.get(n)!));
  return graph.nodes.map((n) => n.nodeId).filter(inside);
}

// loopSizes is how large each loop is drawn: the size the builder gave it
// (the least size if none), grown to hold its body with a margin. sizeOf
// gives the other nodes' sizes (as the canvas measured them).
export function loopSizes(graph: Graph, at: Record<string, Position>, sizeOf: (id: string) => Size = () => nodeSize): Record<string, Size> {
  const up = holders(graph);
  const out: Record<string, Size> = {};
  // The innermost loops first: an outer loop holds them at their size.
  for (const n of parentsFirst(graph).reverse()) {
    if (n.type !== "loop") continue;
    const base = n.size ?? loopMin;
    const size = { width: base.width, height: base.height };
    const p = at[n.nodeId];
    for (const [k, holder] of up) {
      if (holder !== n.nodeId || !p || !at[k]) continue;
      const s = out[k] ?? sizeOf(k);
      size.width = Math.max(size.width, at[k].x - p.x + s.width + loopPad);
      size.height = Math.max(size.height, at[k].y - p.y + s.height + loopPad);
    }
    out[n.nodeId] = size;
  }
  return out;
}

// loopAt is the loop whose box holds a point (the innermost one), leaving
// out the loops named in except; "" when none does.
export function loopAt(
  graph: Graph,
  at: Record<string, Position>,
  sizes: Record<string, Size>,
  point: Position,
  except: Set<string> = new Set(),
): string {
  let found = "";
  for (const n of parentsFirst(graph)) {
    const p = at[n.nodeId];
    const s = sizes[n.nodeId];
    if (n.type !== "loop" || except.has(n.nodeId) || !p || !s) continue;
    if (point.x >= p.x && point.x <= p.x + s.width && point.y >= p.y && point.y <= p.y + s.height) found = n.nodeId;
  }
  return found;
}

// onCanvas is where React Flow draws each node: a node inside a loop
// relative to the loop's corner, any other where the graph has it (the
// graph keeps every position in the canvas's own units).
export function onCanvas(graph: Graph, at: Record<string, Position>): Record<string, Position> {
  const up = holders(graph);
  const out: Record<string, Position> = {};
  for (const n of graph.nodes) {
    const p = at[n.nodeId];
    if (!p) continue;
    const holder = up.get(n.nodeId);
    const q = holder !== undefined ? at[holder] : undefined;
    out[n.nodeId] = q ? { x: p.x - q.x, y: p.y - q.y } : p;
  }
  return out;
}

// fromCanvas is a node's position in the graph from where React Flow
// draws it: onCanvas undone.
export function fromCanvas(graph: Graph, at: Record<string, Position>, id: string, drawn: Position): Position {
  const holder = holders(graph).get(id);
  const q = holder !== undefined ? at[holder] : undefined;
  return q ? { x: drawn.x + q.x, y: drawn.y + q.y } : drawn;
}

// layout places the nodes of the top level, and those of each loop's body
// inside the loop, in columns by the longest path that reaches a node from
// a node nothing runs before, and in rows by the graph's order within a
// column. A loop is one block among the nodes around it, as large as its
// laid-out body. Edges that close a cycle are not followed.
export function layout(graph: Graph): Record<string, Position> {
  const up = holders(graph);
  const byId = new Map(graph.nodes.map((n) => [n.nodeId, n]));
  const within = new Map<string, string[]>();
  for (const n of graph.nodes) {
    const holder = up.get(n.nodeId) ?? "";
    within.set(holder, [...(within.get(holder) ?? []), n.nodeId]);
  }
  const rel: Record<string, Position> = {};
  const blocks: Record<string, Size> = {};
  // place lays out the nodes of one level from (0, 0).
  const place = (ids: string[]) => {
    for (const id of ids) {
      const body = within.get(id);
      if (byId.get(id)!.type !== "loop") {
        blocks[id] = nodeSize;
        continue;
      }
      const base = byId.get(id)!.size ?? loopMin;
      const size = { ...base };
      if (body) {
        place(body);
        for (const k of body) {
          rel[k] = { x: rel[k].x + loopPad, y: rel[k].y + loopHead };
          size.width = Math.max(size.width, rel[k].x + blocks[k].width + loopPad);
          size.height = Math.max(size.height, rel[k].y + blocks[k].height + loopPad);
        }
      }
      blocks[id] = size;
    }
    const column = columns(graph, ids, up);
    const widths = new Map<number, number>();
    for (const id of ids) widths.set(column.get(id)!, Math.max(widths.get(column.get(id)!) ?? 0, blocks[id].width));
    const xs = new Map<number, number>();
    for (let c = 0, x = 0; c <= Math.max(0, ...widths.keys()); c++) {
      xs.set(c, x);
      x += (widths.get(c) ?? nodeSize.width) + columnGap - nodeSize.width;
    }
    const ys = new Map<number, number>();
    for (const id of ids) {
      const c = column.get(id)!;
      const y = ys.get(c) ?? 0;
      rel[id] = { x: xs.get(c)!, y };
      ys.set(c, y + blocks[id].height + rowGap - nodeSize.height);
    }
  };
  place(within.get("") ?? []);
  // From positions within each loop to the canvas's: loops first.
  const out: Record<string, Position> = {};
  for (const n of parentsFirst(graph)) {
    const holder = up.get(n.nodeId);
    const q = holder !== undefined ? out[holder] : { x: 0, y: 0 };
    out[n.nodeId] = { x: q.x + rel[n.nodeId].x, y: q.y + rel[n.nodeId].y };
  }
  return out;
}

// columns numbers the column of each node of one level: the longest path
// to it along the edges among them (an edge from or to a node inside one
// of them counts as the edge of that one).
function columns(graph: Graph, ids: string[], up: Map<string, string>): Map<string, number> {
  const known = new Set(ids);
  const lift = (id: string): string | undefined => {
    for (let q: string | undefined = id; q !== undefined; q = up.get(q)) if (known.has(q)) return q;
    return undefined;
  };
  const next = new Map<string, string[]>();
  for (const e of graph.edges) {
    const s = lift(e.source);
    const t = lift(e.target);
    if (s === undefined || t === undefined || s === t) continue;
    next.set(s, [...(next.get(s) ?? []), t]);
  }
  // Depth-first order, to tell edges that close a cycle from the others.
  const state = new Map<string, "open" | "done">();
  const order: string[] = [];
  const back = new Set<string>();
  const visit = (id: string) => {
    state.set(id, "open");
    for (const t of next.get(id) ?? []) {
      const s = state.get(t);
      if (s === "open") back.add(id + "\u0000" + t);
      else if (!s) visit(t);
    }
    state.set(id, "done");
    order.push(id);
  };
  for (const id of ids) if (!state.has(id)) visit(id);
  order.reverse();
  const column = new Map<string, number>(ids.map((id) => [id, 0]));
  for (const id of order) {
    for (const t of next.get(id) ?? []) {
      if (back.has(id + "\u0000" + t)) continue;
      column.set(t, Math.max(column.get(t)!, column.get(id)! + 1));
    }
  }
  return column;
}

// positioned gives every node a position: its own where it has one, the
// automatic layout's where it has none (inside a loop, relative to the
// loop). A loop whose body reaches above or left of where the box holds
// it (a graph drawn before loops were boxes) moves up or left to hold it.
export function positioned(graph: Graph): Record<string, Position> {
  const auto = layout(graph);
  const up = holders(graph);
  const out: Record<string, Position> = {};
  for (const n of parentsFirst(graph)) {
    const holder = up.get(n.nodeId);
    if (n.position) out[n.nodeId] = n.position;
    else if (holder !== undefined)
      out[n.nodeId] = { x: out[holder].x + auto[n.nodeId].x - auto[holder].x, y: out[holder].y + auto[n.nodeId].y - auto[holder].y };
    else out[n.nodeId] = auto[n.nodeId];
  }
  for (const n of parentsFirst(graph).reverse()) {
    const body = [...up].filter(([, h]) => h === n.nodeId).map(([k]) => out[k]);
    if (body.length === 0) continue;
    const p = out[n.nodeId];
    const x = Math.min(p.x, ...body.map((q) => q.x - loopPad));
    const y = Math.min(p.y, ...body.map((q) => q.y - loopHead));
    if (x !== p.x || y !== p.y) out[n.nodeId] = { x, y };
  }
  return out;
}

// withPositions is the graph with the canvas's positions, rounded to whole
// units, ready to save; the rest of each node is kept as it was.
export function withPositions(graph: Graph, at: Record<string, Position>): Graph {
  return {
    ...graph,
    nodes: graph.nodes.map((n) => {
      const p = at[n.nodeId];
      return p ? { ...n, position: { x: Math.round(p.x), y: Math.round(p.y) } } : n;
    }),
  };
}

// The engine's workflow graph and its form on the canvas. The engine keeps
// nodes with their inputs and, once the builder has placed them, their
// positions; edges say which node runs after which.

export interface Position {
  x: number;
  y: number;
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

// layout places every node in a column by the longest path that reaches
// it from a node nothing runs before, and in a row by its order in the
// graph within that column. Edges that close a cycle are not followed.
export function layout(graph: Graph): Record<string, Position> {
  const ids = graph.nodes.map((n) => n.nodeId);
  const known = new Set(ids);
  const next = new Map<string, string[]>();
  for (const e of graph.edges) {
    if (!known.has(e.source) || !known.has(e.target) || e.source === e.target) continue;
    next.set(e.source, [...(next.get(e.source) ?? []), e.target]);
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
  const rows = new Map<number, number>();
  const out: Record<string, Position> = {};
  for (const id of ids) {
    const c = column.get(id)!;
    const r = rows.get(c) ?? 0;
    rows.set(c, r + 1);
    out[id] = { x: c * columnGap, y: r * rowGap };
  }
  return out;
}

// positioned gives every node a position: its own where it has one, the
// automatic layout's where it has none.
export function positioned(graph: Graph): Record<string, Position> {
  const auto = layout(graph);
  const out: Record<string, Position> = {};
  for (const n of graph.nodes) out[n.nodeId] = n.position ?? auto[n.nodeId];
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

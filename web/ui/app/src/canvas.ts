// The canvas's state: the graph being edited with its nodes' positions,
// and the history that Undo and Redo walk. Every edit is an action; reduce
// is pure, so the rules are tested without a browser.
import { layout, positioned, withPositions, type Graph, type Position } from "./graph";

export interface Snapshot {
  graph: Graph;
  at: Record<string, Position>;
}

export interface Canvas {
  past: Snapshot[];
  present: Snapshot;
  future: Snapshot[];
  // saved is the snapshot the engine holds: the canvas is unsaved while
  // present is another one (Undo back to it makes it saved again).
  saved: Snapshot;
}

export type Action =
  | { type: "move"; id: string; to: Position }
  | { type: "layout" }
  | { type: "connect"; source: string; target: string }
  | { type: "disconnect"; source: string; target: string }
  | { type: "remove"; ids: string[] }
  | { type: "undo" }
  | { type: "redo" }
  | { type: "saved"; sent: Snapshot };

// historyLimit bounds how many edits Undo can take back.
export const historyLimit = 100;

// open is the canvas of a graph as the engine keeps it.
export function open(graph: Graph): Canvas {
  const s = { graph, at: positioned(graph) };
  return { past: [], present: s, future: [], saved: s };
}

export const unsaved = (c: Canvas) => c.present !== c.saved;

// toSave is the graph to send to the engine: the present graph with the
// canvas's positions.
export const toSave = (c: Canvas) => withPositions(c.present.graph, c.present.at);

function edit(c: Canvas, next: Snapshot): Canvas {
  return { ...c, past: [...c.past, c.present].slice(-historyLimit), present: next, future: [] };
}

const hasEdge = (g: Graph, source: string, target: string) => g.edges.some((e) => e.source === source && e.target === target);

export function reduce(c: Canvas, a: Action): Canvas {
  const { graph, at } = c.present;
  switch (a.type) {
    case "move": {
      const p = at[a.id];
      if (!p || (p.x === a.to.x && p.y === a.to.y)) return c;
      return edit(c, { graph, at: { ...at, [a.id]: a.to } });
    }
    case "layout":
      return edit(c, { graph, at: layout(graph) });
    case "connect": {
      const known = (id: string) => graph.nodes.some((n) => n.nodeId === id);
      if (a.source === a.target || !known(a.source) || !known(a.target) || hasEdge(graph, a.source, a.target)) return c;
      return edit(c, { graph: { ...graph, edges: [...graph.edges, { source: a.source, target: a.target }] }, at });
    }
    case "disconnect": {
      if (!hasEdge(graph, a.source, a.target)) return c;
      const edges = graph.edges.filter((e) => !(e.source === a.source && e.target === a.target));
      return edit(c, { graph: { ...graph, edges }, at });
    }
    case "remove": {
      // The start node stays: every workflow has one.
      const gone = new Set(a.ids.filter((id) => graph.nodes.some((n) => n.nodeId === id && n.type !== "workflowStart")));
      if (gone.size === 0) return c;
      const nodes = graph.nodes.filter((n) => !gone.has(n.nodeId));
      const edges = graph.edges.filter((e) => !gone.has(e.source) && !gone.has(e.target));
      const rest = Object.fromEntries(Object.entries(at).filter(([id]) => !gone.has(id)));
      return edit(c, { graph: { ...graph, nodes, edges }, at: rest });
    }
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

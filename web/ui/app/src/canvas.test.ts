import { historyLimit, open, reduce, toSave, unsaved, type Canvas } from "./canvas";
import type { Graph } from "./graph";

const graph: Graph = {
  nodes: [
    { nodeId: "start", type: "workflowStart" },
    { nodeId: "tools", type: "tools", inputs: { model: "m" } },
    { nodeId: "answer", type: "answerNode" },
  ],
  edges: [{ source: "start", target: "tools" }],
};

const ids = (c: Canvas) => c.present.graph.nodes.map((n) => n.nodeId);
const edges = (c: Canvas) => c.present.graph.edges.map((e) => e.source + ">" + e.target);

describe("the canvas's edits", () => {
  it("opens saved, with every node placed", () => {
    const c = open(graph);
    expect(unsaved(c)).toBe(false);
    expect(Object.keys(c.present.at).sort()).toEqual(["answer", "start", "tools"]);
  });

  it("connects two nodes once, never a node to itself or to a node that is not there", () => {
    let c = reduce(open(graph), { type: "connect", source: "tools", target: "answer" });
    expect(edges(c)).toEqual(["start>tools", "tools>answer"]);
    expect(unsaved(c)).toBe(true);
    for (const [source, target] of [["tools", "answer"], ["tools", "tools"], ["tools", "ghost"]]) {
      expect(reduce(c, { type: "connect", source, target })).toBe(c);
    }
    c = reduce(c, { type: "disconnect", source: "start", target: "tools" });
    expect(edges(c)).toEqual(["tools>answer"]);
  });

  it("removes nodes with their edges and positions, but never the start node", () => {
    const c = reduce(open(graph), { type: "remove", ids: ["tools", "start"] });
    expect(ids(c)).toEqual(["start", "answer"]);
    expect(edges(c)).toEqual([]);
    expect(c.present.at.tools).toBeUndefined();
    const start = open(graph);
    expect(reduce(start, { type: "remove", ids: ["start"] })).toBe(start);
  });

  it("moves a node; a move to where it is changes nothing", () => {
    const c0 = open(graph);
    const c = reduce(c0, { type: "move", id: "tools", to: { x: 5, y: 6 } });
    expect(c.present.at.tools).toEqual({ x: 5, y: 6 });
    expect(reduce(c, { type: "move", id: "tools", to: { x: 5, y: 6 } })).toBe(c);
    expect(reduce(c0, { type: "move", id: "ghost", to: { x: 1, y: 1 } })).toBe(c0);
  });
});

describe("undo and redo", () => {
  it("walk back and forth through the edits, and a new edit drops what was undone", () => {
    let c = open(graph);
    c = reduce(c, { type: "connect", source: "tools", target: "answer" });
    c = reduce(c, { type: "remove", ids: ["answer"] });
    expect(ids(c)).toEqual(["start", "tools"]);
    c = reduce(c, { type: "undo" });
    expect(ids(c)).toEqual(["start", "tools", "answer"]);
    expect(edges(c)).toEqual(["start>tools", "tools>answer"]);
    c = reduce(c, { type: "undo" });
    expect(edges(c)).toEqual(["start>tools"]);
    expect(unsaved(c)).toBe(false);
    expect(reduce(c, { type: "undo" })).toBe(c);
    c = reduce(c, { type: "redo" });
    expect(edges(c)).toEqual(["start>tools", "tools>answer"]);
    c = reduce(c, { type: "layout" });
    expect(reduce(c, { type: "redo" })).toBe(c);
  });

  it("keep the last edits only", () => {
    let c = open(graph);
    for (let i = 1; i <= historyLimit + 5; i++) c = reduce(c, { type: "move", id: "tools", to: { x: i, y: 0 } });
    expect(c.past.length).toBe(historyLimit);
  });
});

describe("saving", () => {
  it("sends the graph with the canvas's positions; edits made meanwhile stay unsaved", () => {
    let c = reduce(open(graph), { type: "move", id: "answer", to: { x: 1.6, y: 2.2 } });
    expect(toSave(c).nodes.find((n) => n.nodeId === "answer")!.position).toEqual({ x: 2, y: 2 });
    const sent = c.present;
    const during = reduce(c, { type: "connect", source: "tools", target: "answer" });
    expect(unsaved(reduce(c, { type: "saved", sent }))).toBe(false);
    c = reduce(during, { type: "saved", sent });
    expect(unsaved(c)).toBe(true);
    expect(unsaved(reduce(c, { type: "undo" }))).toBe(false);
  });
});

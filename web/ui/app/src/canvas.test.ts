import { copy, historyLimit, notePrefix, open, reduce, toSave, unsaved, type Canvas } from "./canvas";
import { loopHead, loopPad, nodeSize, rowGap, type Graph } from "./graph";

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

describe("copy and paste", () => {
  const g: Graph = {
    nodes: [
      { nodeId: "start", type: "workflowStart" },
      { nodeId: "a", type: "chatNode", inputs: { userChatInput: "{{$start.userChatInput$}}" } },
      { nodeId: "b", type: "answerNode", inputs: { text: "{{$a.answerText$}} and {{$start.userChatInput$}}" } },
    ],
    edges: [
      { source: "start", target: "a" },
      { source: "a", target: "b" },
    ],
  };
  it("pastes fresh nodes with the edges and references among them renamed, never the start", () => {
    const c = open(g);
    const clip = copy(c.present, ["start", "a", "b"]);
    expect(clip.nodes.map((n) => n.nodeId)).toEqual(["a", "b"]);
    const pasted = reduce(c, { type: "paste", clip, offset: { x: 40, y: 40 } });
    expect(ids(pasted)).toEqual(["start", "a", "b", "a_2", "b_2"]);
    expect(edges(pasted)).toEqual(["start>a", "a>b", "a_2>b_2"]);
    const b2 = pasted.present.graph.nodes.find((n) => n.nodeId === "b_2")!;
    expect(b2.inputs!.text).toBe("{{$a_2.answerText$}} and {{$start.userChatInput$}}");
    expect(pasted.present.at.a_2).toEqual({ x: c.present.at.a.x + 40, y: c.present.at.a.y + 40 });
    // One edit: Undo takes the whole paste back.
    expect(ids(reduce(pasted, { type: "undo" }))).toEqual(["start", "a", "b"]);
  });
  it("takes a loop with its body, and deleting the loop deletes its body", () => {
    const loop: Graph = {
      nodes: [
        { nodeId: "start", type: "workflowStart" },
        { nodeId: "loop", type: "loop" },
        { nodeId: "ls", type: "loopStart", parentNodeId: "loop" },
      ],
      edges: [{ source: "start", target: "loop" }],
    };
    const c = open(loop);
    expect(copy(c.present, ["loop"]).nodes.map((n) => n.nodeId)).toEqual(["loop", "ls"]);
    const pasted = reduce(c, { type: "paste", clip: copy(c.present, ["loop"]), offset: { x: 0, y: 0 } });
    expect(pasted.present.graph.nodes.find((n) => n.nodeId === "ls_2")?.parentNodeId).toBe("loop_2");
    expect(ids(reduce(c, { type: "remove", ids: ["loop"] }))).toEqual(["start"]);
  });
});

describe("branches, settings, variables and notes", () => {
  it("connects from a branch's handle, told apart from the ordinary way out", () => {
    let c = open({ nodes: [{ nodeId: "if", type: "ifElseNode" }, { nodeId: "x", type: "answerNode" }], edges: [] });
    c = reduce(c, { type: "connect", source: "if", target: "x", sourceHandle: "IF" });
    c = reduce(c, { type: "connect", source: "if", target: "x", sourceHandle: "ELSE" });
    expect(c.present.graph.edges).toEqual([
      { source: "if", target: "x", sourceHandle: "IF" },
      { source: "if", target: "x", sourceHandle: "ELSE" },
    ]);
    c = reduce(c, { type: "disconnect", source: "if", target: "x", sourceHandle: "IF" });
    expect(c.present.graph.edges).toEqual([{ source: "if", target: "x", sourceHandle: "ELSE" }]);
  });
  it("changes a node's settings and the edges with them as one edit", () => {
    let c = open({ nodes: [{ nodeId: "if", type: "ifElseNode" }, { nodeId: "x", type: "answerNode" }], edges: [{ source: "if", target: "x", sourceHandle: "ELSE IF 1" }] });
    c = reduce(c, { type: "update", id: "if", patch: { inputs: { ifElseList: [] } }, edges: [{ source: "if", target: "x", sourceHandle: "IF" }] });
    expect(c.present.graph.edges).toEqual([{ source: "if", target: "x", sourceHandle: "IF" }]);
    c = reduce(c, { type: "update", id: "if", patch: { name: "Check" } });
    expect(c.present.graph.edges).toEqual([{ source: "if", target: "x", sourceHandle: "IF" }]);
    c = reduce(reduce(c, { type: "undo" }), { type: "undo" });
    expect(c.present.graph.edges).toEqual([{ source: "if", target: "x", sourceHandle: "ELSE IF 1" }]);
  });
  it("changes a node's settings, the app's variables and name as edits Undo takes back", () => {
    let c = open(graph, { name: "App", public: false });
    c = reduce(c, { type: "update", id: "tools", patch: { inputs: { model: "other" } } });
    c = reduce(c, { type: "variables", variables: [{ key: "lang", type: "string" }] });
    c = reduce(c, { type: "meta", meta: { name: "Renamed", public: true } });
    expect(c.present.graph.nodes[1].inputs).toEqual({ model: "other" });
    expect(c.present.graph.variables).toEqual([{ key: "lang", type: "string" }]);
    expect(c.present.meta).toEqual({ name: "Renamed", public: true });
    c = reduce(reduce(reduce(c, { type: "undo" }), { type: "undo" }), { type: "undo" });
    expect(c.present.graph.nodes[1].inputs).toEqual({ model: "m" });
    expect(unsaved(c)).toBe(false);
  });
  it("adds, moves and deletes notes, which the engine keeps but never runs", () => {
    let c = open(graph);
    c = reduce(c, { type: "note", note: { id: "n1", text: "why", position: { x: 1, y: 2 } } });
    c = reduce(c, { type: "move", id: notePrefix + "n1", to: { x: 5, y: 6 } });
    expect(toSave(c).notes).toEqual([{ id: "n1", text: "why", position: { x: 5, y: 6 } }]);
    c = reduce(c, { type: "remove", ids: [notePrefix + "n1"] });
    expect(toSave(c).notes).toEqual([]);
  });
});

describe("a loop drawn with its body inside it", () => {
  // The loop's box: 100,100 to 664,300 (its least size, 560×200, grown to
  // hold the loop end).
  const g: Graph = {
    nodes: [
      { nodeId: "start", type: "workflowStart", position: { x: 0, y: 0 } },
      { nodeId: "loop", type: "loop", position: { x: 100, y: 100 } },
      { nodeId: "ls", type: "loopStart", parentNodeId: "loop", position: { x: 124, y: 172 } },
      { nodeId: "le", type: "loopEnd", parentNodeId: "loop", position: { x: 440, y: 172 } },
      { nodeId: "out", type: "textEditor", position: { x: 900, y: 100 } },
    ],
    edges: [
      { source: "start", target: "loop" },
      { source: "ls", target: "le" },
      { source: "start", target: "out" },
    ],
  };
  const node = (c: Canvas, id: string) => c.present.graph.nodes.find((n) => n.nodeId === id)!;

  it("moves with its loop, as one edit", () => {
    const c = reduce(open(g), { type: "move", id: "loop", to: { x: 150, y: 80 } });
    expect(c.present.at.ls).toEqual({ x: 174, y: 152 });
    expect(c.present.at.le).toEqual({ x: 490, y: 152 });
    expect(c.present.at.out).toEqual({ x: 900, y: 100 });
    expect(toSave(c).nodes.find((n) => n.nodeId === "ls")!.position).toEqual({ x: 174, y: 152 });
    expect(reduce(c, { type: "undo" }).present.at.ls).toEqual({ x: 124, y: 172 });
  });

  it("takes a node dropped into the loop, which loses the edges that would cross the loop's border", () => {
    const c0 = open(g);
    // Dropped over the loop's header: it goes into the body, below it.
    const c = reduce(c0, { type: "move", id: "out", to: { x: 300, y: 110 }, into: "loop" });
    expect(node(c, "out").parentNodeId).toBe("loop");
    expect(c.present.at.out).toEqual({ x: 300, y: 100 + loopHead });
    expect(edges(c)).toEqual(["start>loop", "ls>le"]);
    const saved = toSave(c).nodes.find((n) => n.nodeId === "out")!;
    expect(saved.parentNodeId).toBe("loop");
    expect(saved.position).toEqual({ x: 300, y: 172 });
    // One Undo takes it all back.
    const back = reduce(c, { type: "undo" });
    expect(node(back, "out").parentNodeId).toBeUndefined();
    expect(edges(back)).toEqual(edges(c0));
    // Connected inside the loop, then dragged out: it leaves the loop and
    // the edges to its body.
    let d = reduce(c, { type: "connect", source: "ls", target: "out" });
    d = reduce(d, { type: "move", id: "out", to: { x: 900, y: 500 }, into: "" });
    expect(node(d, "out").parentNodeId).toBeUndefined();
    expect(d.present.at.out).toEqual({ x: 900, y: 500 });
    expect(edges(d)).toEqual(["start>loop", "ls>le"]);
  });

  it("keeps a loop's own start and end inside it, and puts nothing inside a node that is not a loop", () => {
    const c0 = open(g);
    const c = reduce(c0, { type: "move", id: "ls", to: { x: 0, y: 500 }, into: "" });
    expect(node(c, "ls").parentNodeId).toBe("loop");
    expect(c.present.at.ls).toEqual({ x: 100 + loopPad, y: 500 });
    expect(node(reduce(c0, { type: "move", id: "out", to: { x: 1, y: 1 }, into: "start" }), "out").parentNodeId).toBeUndefined();
    expect(node(reduce(c0, { type: "move", id: "loop", to: { x: 1, y: 1 }, into: "loop" }), "loop").parentNodeId).toBeUndefined();
  });

  it("moves a node the side panel puts into a loop below the body, and one it takes out below the loop", () => {
    let c = reduce(open(g), { type: "update", id: "out", patch: { parentNodeId: "loop" } });
    expect(node(c, "out").parentNodeId).toBe("loop");
    expect(c.present.at.out).toEqual({ x: 100 + loopPad, y: 172 + rowGap });
    expect(edges(c)).toEqual(["start>loop", "ls>le"]);
    c = reduce(c, { type: "update", id: "out", patch: { parentNodeId: undefined } });
    expect(node(c, "out").parentNodeId).toBeUndefined();
    // Below the box, which had grown to hold the node.
    expect(c.present.at.out).toEqual({ x: 100, y: 100 + (172 + rowGap + nodeSize.height + loopPad - 100) + rowGap - nodeSize.height });
    // Other changes leave the node where it is.
    const same = reduce(c, { type: "update", id: "out", patch: { name: "Out", parentNodeId: undefined } });
    expect(same.present.at.out).toEqual(c.present.at.out);
  });

  it("deletes a loop with its body and their edges as one edit, but never a loop's start or end alone", () => {
    const c0 = open(g);
    const c = reduce(c0, { type: "remove", ids: ["loop"], edges: [{ source: "start", target: "loop" }] });
    expect(ids(c)).toEqual(["start", "out"]);
    expect(edges(c)).toEqual(["start>out"]);
    const back = reduce(c, { type: "undo" });
    expect(ids(back)).toEqual(ids(c0));
    expect(edges(back)).toEqual(edges(c0));
    expect(unsaved(back)).toBe(false);
    expect(reduce(c0, { type: "remove", ids: ["ls", "le"] })).toBe(c0);
    // Edges deleted by themselves go in one edit too.
    const cut = reduce(c0, { type: "remove", ids: [], edges: [{ source: "ls", target: "le" }, { source: "start", target: "out" }] });
    expect(edges(cut)).toEqual(["start>loop"]);
    expect(edges(reduce(cut, { type: "undo" }))).toEqual(edges(c0));
  });

  it("keeps the size the builder gives a loop with the graph", () => {
    const c0 = open(g);
    const c = reduce(c0, { type: "resize", id: "loop", size: { width: 800.4, height: 399.6 } });
    expect(toSave(c).nodes.find((n) => n.nodeId === "loop")!.size).toEqual({ width: 800, height: 400 });
    expect(reduce(c, { type: "resize", id: "loop", size: { width: 800, height: 400 } })).toBe(c);
    expect(reduce(c0, { type: "resize", id: "out", size: { width: 800, height: 400 } })).toBe(c0);
    expect(open(toSave(c)).present.graph.nodes[1].size).toEqual({ width: 800, height: 400 });
  });

  it("lays out the body inside the loop", () => {
    const c = reduce(open(g), { type: "layout" });
    expect(c.present.at.ls).toEqual({ x: c.present.at.loop.x + loopPad, y: c.present.at.loop.y + loopHead });
  });

  it("copies a loop with its body, never a loop's start or end alone; a pasted node whose loop is gone is outside", () => {
    let c = reduce(open(g), { type: "resize", id: "loop", size: { width: 700, height: 300 } });
    const clip = copy(c.present, ["loop"]);
    expect(clip.nodes.map((n) => n.nodeId)).toEqual(["loop", "ls", "le"]);
    expect(clip.edges).toEqual([{ source: "ls", target: "le" }]);
    expect(copy(c.present, ["ls", "le"]).nodes).toEqual([]);
    c = reduce(c, { type: "paste", clip, offset: { x: 0, y: 400 } });
    expect(node(c, "loop_2").size).toEqual({ width: 700, height: 300 });
    expect(node(c, "ls_2").parentNodeId).toBe("loop_2");
    expect(c.present.at.ls_2).toEqual({ x: 124, y: 572 });
    expect(edges(c)).toContain("ls_2>le_2");
    // A node copied from a loop since deleted is pasted outside.
    const inside = reduce(open(g), { type: "update", id: "out", patch: { parentNodeId: "loop" } });
    const one = copy(inside.present, ["out"]);
    const gone = reduce(inside, { type: "remove", ids: ["loop"] });
    const pasted = reduce(gone, { type: "paste", clip: one, offset: { x: 40, y: 40 } });
    expect(node(pasted, "out_2").parentNodeId).toBeUndefined();
    // Pasted while the loop is there, it goes into the loop.
    expect(node(reduce(inside, { type: "paste", clip: one, offset: { x: 40, y: 40 } }), "out_2").parentNodeId).toBe("loop");
  });
});

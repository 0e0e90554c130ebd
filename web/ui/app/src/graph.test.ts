import {
  bodyOf,
  branchesOf,
  columnGap,
  fromCanvas,
  holders,
  layout,
  loopAt,
  loopHead,
  loopMin,
  loopPad,
  loopSizes,
  nodeSize,
  onCanvas,
  parentsFirst,
  positioned,
  rowGap,
  withPositions,
  type Graph,
} from "./graph";

const chain: Graph = {
  nodes: [
    { nodeId: "answer", type: "answerNode" },
    { nodeId: "start", type: "workflowStart" },
    { nodeId: "tools", type: "tools" },
  ],
  edges: [
    { source: "start", target: "tools" },
    { source: "tools", target: "answer" },
  ],
};

describe("layout", () => {
  it("puts each node one column after the nodes that run before it", () => {
    const at = layout(chain);
    expect(at.start).toEqual({ x: 0, y: 0 });
    expect(at.tools).toEqual({ x: columnGap, y: 0 });
    expect(at.answer).toEqual({ x: 2 * columnGap, y: 0 });
  });

  it("uses the longest path, so a join comes after both of its branches", () => {
    const g: Graph = {
      nodes: ["a", "b", "c", "d"].map((id) => ({ nodeId: id, type: "x" })),
      edges: [
        { source: "a", target: "b" },
        { source: "b", target: "c" },
        { source: "a", target: "d" },
        { source: "c", target: "d" },
      ],
    };
    const at = layout(g);
    expect(at.d.x).toBe(3 * columnGap);
  });

  it("stacks the nodes of one column in the graph's order", () => {
    const g: Graph = {
      nodes: ["s", "left", "right"].map((id) => ({ nodeId: id, type: "x" })),
      edges: [
        { source: "s", target: "left" },
        { source: "s", target: "right" },
      ],
    };
    const at = layout(g);
    expect(at.left).toEqual({ x: columnGap, y: 0 });
    expect(at.right).toEqual({ x: columnGap, y: rowGap });
  });

  it("ends on a cycle and ignores edges to unknown nodes", () => {
    const g: Graph = {
      nodes: ["a", "b"].map((id) => ({ nodeId: id, type: "x" })),
      edges: [
        { source: "a", target: "b" },
        { source: "b", target: "a" },
        { source: "b", target: "ghost" },
      ],
    };
    const at = layout(g);
    expect(at.a).toEqual({ x: 0, y: 0 });
    expect(at.b).toEqual({ x: columnGap, y: 0 });
    expect(Object.keys(at).sort()).toEqual(["a", "b"]);
  });
});

describe("positioned and withPositions", () => {
  it("keeps a node's own position and lays out the others", () => {
    const g: Graph = { ...chain, nodes: chain.nodes.map((n) => (n.nodeId === "tools" ? { ...n, position: { x: 7, y: 9 } } : n)) };
    const at = positioned(g);
    expect(at.tools).toEqual({ x: 7, y: 9 });
    expect(at.answer).toEqual({ x: 2 * columnGap, y: 0 });
  });

  it("saves rounded positions and leaves the rest of each node alone", () => {
    const g: Graph = { nodes: [{ nodeId: "a", type: "tools", inputs: { model: "m" } }], edges: [] };
    const saved = withPositions(g, { a: { x: 10.4, y: -3.6 } });
    expect(saved.nodes[0]).toEqual({ nodeId: "a", type: "tools", inputs: { model: "m" }, position: { x: 10, y: -4 } });
    expect(g.nodes[0].position).toBeUndefined();
  });
});

describe("a node's branches", () => {
  it("are those the engine derives from its inputs", () => {
    expect(branchesOf({ nodeId: "i", type: "ifElseNode", inputs: { ifElseList: [{}, {}, {}] } })).toEqual(["IF", "ELSE IF 1", "ELSE IF 2", "ELSE"]);
    expect(branchesOf({ nodeId: "i", type: "ifElseNode" })).toEqual(["IF", "ELSE"]);
    expect(branchesOf({ nodeId: "c", type: "classifyQuestion", inputs: { agents: [{ key: "a1" }, { key: "" }, { key: "b" }] } })).toEqual(["a1", "b"]);
    expect(branchesOf({ nodeId: "x", type: "answerNode" })).toEqual([]);
  });
});

// A loop with its start and end and one node between them, placed as the
// canvas would: the body inside the loop's box.
const looped: Graph = {
  nodes: [
    { nodeId: "ls", type: "loopStart", parentNodeId: "loop", position: { x: 124, y: 172 } },
    { nodeId: "start", type: "workflowStart", position: { x: 0, y: 0 } },
    { nodeId: "loop", type: "loop", position: { x: 100, y: 100 } },
    { nodeId: "say", type: "answerNode", parentNodeId: "loop", position: { x: 444, y: 172 } },
    { nodeId: "le", type: "loopEnd", parentNodeId: "loop", position: { x: 764, y: 172 } },
    { nodeId: "after", type: "answerNode", position: { x: 1200, y: 0 } },
  ],
  edges: [
    { source: "start", target: "loop" },
    { source: "loop", target: "after" },
    { source: "ls", target: "say" },
    { source: "say", target: "le" },
  ],
};
const at = (g: Graph) => Object.fromEntries(g.nodes.map((n) => [n.nodeId, n.position!]));

describe("a loop's body", () => {
  it("is the nodes whose parent is a loop; a parent that is missing, not a loop or a cycle holds nothing", () => {
    const g: Graph = {
      nodes: [
        { nodeId: "in", type: "x", parentNodeId: "loop" },
        { nodeId: "loop", type: "loop" },
        { nodeId: "ghost", type: "x", parentNodeId: "nowhere" },
        { nodeId: "odd", type: "x", parentNodeId: "in" },
        { nodeId: "a", type: "loop", parentNodeId: "b" },
        { nodeId: "b", type: "loop", parentNodeId: "a" },
      ],
      edges: [],
    };
    expect([...holders(g)]).toEqual([["in", "loop"]]);
    expect(parentsFirst(g).map((n) => n.nodeId)).toEqual(["loop", "ghost", "odd", "a", "b", "in"]);
    expect(bodyOf(looped, "loop")).toEqual(["ls", "say", "le"]);
    expect(bodyOf(looped, "say")).toEqual([]);
  });

  it("is drawn relative to the loop, and kept in the graph in the canvas's own units", () => {
    const drawn = onCanvas(looped, at(looped));
    expect(drawn.say).toEqual({ x: 344, y: 72 });
    expect(drawn.loop).toEqual({ x: 100, y: 100 });
    expect(drawn.after).toEqual({ x: 1200, y: 0 });
    for (const id of ["say", "loop", "after"]) expect(fromCanvas(looped, at(looped), id, drawn[id])).toEqual(at(looped)[id]);
  });

  it("sizes the loop: at least its least size or the builder's, grown to hold the body with a margin", () => {
    // Wider than the least size, as high.
    expect(loopSizes(looped, at(looped)).loop).toEqual({ width: 764 - 100 + nodeSize.width + loopPad, height: loopMin.height });
    const small: Graph = { nodes: [{ nodeId: "loop", type: "loop" }], edges: [] };
    expect(loopSizes(small, { loop: { x: 0, y: 0 } }).loop).toEqual(loopMin);
    const resized: Graph = { ...looped, nodes: looped.nodes.map((n) => (n.nodeId === "loop" ? { ...n, size: { width: 2000, height: 150 } } : n)) };
    expect(loopSizes(resized, at(resized)).loop).toEqual({ width: 2000, height: 172 - 100 + nodeSize.height + loopPad });
    // Measured sizes count where the canvas has them.
    expect(loopSizes(looped, at(looped), (id) => (id === "le" ? { width: 300, height: 200 } : nodeSize)).loop).toEqual({
      width: 764 - 100 + 300 + loopPad,
      height: 172 - 100 + 200 + loopPad,
    });
  });

  it("finds the loop whose box holds a point, the innermost one, leaving out the loops named", () => {
    const g: Graph = {
      nodes: [
        { nodeId: "outer", type: "loop", position: { x: 0, y: 0 }, size: { width: 1000, height: 600 } },
        { nodeId: "inner", type: "loop", parentNodeId: "outer", position: { x: 100, y: 100 } },
      ],
      edges: [],
    };
    const sizes = loopSizes(g, at(g));
    expect(loopAt(g, at(g), sizes, { x: 150, y: 150 })).toBe("inner");
    expect(loopAt(g, at(g), sizes, { x: 900, y: 500 })).toBe("outer");
    expect(loopAt(g, at(g), sizes, { x: 150, y: 150 }, new Set(["inner"]))).toBe("outer");
    expect(loopAt(g, at(g), sizes, { x: 1001, y: 10 })).toBe("");
  });

  it("opens inside its loop: a loop drawn before loops were boxes moves up or left to hold its body", () => {
    const old: Graph = {
      nodes: [
        { nodeId: "loop", type: "loop", position: { x: 300, y: 0 } },
        { nodeId: "ls", type: "loopStart", parentNodeId: "loop", position: { x: 300, y: 140 } },
        { nodeId: "le", type: "loopEnd", parentNodeId: "loop", position: { x: 620, y: 40 } },
      ],
      edges: [],
    };
    const p = positioned(old);
    expect(p.loop).toEqual({ x: 300 - loopPad, y: 40 - loopHead });
    expect(p.ls).toEqual({ x: 300, y: 140 });
    expect(p.le).toEqual({ x: 620, y: 40 });
    // A body node without a position is laid out inside its loop.
    const missing: Graph = { ...old, nodes: [{ ...old.nodes[0] }, { nodeId: "ls", type: "loopStart", parentNodeId: "loop" }] };
    expect(positioned(missing).ls).toEqual({ x: 300 + loopPad, y: loopHead });
  });
});

describe("layout with a loop", () => {
  const g: Graph = { ...looped, nodes: looped.nodes.map(({ position: _, ...n }) => n) };
  const p = layout(g);
  const sizes = loopSizes(g, p);

  it("lays out the body inside the loop, in columns from the loop's start", () => {
    expect(p.ls).toEqual({ x: p.loop.x + loopPad, y: p.loop.y + loopHead });
    expect(p.say).toEqual({ x: p.ls.x + columnGap, y: p.ls.y });
    expect(p.le).toEqual({ x: p.ls.x + 2 * columnGap, y: p.ls.y });
    expect(sizes.loop.width).toBe(2 * columnGap + nodeSize.width + 2 * loopPad);
    for (const id of ["ls", "say", "le"]) expect(loopAt(g, p, sizes, { x: p[id].x + 1, y: p[id].y + 1 })).toBe("loop");
  });

  it("places the loop as one block: what runs after it starts past its box", () => {
    expect(p.start).toEqual({ x: 0, y: 0 });
    expect(p.loop).toEqual({ x: columnGap, y: 0 });
    expect(p.after.x).toBe(p.loop.x + sizes.loop.width + columnGap - nodeSize.width);
    expect(p.after.y).toBe(0);
  });

  it("stacks a node below a loop of its column past the loop's box", () => {
    const two: Graph = {
      nodes: [...g.nodes, { nodeId: "beside", type: "answerNode" }],
      edges: [...g.edges, { source: "start", target: "beside" }],
    };
    const q = layout(two);
    expect(q.beside).toEqual({ x: q.loop.x, y: loopSizes(two, q).loop.height + rowGap - nodeSize.height });
  });
});

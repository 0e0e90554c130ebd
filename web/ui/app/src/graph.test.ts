import { branchesOf, columnGap, layout, positioned, rowGap, withPositions, type Graph } from "./graph";

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

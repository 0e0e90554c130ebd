import type { Graph } from "./graph";
import { fields, fits, newNode, palette, upstream, type Template, type Templates } from "./templates";

const tmpl = (type: string, group: string, extra: Partial<Template> = {}): Template => ({
  type,
  group,
  label: { en: type + " label", zh: type + "中文" },
  description: "about " + type,
  outputs: {},
  schema: {},
  ...extra,
});

const ts: Templates = {
  workflowStart: tmpl("workflowStart", "hidden", { outputs: { userChatInput: { type: "string" } } }),
  chatNode: tmpl("chatNode", "ai", {
    catch: true,
    outputs: { answerText: { type: "string", "x-label": { en: "Answer" } } },
    schema: {
      properties: {
        model: { type: "string", default: "flowbox-demo" },
        temperature: { type: "number", minimum: 0, maximum: 2 },
        systemPrompt: { type: "string" },
        useIt: { type: "boolean", "x-render": "switch" },
        skills: { type: "array", items: { type: "string" } },
        startupCommands: { type: "array", items: { type: "string" } },
        mode: { type: "string", enum: ["a", "b"] },
        list: { type: "array", "x-reference": "array" },
        policy: { type: "object" },
      },
      required: ["model"],
    },
  }),
  code: tmpl("code", "tools", { dynamicOutputs: true }),
  loop: tmpl("loop", "tools", { outputs: { loopArray: { type: "array" } } }),
};

describe("the palette", () => {
  it("groups the types a builder may add, hiding the start", () => {
    expect(palette(ts, "").map((g) => [g.group, g.types.map((t) => t.type)])).toEqual([
      ["ai", ["chatNode"]],
      ["tools", ["code", "loop"]],
    ]);
  });
  it("finds types by either language's label, type or description", () => {
    expect(palette(ts, "中文").flatMap((g) => g.types.map((t) => t.type))).toEqual(["chatNode", "code", "loop"]);
    expect(palette(ts, "about loop").flatMap((g) => g.types.map((t) => t.type))).toEqual(["loop"]);
    expect(palette(ts, "nothing like it")).toEqual([]);
  });
});

describe("the side panel's fields", () => {
  it("draws each input by its type", () => {
    const kinds = Object.fromEntries(fields(ts.chatNode, "en").map((f) => [f.key, f.kind]));
    expect(kinds).toEqual({
      model: "text",
      temperature: "number",
      systemPrompt: "textarea",
      useIt: "switch",
      skills: "choices",
      startupCommands: "lines",
      mode: "select",
      list: "reference",
      policy: "json",
    });
    expect(fields(ts.chatNode, "en").find((f) => f.key === "model")?.required).toBe(true);
  });
  it("passes on a list's editor of its own", () => {
    const cond = tmpl("ifElseNode", "tools", {
      schema: { properties: { ifElseList: { type: "array", "x-render": "ifElse", items: { type: "object", properties: { condition: { enum: ["AND", "OR"] } } } } } },
    });
    expect(fields(cond, "en").map((f) => [f.key, f.render])).toEqual([["ifElseList", "ifElse"]]);
    expect(fields(ts.chatNode, "en").find((f) => f.key === "useIt")?.render).toBe("switch");
  });
});

describe("the reference picker's sources", () => {
  const g: Graph = {
    nodes: [
      { nodeId: "start", type: "workflowStart" },
      { nodeId: "chat", type: "chatNode", name: "Writer" },
      { nodeId: "code", type: "code", outputs: [{ key: "total", type: "number" }] },
      { nodeId: "after", type: "chatNode" },
      { nodeId: "aside", type: "chatNode" },
      { nodeId: "loop", type: "loop" },
      { nodeId: "inner", type: "chatNode", parentNodeId: "loop" },
      { nodeId: "inner2", type: "chatNode", parentNodeId: "loop" },
    ],
    edges: [
      { source: "start", target: "chat" },
      { source: "chat", target: "code" },
      { source: "code", target: "after" },
      { source: "start", target: "aside" },
      { source: "code", target: "loop" },
      { source: "inner", target: "inner2" },
    ],
    variables: [{ key: "lang", type: "select", options: ["en"] }],
  };
  const keys = (id: string) => upstream(g, id, ts, "en", { chatId: "string" }).map((s) => s.nodeId + "." + s.key);
  it("lists what runs before the node, its errors, and the variables", () => {
    expect(keys("after")).toEqual([
      "start.userChatInput",
      "chat.answerText",
      "chat.error",
      "code.total",
      "VARIABLE_NODE_ID.lang",
      "VARIABLE_NODE_ID.chatId",
    ]);
  });
  it("never lists a parallel branch or the node itself", () => {
    expect(keys("after")).not.toContain("aside.answerText");
    expect(keys("chat")).not.toContain("chat.answerText");
  });
  it("inside a loop: the body before the node and what comes before the loop", () => {
    expect(keys("inner2")).toContain("inner.answerText");
    expect(keys("inner2")).toContain("code.total");
    expect(keys("after")).not.toContain("inner.answerText");
  });
  it("keeps types for the input's check", () => {
    expect(fits("string", "number")).toBe(false);
    expect(fits("any", "number")).toBe(true);
    expect(fits("integer", "number")).toBe(true);
  });
});

describe("a new node", () => {
  it("has the template's defaults and an id the graph does not have", () => {
    const g: Graph = { nodes: [{ nodeId: "chatNode1", type: "chatNode" }], edges: [] };
    const n = newNode(ts.chatNode, g, "zh");
    expect(n).toEqual({ nodeId: "chatNode2", type: "chatNode", name: "chatNode中文", inputs: { model: "flowbox-demo" } });
  });
});

describe("a list of records", () => {
  it("is drawn as rows, one input per field", () => {
    const t = tmpl("classifyQuestion", "ai", {
      schema: {
        properties: {
          agents: { type: "array", items: { type: "object", properties: { value: { type: "string" }, key: { type: "string" } } } },
          list: { type: "array", items: { type: "object" } },
        },
      },
    });
    const byKey = Object.fromEntries(fields(t, "en").map((f) => [f.key, f]));
    expect(byKey.agents.kind).toBe("rows");
    expect(Object.keys(byKey.agents.items!)).toEqual(["value", "key"]);
    expect(byKey.list.kind).toBe("json");
  });
});

import { describe, expect, it } from "vitest";
import { customInputs, freeKey, keyProblem, renamed, takesCustom } from "./custom";
import type { Template } from "./templates";

const code: Template = {
  type: "code",
  label: { en: "Code" },
  description: "",
  group: "tools",
  outputs: {},
  schema: {
    properties: { codeType: { type: "string" }, code: { type: "string" } },
    patternProperties: { "^[A-Za-z_][A-Za-z0-9_]{0,63}$": {} },
  },
};
const answer: Template = { ...code, type: "answerNode", schema: { properties: { text: { type: "string" } } } };

describe("custom inputs", () => {
  it("are the inputs the schema does not list, in order, for types that take them", () => {
    expect(takesCustom(code)).toBe(true);
    expect(takesCustom(answer)).toBe(false);
    expect(takesCustom(undefined)).toBe(false);
    expect(customInputs(code, { codeType: "py", q: "{{$start.userChatInput$}}", code: "x", n: 3 })).toEqual([
      ["q", "{{$start.userChatInput$}}"],
      ["n", 3],
    ]);
  });
  it("refuse a key that is empty, off the pattern, or taken", () => {
    const inputs = { code: "x", q: "" };
    expect(keyProblem(code, inputs, "")).toBe("empty");
    expect(keyProblem(code, inputs, "2nd")).toBe("pattern");
    expect(keyProblem(code, inputs, "with space")).toBe("pattern");
    expect(keyProblem(code, inputs, "q")).toBe("taken");
    expect(keyProblem(code, inputs, "codeType")).toBe("taken"); // the node's own, though unset
    expect(keyProblem(code, inputs, "q", "q")).toBe(""); // renamed to itself
    expect(keyProblem(code, inputs, "question")).toBe("");
  });
  it("rename in place and find a free key", () => {
    expect(Object.keys(renamed({ code: "x", a: 1, b: 2 }, "a", "z"))).toEqual(["code", "z", "b"]);
    expect(renamed({ a: 1 }, "a", "z")).toEqual({ z: 1 });
    expect(freeKey(code, { input1: "", input3: "" })).toBe("input2");
  });
});

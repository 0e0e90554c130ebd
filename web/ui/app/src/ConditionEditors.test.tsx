import { cleanup, fireEvent, render } from "@testing-library/react";
import { IfElseEditor, UpdateListEditor } from "./ConditionEditors";
import type { Branch, Update } from "./conditions";
import type { GraphEdge } from "./graph";
import { translator } from "./i18n";
import type { Source } from "./templates";

const t = translator("en");
const sources: Source[] = [
  { nodeId: "start", nodeName: "Start", key: "userChatInput", label: "User question", type: "string" },
  { nodeId: "code", nodeName: "Code", key: "total", label: "total", type: "number" },
  { nodeId: "code", nodeName: "Code", key: "tags", label: "tags", type: "array" },
  { nodeId: "VARIABLE_NODE_ID", nodeName: "", key: "mood", label: "Mood", type: "string" },
  { nodeId: "VARIABLE_NODE_ID", nodeName: "", key: "visits", label: "visits", type: "number" },
  { nodeId: "VARIABLE_NODE_ID", nodeName: "", key: "chatId", label: "chatId", type: "string" },
];

afterEach(cleanup);

const change = (el: Element | null, value: string) => fireEvent.change(el!, { target: { value } });
const options = (el: Element | null) => [...(el as HTMLSelectElement).options].map((o) => o.value);

function ifElse(value: Branch[], edges: GraphEdge[] = []) {
  const calls: { value: Branch[]; edges?: GraphEdge[] }[] = [];
  const r = render(
    <IfElseEditor
      field="ifElseList"
      label="Branches"
      value={value}
      set={(v, e) => calls.push({ value: v, edges: e })}
      sources={sources}
      t={t}
      problems={[{ nodeId: "if", field: "ifElseList/0/list/0/value", message: "greaterThan compares with a number" }]}
      nodeId="if"
      edges={edges}
    />,
  );
  return { ...r, calls };
}

describe("the condition node's editor", () => {
  it("shows a block per branch, named as its handle, and what ELSE means", () => {
    const { container } = ifElse([
      { condition: "AND", list: [{ variable: "{{$code.total$}}", condition: "greaterThan", value: "x", valueType: "input" }] },
      { condition: "OR", list: [{ variable: "", condition: "isEmpty" }, { variable: "", condition: "equalTo", value: "", valueType: "input" }] },
    ]);
    expect([...container.querySelectorAll("[data-branch]")].map((b) => b.getAttribute("data-branch"))).toEqual(["IF", "ELSE IF 1", "ELSE"]);
    expect(container.querySelector('[data-branch="ELSE"]')!.textContent).toContain("no branch above holds");
    // the join is offered once a branch has two conditions
    expect(container.querySelector('[data-branch="IF"] .join')).toBeNull();
    expect((container.querySelector('[data-branch="ELSE IF 1"] .join') as HTMLSelectElement).value).toBe("OR");
    // the engine's problem is on its row
    expect(container.querySelector('[data-branch="IF"] [data-condition="0"] .field-problem')!.textContent).toContain("compares with a number");
  });
  it("offers the operators of the variable's type, and no value where none is taken", () => {
    const { container } = ifElse([
      {
        condition: "AND",
        list: [
          { variable: "{{$code.total$}}", condition: "greaterThan", value: "3", valueType: "input" },
          { variable: "{{$start.userChatInput$}}", condition: "isEmpty" },
        ],
      },
    ]);
    const numberOps = options(container.querySelector('[data-condition="0"] .operator'));
    expect(numberOps).toEqual(["equalTo", "notEqual", "isEmpty", "isNotEmpty", "greaterThan", "greaterThanOrEqualTo", "lessThan", "lessThanOrEqualTo"]);
    expect(container.querySelector('[data-condition="0"] .operator option[value="greaterThan"]')!.textContent).toBe("is greater than");
    expect(container.querySelector("#cond-0-0-value")).not.toBeNull();
    expect(container.querySelector("#cond-0-1-value")).toBeNull();
    expect(container.querySelector('[data-condition="1"] .given-as')).toBeNull();
  });
  it("builds a condition: variable, operator, value", () => {
    const { container, calls } = ifElse([{ condition: "AND", list: [{ variable: "", condition: "equalTo", value: "", valueType: "input" }] }]);
    change(container.querySelector("#cond-0-0-variable"), "{{$start.userChatInput$}}");
    expect(calls.pop()!.value).toEqual([{ condition: "AND", list: [{ variable: "{{$start.userChatInput$}}", condition: "equalTo", value: "", valueType: "input" }] }]);
    change(container.querySelector("#cond-0-0-operator"), "isNotEmpty");
    expect(calls.pop()!.value[0].list[0]).toEqual({ variable: "", condition: "isNotEmpty" });
    const input = container.querySelector("#cond-0-0-value") as HTMLInputElement;
    change(input, "sandbox");
    fireEvent.blur(input);
    expect(calls.pop()!.value[0].list[0].value).toBe("sandbox");
    change(container.querySelector("#cond-0-0-given-as"), "reference");
    expect(calls.pop()!.value[0].list[0]).toEqual({ variable: "", condition: "equalTo", value: "", valueType: "reference" });
  });
  it("adds conditions and branches, and deletes a branch with its edges", () => {
    const edges = [
      { source: "if", target: "a", sourceHandle: "IF" },
      { source: "if", target: "b", sourceHandle: "ELSE IF 1" },
    ];
    const two: Branch[] = [
      { condition: "AND", list: [{ variable: "", condition: "isEmpty" }] },
      { condition: "AND", list: [{ variable: "", condition: "isNotEmpty" }] },
    ];
    const { container, calls } = ifElse(two, edges);
    fireEvent.click(container.querySelector('[data-branch="IF"] .add-condition')!);
    expect(calls.pop()!.value[0].list).toHaveLength(2);
    fireEvent.click(container.querySelector(".add-branch")!);
    expect(calls.pop()!.value).toHaveLength(3);
    expect(container.querySelector('[data-condition="0"] .remove-condition')).toBeNull(); // a branch keeps one condition
    fireEvent.click(container.querySelector('[data-branch="IF"] .remove-branch')!);
    expect(calls.pop()).toEqual({ value: [two[1]], edges: [{ source: "if", target: "b", sourceHandle: "IF" }] });
  });
});

describe("the variable update node's editor", () => {
  const variables = [
    { key: "mood", type: "string", label: "Mood" },
    { key: "visits", type: "number" },
  ];
  function updates(value: Update[]) {
    const calls: Update[][] = [];
    const r = render(
      <UpdateListEditor field="updateList" label="Updates" value={value} set={(v) => calls.push(v)} sources={sources} variables={variables} t={t} problems={[]} />,
    );
    return { ...r, calls };
  }
  it("offers the app's global variables, not the system's", () => {
    const { container } = updates([{ variable: "", value: "", renderType: "input" }]);
    expect(options(container.querySelector("#update-0-variable"))).toEqual(["", "{{$VARIABLE_NODE_ID.mood$}}", "{{$VARIABLE_NODE_ID.visits$}}"]);
    expect(container.querySelector('#update-0-variable option[value="{{$VARIABLE_NODE_ID.mood$}}"]')!.textContent).toBe("Mood (mood) · Text");
  });
  it("types the new value as the variable's type, or takes a fitting reference", () => {
    const { container, calls } = updates([{ variable: "{{$VARIABLE_NODE_ID.mood$}}", value: "calm", valueType: "string", renderType: "input" }]);
    change(container.querySelector("#update-0-variable"), "{{$VARIABLE_NODE_ID.visits$}}");
    expect(calls.pop()).toEqual([{ variable: "{{$VARIABLE_NODE_ID.visits$}}", value: "", valueType: "number", renderType: "input" }]);
    const input = container.querySelector("#update-0-value") as HTMLInputElement;
    change(input, "curious");
    fireEvent.blur(input);
    expect(calls.pop()).toEqual([{ variable: "{{$VARIABLE_NODE_ID.mood$}}", value: "curious", valueType: "string", renderType: "input" }]);
    change(container.querySelector("#update-0-given-as"), "reference");
    expect(calls.pop()).toEqual([{ variable: "{{$VARIABLE_NODE_ID.mood$}}", value: "", valueType: "string", renderType: "reference" }]);
    fireEvent.click(container.querySelector(".add-update")!);
    expect(calls.pop()).toHaveLength(2);
  });
  it("offers only references that fit the variable", () => {
    const { container } = updates([{ variable: "{{$VARIABLE_NODE_ID.visits$}}", value: "", valueType: "number", renderType: "reference" }]);
    expect(options(container.querySelector("#update-0-value"))).toEqual(["", "{{$code.total$}}", "{{$VARIABLE_NODE_ID.visits$}}"]);
  });
});

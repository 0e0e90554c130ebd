import { describe, expect, it } from "vitest";
import { translator } from "../../i18n";
import { chatHref, importLines, importSummary } from "./format";

describe("the apps pages' formatting", () => {
  const t = translator("en");

  it("links the caller's chats plainly and others' with their user", () => {
    const base = "/share/ln1";
    expect(chatHref(base, { chatId: "c 1", userId: "u:me" }, "u:me")).toBe("/share/ln1/chat/c%201");
    expect(chatHref("/apps/a", { chatId: "c1", userId: "share:ln1:v&x" }, "u:me")).toBe("/apps/a/chat/c1?userId=share%3Aln1%3Av%26x");
  });

  it("reports an import: the counts, then what was left out and why", () => {
    const r = {
      imported: [{}, {}],
      skipped: [
        { nodeId: "ds", name: "知识库搜索", type: "datasetSearchNode", reason: "not supported" },
        { nodeId: "x", type: "pluginModule", reason: "plugins are not" },
      ],
      fields: [{ nodeId: "cq1", field: "history", reason: "ignored" }],
      problems: [{ message: "no start" }, { nodeId: "a1", message: "no text" }],
    };
    expect(importSummary(t, "Support", r)).toBe('Imported "Support": 2 node(s) imported, 2 left out.');
    expect(importLines(r)).toEqual([
      "知识库搜索 (datasetSearchNode): not supported",
      "x (pluginModule): plugins are not",
      "cq1 · history: ignored",
      "no start",
      "a1: no text",
    ]);
    expect(importLines({})).toEqual([]);
    expect(importSummary(t, "Empty", {})).toBe('Imported "Empty": 0 node(s) imported, 0 left out.');
  });
});

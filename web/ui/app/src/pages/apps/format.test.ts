import { describe, expect, it } from "vitest";
import { translator } from "../../i18n";
import { chatHref, dayAfter, expiryOf, importLines, importSummary, minute, perMinute, positive } from "./format";

describe("the apps pages' formatting", () => {
  const t = translator("en");

  it("writes instants in the reader's zone, to the minute", () => {
    const local = new Date(2026, 0, 5, 7, 3, 59);
    expect(minute(local.toISOString())).toBe("2026-01-05 07:03");
  });

  it("offers dates from tomorrow, across a month's end", () => {
    expect(dayAfter(new Date(2026, 0, 31, 23, 0))).toBe("2026-02-01");
    expect(dayAfter(new Date(2026, 11, 31, 0, 30))).toBe("2027-01-01");
  });

  it("turns a picked date into the start of that day where the owner is", () => {
    expect(expiryOf("")).toBeUndefined();
    expect(expiryOf("2026-03-09")).toBe(new Date(2026, 2, 9).toISOString());
    expect(minute(expiryOf("2026-03-09")!)).toBe("2026-03-09 00:00");
  });

  it("reads optional whole numbers", () => {
    expect(positive("")).toBeUndefined();
    expect(positive("0")).toBeUndefined();
    expect(positive("-4")).toBeUndefined();
    expect(positive("30")).toBe(30);
    expect(positive("7.9")).toBe(7);
  });

  it("says rates in the reader's language", () => {
    expect(perMinute(t, 5)).toBe("5/min");
    expect(perMinute(t, 0)).toBe("no limit");
    expect(perMinute(t, undefined)).toBe("no limit");
    expect(perMinute(translator("zh"), 5)).toBe("5 次/分钟");
  });

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

import { render } from "@testing-library/react";
import { translator } from "../../i18n";
import type { SseEvent } from "../../sse";
import { applyCard, noCards, SHOWN, whole, type Cards } from "./model";
import { ToolCard } from "./ToolCard";

const ev = (event: string, data: unknown): SseEvent => ({ event, data: JSON.stringify(data) });
const run = (events: SseEvent[], cards: Cards = noCards()) => events.reduce(applyCard, cards);
const card = (cards: Cards, lang = "en") => render(<ToolCard call={cards.calls[0]} t={translator(lang)} />).container.querySelector(".tool-card") as HTMLDetailsElement;
const q = (el: Element, role: string) => el.querySelector(`[data-role="${role}"]`)?.textContent;

const started = run([ev("toolCall", { tool: { id: "call_1", toolName: "sandbox_shell", params: '{"command":"make test"}', response: "" } })]);

describe("ToolCard", () => {
  it("is open while the command runs and shows its output live", () => {
    const cards = run(
      [
        ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: "ok 1\n" } }),
        ev("toolOutput", { tool: { id: "call_1", stream: "stderr", text: "warning\n" } }),
        ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: "ok 2\n" } }),
      ],
      started,
    );
    const el = card(cards);
    expect(el.dataset.toolId).toBe("call_1");
    expect(el.open).toBe(true);
    expect(q(el, "command")).toBe("make test");
    expect(q(el, "status")).toBe("running");
    expect(q(el, "duration")).toBe("");
    expect(q(el, "stdout")).toBe("ok 1\nok 2\n");
    expect(el.querySelector('[data-stream="stderr"] pre')?.textContent).toBe("warning\n");
  });

  it("closes when the command ends, with its status, exit code and duration", () => {
    const failed = run(
      [
        ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: "building\n" } }),
        ev("toolResponse", { tool: { id: "call_1", response: '{"stdout":"building\\n","stderr":"no rule","exitCode":2,"durationMs":41}', durationMs: 41, status: "failed" } }),
      ],
      started,
    );
    const el = card(failed);
    expect(el.open).toBe(false);
    expect(q(el, "status")).toBe("failed · exit 2");
    expect(el.querySelector('[data-role="status"]')?.className).toBe("badge failed");
    expect(q(el, "duration")).toBe("41 ms");
    expect(q(el, "stdout")).toBe("building\n");
    expect(el.querySelector('[data-stream="stderr"] pre')?.textContent).toBe("no rule");

    const zh = card(run([ev("toolResponse", { tool: { id: "call_1", response: '{"stdout":"","exitCode":-1}', durationMs: 5, status: "cancelled" } })], started), "zh");
    expect(q(zh, "status")).toBe(translator("zh")("cancelled"));
    expect(zh.querySelector('[data-role="status"]')?.className).toBe("badge cancelled");
  });

  it("shows a skill tool's call and a tool's result", () => {
    const cards = run([
      ev("toolCall", { tool: { id: "c2", toolName: "execute_skill_script", params: '{"name":"pdf","script":"split.py","args":["a.pdf"]}' } }),
      ev("toolResponse", { tool: { id: "c2", response: '{"result":"3 pages"}', status: "success", durationMs: 7 } }),
    ]);
    const el = card(cards);
    expect(q(el, "command")).toBe("pdf split.py a.pdf");
    expect(q(el, "stdout")).toBe("3 pages");
    expect(q(el, "status")).toBe("success");
  });

  it("draws only the end of a 5 MB output, says so, and keeps all of it for the download", () => {
    const line = "x".repeat(1023) + "\n";
    const events = Array.from({ length: 5 * 1024 }, () => ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: line } }));
    events.push(ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: "the end\n" } }));
    const cards = run(events, started);
    const el = card(cards);
    const pre = q(el, "stdout")!;
    expect(pre.length).toBe(SHOWN);
    expect(pre.endsWith("the end\n")).toBe(true);
    expect(q(el, "cut")).toContain("Earlier output cut: only the last 64 KiB is shown.");
    expect(el.querySelector('[data-role="download-output"]')).toBeTruthy();
    expect(whole(cards.calls[0].stdout).length).toBe(5 * 1024 * 1024 + 8);
    expect(card(run([ev("toolOutput", { tool: { id: "call_1", stream: "stdout", text: "short" } })], started)).querySelector('[data-role="cut"]')).toBeNull();
  });
});

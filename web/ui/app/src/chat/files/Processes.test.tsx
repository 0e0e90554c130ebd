import { cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { Processes } from "./Processes";
import type { Process } from "./api";

// The engine is faked at the HTTP boundary: fetch answers the processes
// API from a list held here.
const t = translator("en");
const where = { apiBase: "", appId: "a1", chatId: "c1", csrf: "tok" };
let procs: Process[];
let bodies: Record<string, unknown>[];
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

beforeEach(() => {
  bodies = [];
  procs = [
    { id: "p1", command: "python3 -m http.server 8000", running: true, startedAt: "2026-11-28T10:00:00Z", output: 120000 },
    { id: "p2", command: "make watch", running: false, exitCode: 2, startedAt: "2026-11-28T10:01:00Z", output: 0 },
  ];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body));
    bodies.push(body);
    expect(url).toBe("/api/core/ai/sandbox/processes");
    switch (body.action) {
      case "list":
        return json(200, { processes: procs });
      case "read": {
        const p = procs.find((x) => x.id === body.id)!;
        return json(200, { process: p, offset: body.offset, output: "Serving HTTP on 0.0.0.0 port 8000\n", next: p.output });
      }
      case "stop":
        procs[0] = { ...procs[0], running: false, stopped: true, exitCode: 137 };
        return json(200, { process: procs[0] });
    }
    return json(400, { message: "unexpected" });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the chat's background processes", () => {
  it("lists them with their state, shows the latest output, and stops one", async () => {
    const { container } = render(<Processes where={where} mode="write" refresh={0} t={t} />);
    await waitFor(() => expect(container.querySelectorAll("[data-process]")).toHaveLength(2));
    const state = (id: string) => container.querySelector(`[data-process="${id}"] [data-role=state]`)?.textContent;
    expect(state("p1")).toBe("running");
    expect(state("p2")).toBe("exited with 2");
    expect(container.querySelector('[data-process="p2"] [data-role=stop]')).toBeNull();

    fireEvent.click(container.querySelector('[data-process="p1"] [data-role=output]')!);
    await waitFor(() => expect(container.querySelector("[data-role=process-output]")?.textContent).toBe("Serving HTTP on 0.0.0.0 port 8000\n"));
    // The latest 64 KiB of its 120000 bytes, not all of them.
    expect(bodies.find((b) => b.action === "read")?.offset).toBe(120000 - 65536);

    fireEvent.click(container.querySelector('[data-process="p1"] [data-role=stop]')!);
    await waitFor(() => expect(state("p1")).toBe("stopped"));
    expect(bodies.filter((b) => b.action === "stop")).toEqual([{ appId: "a1", chatId: "c1", action: "stop", id: "p1" }]);
  });

  it("offers no Stop to a reader, and shows nothing while there are none", async () => {
    const { container, unmount } = render(<Processes where={where} mode="read" refresh={0} t={translator("zh")} />);
    await waitFor(() => expect(container.querySelectorAll("[data-process]")).toHaveLength(2));
    expect(container.querySelector("[data-role=stop]")).toBeNull();
    expect(container.querySelector('[data-process="p1"] [data-role=state]')?.textContent).toBe("运行中");
    unmount();
    procs = [];
    const empty = render(<Processes where={where} mode="write" refresh={0} t={t} />);
    await waitFor(() => expect(bodies.filter((b) => b.action === "list")).toHaveLength(2));
    expect(empty.container.querySelector("[data-role=processes]")).toBeNull();
  });
});

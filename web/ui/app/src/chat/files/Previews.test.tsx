import { cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { Previews } from "./Previews";
import type { Preview } from "./api";

// The engine is faked at the HTTP boundary: fetch answers the previews
// API from a list held here.
const t = translator("en");
const where = { apiBase: "", appId: "a1", chatId: "c1", csrf: "tok" };
let links: Preview[];
let bodies: Record<string, unknown>[];
const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
const link = (port: number, extra: Partial<Preview> = {}): Preview => ({
  port,
  path: `/preview/abc-${port}-s3cr3t/`,
  shared: false,
  createdAt: "2026-11-28T10:00:00Z",
  expiresAt: "2026-11-29T10:00:00Z",
  expired: false,
  ...extra,
});

beforeEach(() => {
  bodies = [];
  links = [link(8000), link(9000, { expired: true })];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    const body = JSON.parse(String(init.body));
    bodies.push(body);
    expect(url).toBe("/api/core/ai/sandbox/previews");
    switch (body.action) {
      case "list":
        return json(200, { previews: links });
      case "open": {
        const p = link(body.port);
        links = [...links, p];
        return json(200, { preview: { ...p, open: `/preview/abc-${body.port}-s3cr3t~gr4nt/` } });
      }
      case "update":
        links = links.map((l) => (l.port === body.port ? { ...l, shared: body.shared } : l));
        return json(200, { preview: links.find((l) => l.port === body.port) });
      case "revoke":
        links = links.filter((l) => l.port !== body.port);
        return json(200, { revoked: body.port });
    }
    return json(400, { message: "unexpected" });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the chat's preview links", () => {
  it("lists them, opens a port with a link that works at once, shares and revokes one", async () => {
    const { container } = render(<Previews where={where} mode="write" refresh={0} t={t} />);
    await waitFor(() => expect(container.querySelectorAll("[data-preview]")).toHaveLength(2));
    const row = (port: number) => container.querySelector(`[data-preview="${port}"]`);
    const state = (port: number) => row(port)?.querySelector("[data-role=preview-state]")?.textContent;
    expect(state(8000)).toBe("only you");
    expect(row(8000)?.querySelector("a")?.getAttribute("href")).toBe("/preview/abc-8000-s3cr3t/");
    expect(row(8000)?.querySelector("a")?.getAttribute("target")).toBe("_blank");
    expect(state(9000)).toBe("expired");
    expect(row(9000)?.querySelector("a")).toBeNull();

    // A bad port is refused on the page; a good one gets its link.
    const input = container.querySelector("[data-role=preview-port]") as HTMLInputElement;
    fireEvent.change(input, { target: { value: "70000" } });
    fireEvent.click(container.querySelector("[data-role=preview-open]")!);
    await waitFor(() => expect(container.querySelector("[data-role=previews-error]")?.textContent).toBe("Enter a port between 1 and 65535."));
    fireEvent.change(input, { target: { value: "5173" } });
    fireEvent.click(container.querySelector("[data-role=preview-open]")!);
    await waitFor(() => expect(row(5173)?.querySelector("a")?.getAttribute("href")).toBe("/preview/abc-5173-s3cr3t~gr4nt/"));
    expect(container.querySelector("[data-role=previews-error]")).toBeNull();

    fireEvent.click(row(8000)!.querySelector("[data-role=preview-share]")!);
    await waitFor(() => expect(state(8000)).toBe("shared"));
    fireEvent.click(row(8000)!.querySelector("[data-role=preview-revoke]")!);
    await waitFor(() => expect(row(8000)).toBeNull());
    expect(bodies.filter((b) => b.action !== "list")).toEqual([
      { appId: "a1", chatId: "c1", action: "open", port: 5173 },
      { appId: "a1", chatId: "c1", action: "update", port: 8000, shared: true },
      { appId: "a1", chatId: "c1", action: "revoke", port: 8000 },
    ]);
  });

  it("offers no changes in read mode", async () => {
    const { container } = render(<Previews where={where} mode="read" refresh={0} t={t} />);
    await waitFor(() => expect(container.querySelectorAll("[data-preview]")).toHaveLength(2));
    expect(container.querySelector("[data-role=preview-share], [data-role=preview-revoke]")).toBeNull();
  });
});

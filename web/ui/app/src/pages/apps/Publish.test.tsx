import { cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { Publish } from "./Publish";

// The engine is faked at fetch: the app, its keys and links, and the
// settings the page changes.
let sent: { method: string; path: string; body?: unknown }[];
let app: { terminalOff: boolean; [setting: string]: unknown };

beforeEach(() => {
  sent = [];
  app = { terminalOff: true };
  vi.stubGlobal("fetch", async (path: string, init: RequestInit) => {
    const method = init.method ?? "GET";
    const body = init.body ? JSON.parse(String(init.body)) : undefined;
    sent.push({ method, path, body });
    const json = (v: unknown) => new Response(JSON.stringify(v), { status: 200, headers: { "Content-Type": "application/json" } });
    if (path === "/api/apps/a1" && method === "PATCH") {
      app = { ...app, ...body };
      return json(app);
    }
    if (path === "/api/apps/a1") return json(app);
    if (path.endsWith("/keys")) return json({ keys: [] });
    if (path.endsWith("/links")) return json({ links: [] });
    return new Response("{}", { status: 404 });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

test("the app's terminal switch shows the app's setting and changes it alone", async () => {
  const t = translator("en");
  const { container } = render(<Publish data={{ appId: "a1", name: "Desk" }} t={t} lang="en" user={{ id: "u:dora" }} />);
  const box = () => container.querySelector<HTMLInputElement>("#app-terminal")!;
  await waitFor(() => expect(box().disabled).toBe(false));
  expect(box().checked).toBe(false);
  fireEvent.click(box());
  await waitFor(() => expect(box().checked).toBe(true));
  expect(sent.filter((s) => s.method === "PATCH")).toEqual([{ method: "PATCH", path: "/api/apps/a1", body: { terminalOff: false } }]);
  expect(container.querySelector("#terminal-setting")?.textContent).toContain(t("appTerminalOn"));
  // The link form offers the visitors' terminal, off by default.
  expect(container.querySelector<HTMLInputElement>("#new-link-terminal")?.checked).toBe(false);
});

test("the app's idle time shows the engine's default, and saves minutes or the default alone", async () => {
  const t = translator("en");
  const { container } = render(<Publish data={{ appId: "a1", name: "Desk" }} t={t} lang="en" user={{ id: "u:dora" }} />);
  const input = () => container.querySelector<HTMLInputElement>("#app-idle")!;
  await waitFor(() => expect(input().disabled).toBe(false));
  expect(input().value).toBe("");
  expect(input().placeholder).toBe("5");
  fireEvent.change(input(), { target: { value: "15" } });
  fireEvent.submit(input().form!);
  // Saved, and the app read back.
  await waitFor(() => expect(sent.at(-1)).toEqual({ method: "GET", path: "/api/apps/a1", body: undefined }));
  await waitFor(() => expect(input().value).toBe("15"));
  fireEvent.change(input(), { target: { value: "" } });
  fireEvent.submit(input().form!);
  await waitFor(() => expect(sent.filter((s) => s.method === "PATCH")).toHaveLength(2));
  expect(sent.filter((s) => s.method === "PATCH").map((s) => s.body)).toEqual([{ idleMinutes: 15 }, { idleMinutes: 0 }]);
  expect(container.querySelector("#idle-setting")?.textContent).toContain(t("appIdleSaved"));
});

test("how far the app's chats go back shows the engine's retention, and saves the app's or the engine's", async () => {
  app = { ...app, checkpointKeep: 5, checkpointLimits: { keep: 20, maxAgeHours: 168 } };
  const t = translator("en");
  const { container } = render(<Publish data={{ appId: "a1", name: "Desk" }} t={t} lang="en" user={{ id: "u:dora" }} />);
  const keep = () => container.querySelector<HTMLInputElement>("#app-rewind-keep")!;
  const hours = () => container.querySelector<HTMLInputElement>("#app-rewind-hours")!;
  await waitFor(() => expect(keep()?.value).toBe("5"));
  expect(hours().value).toBe("");
  expect([keep().placeholder, hours().placeholder]).toEqual(["20", "168"]);
  expect(container.querySelector("#rewind-setting")?.textContent).toContain("the engine's 20 turns and 168 hours");
  fireEvent.change(hours(), { target: { value: "24" } });
  fireEvent.submit(hours().form!);
  await waitFor(() => expect(container.querySelector("#rewind-setting")?.textContent).toContain(t("appRewindSaved")));
  fireEvent.change(keep(), { target: { value: "" } });
  fireEvent.change(hours(), { target: { value: "" } });
  fireEvent.submit(keep().form!);
  await waitFor(() => expect(sent.filter((s) => s.method === "PATCH")).toHaveLength(2));
  expect(sent.filter((s) => s.method === "PATCH").map((s) => s.body)).toEqual([
    { checkpointKeep: 5, checkpointMaxAgeHours: 24 },
    { checkpointKeep: 0, checkpointMaxAgeHours: 0 },
  ]);
});

test("an engine that keeps no checkpoints shows no setting of them", async () => {
  const t = translator("en");
  const { container } = render(<Publish data={{ appId: "a1", name: "Desk" }} t={t} lang="en" user={{ id: "u:dora" }} />);
  await waitFor(() => expect(container.querySelector<HTMLInputElement>("#app-idle")!.disabled).toBe(false));
  expect(container.querySelector("#rewind-setting")).toBeNull();
});

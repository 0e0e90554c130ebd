import { cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { translator } from "../i18n";
import { ApiKeys } from "./ApiKeys";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const words = { title: "publishKeys", hint: "publishKeysHint", empty: "publishNoKeys", revokeConfirm: "publishRevokeKeyConfirm" };

describe("a list of API keys", () => {
  it("marks an expired key, and sends a new key's picked day as its last second there", async () => {
    const calls: { method: string; url: string; body?: unknown }[] = [];
    const listed = [
      { id: "k1", name: "old", prefix: "fbk_ab", createdAt: "2026-01-01T00:00:00Z", expiresAt: "2026-01-02T00:00:00Z" },
      { id: "k2", name: "ci", prefix: "fbk_cd", createdAt: "2026-01-01T00:00:00Z", ratePerMinute: 30 },
    ];
    vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
      calls.push({ method: init.method ?? "GET", url, body: init.body ? JSON.parse(String(init.body)) : undefined });
      const body = init.method === "POST" ? { name: "web", key: "fbk_secret" } : { keys: listed };
      return new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } });
    });
    const t = translator("zh");
    const { container } = render(<ApiKeys api="/api/apps/a1/keys" id="app-key" words={words} usage={<p data-role="usage">how</p>} t={t} />);
    await waitFor(() => expect(container.querySelectorAll("#app-key-list tbody tr").length).toBe(2));
    expect(container.querySelector('tr[data-name="old"] [data-role=expired]')?.textContent).toBe(t("expired"));
    expect(container.querySelector('tr[data-name="ci"] [data-role=expires]')?.textContent).toBe(t("never"));
    expect(container.querySelector('tr[data-name="ci"] [data-role=rate]')?.textContent).toBe("30 次/分钟");
    expect(container.querySelector("#app-keys [data-role=empty]")?.hasAttribute("hidden")).toBe(true);

    fireEvent.change(container.querySelector("#new-app-key-name")!, { target: { value: " web " } });
    fireEvent.change(container.querySelector("#new-app-key-expires")!, { target: { value: "2099-12-31" } });
    fireEvent.submit(container.querySelector("#new-app-key")!);
    await waitFor(() => expect(container.querySelector<HTMLInputElement>("#app-key-secret input")?.value).toBe("fbk_secret"));
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.url).toBe("/api/apps/a1/keys");
    expect(post.body).toEqual({ name: "web", expiresAt: new Date(2099, 11, 31, 23, 59, 59).toISOString() });
    expect(container.querySelector("#app-key-secret [data-role=usage]")?.textContent).toBe("how");
    fireEvent.click(container.querySelector("#app-key-secret [data-role=hide]")!);
    expect(container.querySelector<HTMLElement>("#app-key-secret")?.hidden).toBe(true);
  });
});

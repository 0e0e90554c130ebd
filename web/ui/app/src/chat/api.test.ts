// @vitest-environment node
/// <reference types="node" />
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiError } from "../api";
import { chatAPI } from "./api";

// An HTTP server that records what the page sends and answers as the
// engine's chat routes do; the browser tests drive the real engine.
interface Seen {
  method: string;
  url: string;
  csrf: string | undefined;
  body: unknown;
}
let server: Server;
let origin: string;
const seen: Seen[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, csrf: req.headers["x-csrf-token"] as string, body: raw ? JSON.parse(raw) : undefined });
      res.setHeader("Content-Type", "application/json");
      if (req.url === "/share/lnk1/api/v1/chat/stop") return res.end(JSON.stringify({ stopped: true }));
      if (req.url === "/api/v1/chat/stop") return res.end(JSON.stringify({ stopped: false }));
      if (req.method === "GET" && req.url === "/api/apps/app%201/chats")
        return res.end(JSON.stringify({ chats: [{ chatId: "c1", appId: "app 1", title: "list the files", updatedAt: "2026-05-01T10:00:00Z" }] }));
      if (req.method === "PATCH") return res.end(JSON.stringify({ chatId: "c1", title: "renamed" }));
      res.statusCode = 404;
      res.end(JSON.stringify({ error: "no chat \"zz\" of yours in this app; nothing was deleted" }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => (seen.length = 0));

describe("chatAPI", () => {
  it("stops a share link's run under the link's path, with the app and chat", async () => {
    expect(await chatAPI("/share/lnk1", "tok", origin).stop("app1", "c9")).toEqual({ stopped: true });
    expect(seen).toEqual([{ method: "POST", url: "/share/lnk1/api/v1/chat/stop", csrf: "tok", body: { appId: "app1", chatId: "c9" } }]);
  });

  it("stops a signed-in run at the engine's root and reports a run that had ended", async () => {
    expect(await chatAPI("", "tok", origin).stop("app1", "c9")).toEqual({ stopped: false });
    expect(seen[0].url).toBe("/api/v1/chat/stop");
  });

  it("lists and renames the caller's chats", async () => {
    const api = chatAPI("", "tok", origin);
    const chats = await api.listChats("app 1");
    expect(chats.map((c) => c.title)).toEqual(["list the files"]);
    expect(await api.renameChat("app 1", "c1", "renamed")).toEqual({ chatId: "c1", title: "renamed" });
    expect(seen[1]).toEqual({ method: "PATCH", url: "/api/apps/app%201/chats/c1", csrf: "tok", body: { title: "renamed" } });
  });

  it("throws the engine's message when it refuses", async () => {
    const err = await chatAPI("", "tok", origin).deleteChats("app1", ["zz"]).catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(404);
    expect((err as ApiError).message).toContain("nothing was deleted");
    expect(seen[0]).toMatchObject({ method: "DELETE", body: { chatIds: ["zz"] } });
  });
});

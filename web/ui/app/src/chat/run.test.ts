// @vitest-environment node
/// <reference types="node" />
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { SseEvent } from "../sse";
import { chatAPI } from "./api";
import { startRun } from "./run";

// A stand-in for the engine's chat routes under a share link's path: the
// completion streams a command's output until it is stopped.
let server: Server;
let origin: string;
let streaming: ServerResponse | undefined;
const stops: unknown[] = [];
let closedByClient = false;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      if (req.url === "/share/l1/api/v1/chat/stop") {
        stops.push(JSON.parse(raw));
        res.setHeader("Content-Type", "application/json");
        return res.end(JSON.stringify({ stopped: true }));
      }
      if (req.url === "/share/l1/api/v1/chat/completions") {
        const body = JSON.parse(raw);
        if (body.chatId === "busy") {
          res.statusCode = 409;
          return res.end(JSON.stringify({ message: "this chat is already answering; wait for it or press Stop" }));
        }
        res.setHeader("Content-Type", "text/event-stream");
        res.write('event: toolCall\ndata: {"tool":"sandbox_shell"}\n\n');
        res.write('event: toolResponse\ndata: {"stream":"stdout","text":"1\\n"}\n\n');
        res.on("close", () => (closedByClient = !res.writableEnded));
        if (body.chatId === "short") {
          res.write('event: answer\ndata: {"choices":[{"delta":{"content":"done"}}]}\n\ndata: [DONE]\n\n');
          return res.end();
        }
        streaming = res; // keeps going until the page stops it
        return;
      }
      res.statusCode = 404;
      res.end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const until = async (ok: () => boolean) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(ok()).toBe(true);
};

describe("startRun", () => {
  it("reads a run's events to its end", async () => {
    const events: SseEvent[] = [];
    const run = startRun("/share/l1", "tok", chatAPI("/share/l1", "tok", origin), { appId: "a", chatId: "short" }, (e) => events.push(e), origin);
    expect(await run.done).toBe("ended");
    expect(events.map((e) => e.event)).toEqual(["toolCall", "toolResponse", "answer", "message"]);
  });

  it("stops a running command: tells the engine which chat and aborts a stream that does not end", async () => {
    const events: SseEvent[] = [];
    const run = startRun("/share/l1", "tok", chatAPI("/share/l1", "tok", origin), { appId: "a", chatId: "c1" }, (e) => events.push(e), origin, 50);
    await until(() => events.length === 2 && streaming !== undefined);
    await run.stop();
    expect(await run.done).toBe("stopped");
    expect(stops).toEqual([{ appId: "a", chatId: "c1" }]);
    await until(() => closedByClient);
  });

  it("fails with the engine's message when it refuses the run", async () => {
    const run = startRun("/share/l1", "tok", chatAPI("/share/l1", "tok", origin), { appId: "a", chatId: "busy" }, () => {}, origin);
    await expect(run.done).rejects.toThrow("already answering");
  });
});

// A chat run (E3): one POST {base}/api/v1/chat/completions read as the
// engine's server-sent events. stop() asks the engine to end the run
// (POST {base}/api/v1/chat/stop) and aborts the stream, so the page is
// free again even when the engine's answer to Stop is slow or lost.
import { SseReader, type SseEvent } from "../sse";
import { ApiError } from "../api";
import type { ChatAPI } from "./api";

export interface RunRequest {
  appId: string;
  chatId: string;
  [field: string]: unknown;
}

export interface ChatRun {
  /** done settles when the stream ends, fails or is stopped. */
  done: Promise<"ended" | "stopped">;
  stop(): Promise<void>;
}

export function startRun(
  base: string,
  csrf: string,
  api: ChatAPI,
  request: RunRequest,
  onEvent: (ev: SseEvent) => void,
  origin = "",
  // how long a stopped run's stream may take to end by itself
  graceMs = 5000,
): ChatRun {
  const ctl = new AbortController();
  let stopped = false;
  const read = async (): Promise<"ended" | "stopped"> => {
    try {
      const resp = await fetch(origin + base + "/api/v1/chat/completions", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify({ stream: true, detail: true, ...request }),
        signal: ctl.signal,
      });
      if (!resp.ok) {
        const e = await resp.json().catch(() => ({}));
        throw new ApiError(resp.status, e.message || e.error || resp.statusText);
      }
      const reader = resp.body!.getReader();
      const decoder = new TextDecoder();
      const sse = new SseReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const ev of sse.feed(decoder.decode(value, { stream: true }))) onEvent(ev);
      }
      return stopped ? "stopped" : "ended";
    } catch (e) {
      if (stopped) return "stopped";
      throw e;
    }
  };
  const done = read();
  return {
    done,
    async stop() {
      if (stopped) return;
      stopped = true;
      let answered: { stopped: boolean };
      try {
        answered = await api.stop(request.appId, request.chatId);
      } catch (e) {
        ctl.abort();
        throw e;
      }
      if (!answered.stopped) {
        ctl.abort();
        return;
      }
      // The engine ends a stopped run's stream itself, after the
      // cancelled card and the stop's line: read them, and abort only a
      // stream that does not end soon.
      const late = setTimeout(() => ctl.abort(), graceMs);
      void done.finally(() => clearTimeout(late)).catch(() => {});
    },
  };
}

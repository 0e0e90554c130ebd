import { useEffect, useRef, useState } from "react";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import "./terminal.css";

// TerminalPane is the chat's terminal (L1): a shell in the chat's
// sandbox, in xterm.js over a WebSocket. It fits its box and follows its
// size; when the connection drops it reconnects, and the engine replays
// the recent screen of the same shell. Ctrl+Shift+C copies the
// selection, Ctrl+Shift+V (or the browser's paste) pastes.
export function TerminalPane(props: { apiBase?: string; appId: string; chatId: string; userId?: string; t: (key: string) => string; onClose: () => void }) {
  const { apiBase, appId, chatId, userId, t, onClose } = props;
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<"connecting" | "open" | "lost" | "ended">("connecting");
  const [note, setNote] = useState("");

  useEffect(() => {
    const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace" });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    let ws: WebSocket | null = null;
    let closed = false;
    let ended = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let tries = 0;
    // size is what the shell was last told: each change makes the shell
    // redraw its prompt, moving up as many lines as the prompt took at
    // the size before, so a passing size (a box not laid out yet fits 2
    // columns) would erase the lines above it.
    let size = "";
    const enc = new TextEncoder();
    const send = (data: string | Uint8Array) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(typeof data === "string" ? enc.encode(data) : data);
    };
    const connect = () => {
      replaying = false;
      size = `${term.cols}x${term.rows}`;
      const q = new URLSearchParams({ appId, chatId, cols: String(term.cols), rows: String(term.rows) });
      if (userId) q.set("userId", userId);
      const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + (apiBase ?? "") + "/api/core/ai/sandbox/terminal?" + q;
      const sock = new WebSocket(url);
      ws = sock;
      sock.binaryType = "arraybuffer";
      // A reconnection replays the recent screen, each stretch at the
      // size it was drawn at; the box's own size comes back after it.
      let first = true;
      const clean = () => {
        if (first) {
          term.reset();
          first = false;
        }
      };
      sock.onopen = () => {
        tries = 0;
        setState("open");
        setNote("");
      };
      sock.onmessage = (e) => {
        if (typeof e.data !== "string") {
          clean();
          term.write(new Uint8Array(e.data as ArrayBuffer));
          return;
        }
        const m = JSON.parse(e.data) as { type: string; code?: number; message?: string; cols?: number; rows?: number };
        if (m.type === "size" && m.cols && m.rows) {
          clean();
          replaying = true;
          term.resize(m.cols, m.rows);
        } else if (m.type === "replayed") {
          replaying = false;
          follow();
        } else if (m.type === "exit") {
          ended = true;
          setState("ended");
          setNote(t("terminalEnded").replace("{code}", String(m.code ?? "")));
        } else if (m.type === "error") {
          ended = true;
          setState("ended");
          setNote(m.message ?? "");
        }
      };
      sock.onclose = () => {
        if (closed || ended || ws !== sock) return;
        setState("lost");
        setNote(t("terminalLost"));
        if (tries++ < 5) retry = setTimeout(connect, Math.min(500 * 2 ** tries, 8000));
      };
    };
    term.onData((d) => send(d));
    term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    term.attachCustomKeyEventHandler((e) => {
      if (e.type === "keydown" && e.ctrlKey && e.shiftKey && e.code === "KeyC") {
        void navigator.clipboard?.writeText(term.getSelection());
        return false;
      }
      if (e.type === "keydown" && e.ctrlKey && e.shiftKey && e.code === "KeyV") {
        void navigator.clipboard?.readText().then((text) => term.paste(text));
        return false;
      }
      return true;
    });
    // The first time the box is laid out, at a real size, the terminal
    // connects; after that it follows the box's size, except while a
    // replay draws at the sizes it had. A hidden box keeps the size the
    // shell has.
    let replaying = false;
    const follow = () => {
      const d = fit.proposeDimensions();
      if (replaying || !d || !(d.cols >= 10 && d.rows >= 2)) return;
      fit.fit();
      if (!ws) {
        connect();
        return;
      }
      const now = `${term.cols}x${term.rows}`;
      if (now !== size && ws.readyState === WebSocket.OPEN) {
        size = now;
        ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
      }
    };
    const resized = new ResizeObserver(follow);
    resized.observe(box.current!);
    term.focus();
    (window as unknown as { flowboxTerminal?: Terminal }).flowboxTerminal = term;
    return () => {
      closed = true;
      clearTimeout(retry);
      resized.disconnect();
      ws?.close();
      term.dispose();
    };
  }, [apiBase, appId, chatId, userId, t]);

  return (
    <section className="terminal-pane card" id="terminal" data-state={state} aria-label={t("terminal")}>
      <div className="terminal-head">
        <h3>{t("terminal")}</h3>
        <span className="hint" data-role="terminal-note" role="status">
          {note}
        </span>
        <button type="button" className="secondary" data-role="close-terminal" aria-label={t("close")} title={t("close")} onClick={onClose}>
          ×
        </button>
      </div>
      <p className="hint terminal-warning">{t("terminalWarning")}</p>
      <div className="terminal-box" ref={box} data-role="terminal-box" />
    </section>
  );
}

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
    fit.fit();
    let ws: WebSocket | null = null;
    let closed = false;
    let ended = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let tries = 0;
    const enc = new TextEncoder();
    const send = (data: string | Uint8Array) => {
      if (ws?.readyState === WebSocket.OPEN) ws.send(typeof data === "string" ? enc.encode(data) : data);
    };
    const connect = () => {
      const q = new URLSearchParams({ appId, chatId, cols: String(term.cols), rows: String(term.rows) });
      if (userId) q.set("userId", userId);
      const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + (apiBase ?? "") + "/api/core/ai/sandbox/terminal?" + q;
      const sock = new WebSocket(url);
      ws = sock;
      sock.binaryType = "arraybuffer";
      let first = true;
      sock.onopen = () => {
        tries = 0;
        setState("open");
        setNote("");
      };
      sock.onmessage = (e) => {
        if (typeof e.data === "string") {
          const m = JSON.parse(e.data) as { type: string; code?: number; message?: string };
          if (m.type === "exit") {
            ended = true;
            setState("ended");
            setNote(t("terminalEnded").replace("{code}", String(m.code ?? "")));
          } else if (m.type === "error") {
            ended = true;
            setState("ended");
            setNote(m.message ?? "");
          }
          return;
        }
        // A reconnection replays the screen: draw it on a clean one.
        if (first) {
          term.reset();
          first = false;
        }
        term.write(new Uint8Array(e.data as ArrayBuffer));
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
    const resized = new ResizeObserver(() => {
      fit.fit();
      if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    });
    resized.observe(box.current!);
    connect();
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

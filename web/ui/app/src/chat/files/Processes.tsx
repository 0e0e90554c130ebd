import { useCallback, useEffect, useRef, useState } from "react";
import { listProcesses, readProcess, stopProcess } from "./api";
import type { Process, Where } from "./api";

// shownOutput bounds the output kept on the page for one process: its
// latest part, as a terminal's scrollback would.
const shownOutput = 64 << 10;
// pollMs is how often a running process's open output is read again.
const pollMs = 2000;

// Processes are the background processes the agent started in the chat's
// sandbox (L3): each with its command and state, its output on demand
// (followed while it runs), and Stop in write mode. Nothing is shown
// while there are none.
export function Processes({ where, mode, refresh, t }: { where: Where; mode: "read" | "write"; refresh: number; t: (key: string) => string }) {
  const [list, setList] = useState<Process[]>([]);
  const [error, setError] = useState("");
  const [shown, setShown] = useState<string | null>(null);
  const load = useCallback(async () => {
    try {
      setList(await listProcesses(where));
      setError("");
    } catch (err) {
      setError((err as Error).message);
    }
  }, [where]);
  useEffect(() => {
    load();
  }, [load, refresh]);

  const stop = async (p: Process) => {
    try {
      await stopProcess(where, p.id);
    } catch (err) {
      setError((err as Error).message);
    }
    await load();
  };

  if (list.length === 0 && !error) return null;
  return (
    <section className="processes" data-role="processes" aria-label={t("processes")}>
      <h4>{t("processes")}</h4>
      {error && (
        <p className="status error" data-role="processes-error" role="alert">
          {error}
        </p>
      )}
      <ul>
        {list.map((p) => (
          <li key={p.id} data-process={p.id} data-state={p.running ? "running" : "ended"}>
            <div className="process-head">
              <code className="process-command" title={p.command}>
                {p.command}
              </code>
              <span className={"badge " + (p.running ? "running" : "ended")} data-role="state">
                {p.running ? t("processRunning") : p.stopped ? t("processStopped") : t("processExited").replace("{code}", String(p.exitCode ?? ""))}
              </span>
              <button type="button" className="secondary" data-role="output" aria-expanded={shown === p.id} onClick={() => setShown(shown === p.id ? null : p.id)}>
                {shown === p.id ? t("processHideOutput") : t("processOutput")}
              </button>
              {mode === "write" && p.running && (
                <button type="button" className="secondary" data-role="stop" onClick={() => stop(p)}>
                  {t("processStop")}
                </button>
              )}
            </div>
            {shown === p.id && <Output where={where} process={p} onEnded={load} t={t} />}
          </li>
        ))}
      </ul>
    </section>
  );
}

// Output is a process's output: its latest part first, then what it
// writes while it runs.
function Output({ where, process, onEnded, t }: { where: Where; process: Process; onEnded: () => void; t: (key: string) => string }) {
  const [text, setText] = useState<string | null>(null);
  const next = useRef(Math.max(0, process.output - shownOutput));
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      try {
        const got = await readProcess(where, process.id, next.current);
        if (!live) return;
        next.current = got.next;
        setText((old) => ((old ?? "") + got.output).slice(-shownOutput));
        if (got.process.running) timer = setTimeout(read, pollMs);
        else if (process.running) onEnded();
      } catch (err) {
        if (live) setText((old) => (old ?? "") + "\n[" + (err as Error).message + "]");
      }
    };
    read();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [where, process.id, process.running, onEnded]);
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text]);
  return (
    <pre className="process-output" data-role="process-output" ref={pre} aria-busy={text === null}>
      {text === "" ? t("processNoOutput") : text}
    </pre>
  );
}

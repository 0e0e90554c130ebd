// The debug run: a side chat with the app as the canvas saved it. Nodes
// light up on the canvas as they run (flowNodeStatus, flowNodeResponse),
// and the run details list every node with its inputs, outputs, time,
// tokens and error (flowResponses).
import { useRef, useState } from "react";
import type { Variable } from "./graph";
import type { Translate } from "./i18n";
import { apply, emptyRun, SseReader, type NodeRun, type Question, type Run } from "./sse";

export interface DebugProps {
  appId: string;
  csrf: string;
  t: Translate;
  variables: Variable[];
  // save makes sure the engine holds the canvas's graph; false: it could
  // not, and the page says why.
  save: () => Promise<boolean>;
  onRun: (run: Run) => void;
  onClose: () => void;
  onPick: (nodeId: string) => void;
}

interface Turn {
  question: string;
  run: Run;
}

const newChatId = () => "debug-" + Math.random().toString(36).slice(2, 12);

export function Debug(props: DebugProps) {
  const { t } = props;
  const [chatId, setChatId] = useState(newChatId);
  const [turns, setTurns] = useState<Turn[]>([]);
  const [question, setQuestion] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState("");
  const abort = useRef<AbortController | null>(null);

  const variables = (): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const v of props.variables) {
      const text = values[v.key];
      if (text === undefined || text === "") continue;
      if (v.type === "number") out[v.key] = Number(text);
      else if (v.type === "boolean") out[v.key] = text === "true";
      else if (v.type === "json") {
        try {
          out[v.key] = JSON.parse(text);
        } catch {
          out[v.key] = text;
        }
      } else out[v.key] = text;
    }
    return out;
  };

  const send = async () => {
    const q = question.trim();
    if (!q || busy) return;
    setQuestion("");
    await ask(q, { messages: [{ role: "user", content: q }] }, true);
  };

  // answer continues a paused run with the person's answer.
  const answer = (said: string, interactive: Record<string, unknown>) => ask(said, { interactive }, false);

  const ask = async (q: string, request: Record<string, unknown>, saveFirst: boolean) => {
    if (busy) return;
    setProblem("");
    setBusy(true);
    if (saveFirst && !(await props.save())) {
      setBusy(false);
      return;
    }
    let run = emptyRun();
    const index = turns.length;
    setTurns((ts) => [...ts, { question: q, run }]);
    const show = (r: Run) => {
      run = r;
      props.onRun(r);
      setTurns((ts) => ts.map((x, i) => (i === index ? { ...x, run: r } : x)));
    };
    show(run);
    abort.current = new AbortController();
    try {
      const resp = await fetch("/api/v1/chat/completions", {
        method: "POST",
        credentials: "same-origin",
        signal: abort.current.signal,
        headers: { "Content-Type": "application/json", "X-CSRF-Token": props.csrf },
        body: JSON.stringify({
          appId: props.appId,
          chatId,
          stream: true,
          detail: true,
          draft: true,
          variables: variables(),
          ...request,
        }),
      });
      if (!resp.ok || !resp.body) {
        const body = await resp.json().catch(() => ({}));
        setProblem(body.message || resp.statusText);
        return;
      }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      const sse = new SseReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        let next = run;
        for (const ev of sse.feed(decoder.decode(value, { stream: true }))) next = apply(next, ev);
        if (next !== run) show(next);
      }
      show({ ...run, done: true });
    } catch (err) {
      if ((err as Error).name !== "AbortError") setProblem((err as Error).message);
    } finally {
      setBusy(false);
      abort.current = null;
    }
  };

  return (
    <aside className="panel debug" aria-label={t("canvasDebug")}>
      <div className="debug-head">
        <h2>{t("canvasDebug")}</h2>
        <button
          type="button"
          onClick={() => {
            abort.current?.abort();
            setTurns([]);
            setChatId(newChatId());
            props.onRun(emptyRun());
          }}
        >
          {t("canvasDebugRestart")}
        </button>
        <button type="button" onClick={props.onClose}>
          {t("close")}
        </button>
      </div>
      <p className="hint">{t("canvasDebugHint")}</p>
      {props.variables.length > 0 && (
        <fieldset className="debug-variables">
          <legend>{t("canvasVariables")}</legend>
          {props.variables.map((v) => (
            <div key={v.key}>
              <label htmlFor={"debug-var-" + v.key}>
                {v.label || v.key}
                {v.required && <span className="required"> *</span>}
              </label>
              {v.type === "select" ? (
                <select id={"debug-var-" + v.key} value={values[v.key] ?? ""} onChange={(e) => setValues({ ...values, [v.key]: e.target.value })}>
                  <option value="">—</option>
                  {(v.options ?? []).map((o) => (
                    <option key={o}>{o}</option>
                  ))}
                </select>
              ) : (
                <input
                  id={"debug-var-" + v.key}
                  type="text"
                  value={values[v.key] ?? ""}
                  placeholder={v.defaultValue === undefined ? "" : JSON.stringify(v.defaultValue)}
                  onChange={(e) => setValues({ ...values, [v.key]: e.target.value })}
                />
              )}
            </div>
          ))}
        </fieldset>
      )}
      <div className="debug-turns">
        {turns.map((turn, i) => (
          <div key={i} className="debug-turn">
            <p className="debug-question">{turn.question}</p>
            <p className="debug-answer">{turn.run.answer || (turn.run.done ? "" : "…")}</p>
            {turn.run.errors.map((e, j) => (
              <p key={j} className="field-problem" role="alert">
                {e}
              </p>
            ))}
            {turn.run.question && i === turns.length - 1 && <Ask q={turn.run.question} t={t} answer={answer} />}
            {turn.run.details.length > 0 && <Details runs={turn.run.details} t={t} onPick={props.onPick} />}
          </div>
        ))}
      </div>
      {problem && (
        <p className="field-problem" role="alert">
          {problem}
        </p>
      )}
      <form
        className="debug-ask"
        onSubmit={(e) => {
          e.preventDefault();
          send();
        }}
      >
        <input type="text" aria-label={t("canvasDebugAsk")} placeholder={t("canvasDebugAsk")} value={question} onChange={(e) => setQuestion(e.target.value)} />
        <button type="submit" className="primary" disabled={busy || !question.trim()}>
          {t("send")}
        </button>
      </form>
    </aside>
  );
}

// Details lists every node of a run: time, tokens, error, the branch it
// took, and its inputs and outputs when opened.
export function Details(props: { runs: NodeRun[]; t: Translate; onPick?: (nodeId: string) => void }) {
  const { t } = props;
  return (
    <details className="run-details" open>
      <summary>{t("canvasRunDetails")}</summary>
      <ol>
        {props.runs.map((r, i) => (
          <li key={i} className={"run-node" + (r.error ? " run-failed" : "")} data-node={r.nodeId}>
            <details>
              <summary>
                <button type="button" className="link" onClick={() => props.onPick?.(r.nodeId)}>
                  {r.moduleName}
                </button>{" "}
                <span className="hint">
                  {r.moduleType} · {Math.round(r.runningTime * 1000)} ms
                  {r.tokens ? " · " + r.tokens + " " + t("canvasTokens") : ""}
                  {r.branches?.length ? " · → " + r.branches.join(", ") : ""}
                </span>
                {r.error && <span className="field-problem"> {r.error}</span>}
              </summary>
              <h4>{t("canvasInputs")}</h4>
              <pre>{JSON.stringify(r.inputs ?? {}, null, 2)}</pre>
              <h4>{t("canvasOutputs")}</h4>
              <pre>{JSON.stringify(r.outputs ?? {}, null, 2)}</pre>
            </details>
          </li>
        ))}
      </ol>
    </details>
  );
}

// Ask shows what a paused run asks, and sends the answer: an option, a
// form's fields, or a command's approval.
function Ask(props: { q: Question; t: Translate; answer: (said: string, interactive: Record<string, unknown>) => void }) {
  const { q, t } = props;
  const [values, setValues] = useState<Record<string, string>>({});
  if (q.kind === "commandApproval")
    return (
      <div className="debug-question-card">
        <p>
          {t("approvalNeeded")}: <code>{q.command}</code>
        </p>
        <button type="button" onClick={() => props.answer(t("approve"), { approvalId: q.id, decision: "approve" })}>
          {t("approve")}
        </button>{" "}
        <button type="button" onClick={() => props.answer(t("reject"), { approvalId: q.id, decision: "reject" })}>
          {t("reject")}
        </button>
      </div>
    );
  return (
    <div className="debug-question-card">
      {q.description && <p>{q.description}</p>}
      {q.options.map((o) => (
        <button key={o.key} type="button" className="debug-option" onClick={() => props.answer(o.value, { interactiveId: q.id, value: o.value })}>
          {o.value}
        </button>
      ))}
      {q.fields.length > 0 && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const v: Record<string, unknown> = {};
            for (const f of q.fields) {
              const x = values[f.key];
              if (x === undefined || x === "") continue;
              v[f.key] = f.type === "numberInput" ? Number(x) : f.type === "switch" ? x === "true" : x;
            }
            props.answer(JSON.stringify(v), { interactiveId: q.id, value: v });
          }}
        >
          {q.fields.map((f) => (
            <div key={f.key}>
              <label htmlFor={"debug-field-" + f.key}>
                {f.label || f.key}
                {f.required && <span className="required"> *</span>}
              </label>
              <input id={"debug-field-" + f.key} type="text" value={values[f.key] ?? ""} onChange={(e) => setValues({ ...values, [f.key]: e.target.value })} />
            </div>
          ))}
          <button type="submit" className="primary">
            {t("send")}
          </button>
        </form>
      )}
    </div>
  );
}

import type { Translate } from "../i18n";
import type { NodeRun } from "../sse";
import { Markdown } from "./Markdown";

// answerText is a node's text answer, which is drawn as Markdown above
// the outputs' JSON.
function answerText(outputs: unknown): string {
  const o = outputs as Record<string, unknown> | null | undefined;
  return o && typeof o.answerText === "string" ? o.answerText : "";
}

// RunDetails is a turn's run details (W4), from the flowResponses event
// or a history item's responses, for those who build the app: every node
// that ran, its time, tokens, the branch it took and its error, with
// its inputs and outputs when opened. Everything is text: nothing a node
// produced is inserted as HTML but through the sanitising Markdown.
export function RunDetails({ responses, t }: { responses: NodeRun[]; t: Translate }) {
  if (!responses.length) return null;
  return (
    <details className="run-details">
      <summary>{t("runDetails")}</summary>
      <ol>
        {responses.map((r, i) => {
          const facts = [r.moduleType, Math.round((r.runningTime || 0) * 1000) + " ms"];
          if (r.tokens) facts.push(r.tokens + " tokens");
          if (r.branches?.length) facts.push("→ " + r.branches.join(", "));
          const text = answerText(r.outputs);
          return (
            <li key={i} className={"run-node" + (r.error ? " run-failed" : "")} data-node={r.nodeId}>
              <details>
                <summary>
                  <strong>{r.moduleName}</strong> <span className="hint">{facts.join(" · ")}</span>
                  {r.error && <span className="error"> {r.error}</span>}
                </summary>
                <div className="hint">{t("runInputs")}</div>
                <pre>{JSON.stringify(r.inputs ?? {}, null, 2)}</pre>
                <div className="hint">{t("runOutputs")}</div>
                {text && <Markdown className="text run-answer" text={text} />}
                <pre>{JSON.stringify(r.outputs ?? {}, null, 2)}</pre>
              </details>
            </li>
          );
        })}
      </ol>
    </details>
  );
}

import { useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import { type ImportReport, importLines, importSummary } from "./format";

type Outcome = { error: string } | { name: string; appId: string; report: ImportReport };

// ImportApp makes a new app of a workflow file (Flowbox's export or
// FastGPT's JSON, W6) and shows the engine's report: what was imported,
// what was left out and why.
export function ImportApp({ t }: { t: Translate }) {
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const file = (e.currentTarget.elements.namedItem("file") as HTMLInputElement).files?.[0];
    setOutcome(null);
    if (!file) return;
    let workflow: unknown;
    try {
      workflow = JSON.parse(await file.text());
    } catch (err) {
      setOutcome({ error: t("importNotJson") + " " + (err as Error).message });
      return;
    }
    setBusy(true);
    try {
      const body = await request<{ app: { appId: string; name: string }; report?: ImportReport }>("POST", "/api/apps/import", { workflow });
      setOutcome({ name: body.app.name, appId: body.app.appId, report: body.report ?? {} });
    } catch (err) {
      setOutcome({ error: (err as Error).message });
    } finally {
      setBusy(false);
    }
  };
  const lines = outcome && "report" in outcome ? importLines(outcome.report) : [];
  return (
    <form id="import-app" className="card" onSubmit={submit}>
      <label htmlFor="import-file">{t("importWorkflow")}</label>
      <input type="file" id="import-file" name="file" accept=".json,application/json" aria-describedby="import-hint" />{" "}
      <button type="submit" className="secondary" disabled={busy}>
        {t("importWorkflow")}
      </button>
      <p className="hint" id="import-hint">
        {t("importHint")}
      </p>
      <div data-role="report" role="status">
        {outcome && "error" in outcome && <p className="error">{outcome.error}</p>}
        {outcome && "report" in outcome && (
          <>
            <p className="ok" data-role="summary">
              {importSummary(t, outcome.name, outcome.report)}
            </p>
            {lines.length > 0 && (
              <ul className="import-report">
                {lines.map((l, i) => (
                  <li key={i}>{l}</li>
                ))}
              </ul>
            )}
            <p>
              <a className="button" href={"/apps/" + encodeURIComponent(outcome.appId) + "/flow"}>
                {t("importOpen")}
              </a>
            </p>
          </>
        )}
      </div>
    </form>
  );
}

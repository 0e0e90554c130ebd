import type { Translate } from "../../i18n";
import { callSummary, shown, SHOWN, whole, type Output, type ToolCall } from "./model";
import "./cards.css";

// download saves a stream's whole output as a text file.
function download(name: string, o: Output) {
  const url = URL.createObjectURL(new Blob([whole(o)], { type: "text/plain" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Stream is one labelled output block. Past SHOWN characters only the
// end is drawn, with a note and the whole output as a download, so a
// command that prints megabytes keeps the page responsive.
function Stream({ call, name, o, t }: { call: ToolCall; name: "stdout" | "stderr"; o: Output; t: Translate }) {
  const { text, cut } = shown(o);
  return (
    <div className="stream" data-stream={name}>
      <div className="stream-label">{name}</div>
      {cut && (
        <div className="stream-cut hint" data-role="cut">
          {t("outputCut").replace("{size}", `${SHOWN / 1024} KiB`)}{" "}
          <button type="button" className="link" data-role="download-output" onClick={() => download(`${call.tool}-${call.id}-${name}.txt`, o)}>
            {t("downloadOutput")}
          </button>
        </div>
      )}
      <pre className={name} data-role={name}>
        {text}
      </pre>
    </div>
  );
}

// badge is a call's status as its card says it: the status's label, and
// a command's exit code when it failed with one.
function badge(c: ToolCall, t: Translate): string {
  const label = t(c.status);
  return c.status === "failed" && c.exitCode !== undefined && c.exitCode !== 0 ? `${label} · ${t("exitCode").replace("{code}", String(c.exitCode))}` : label;
}

// ToolCard is a tool call: the tool, what it was asked, a status badge,
// the duration, and its stdout and stderr, filled live while a command
// runs. It is open while the command runs, so the output is seen, and
// closes when it ends (E3); the person can open it again.
export function ToolCard({ call, t }: { call: ToolCall; t: Translate }) {
  const running = call.status === "running";
  return (
    <details className="tool-card" data-tool-id={call.id} data-status={call.status} open={running}>
      <summary>
        <span className="label">{call.tool}</span>
        <span className={"badge " + call.status.replace(/ /g, "-")} data-role="status">
          {badge(call, t)}
        </span>
        <span className="duration" data-role="duration">
          {call.durationMs !== undefined ? `${call.durationMs} ms` : ""}
        </span>
        <code className="command" data-role="command">
          {callSummary(call.tool, call.params)}
        </code>
      </summary>
      <div className="out">
        <Stream call={call} name="stdout" o={call.stdout} t={t} />
        {call.stderr.total > 0 && <Stream call={call} name="stderr" o={call.stderr} t={t} />}
      </div>
    </details>
  );
}

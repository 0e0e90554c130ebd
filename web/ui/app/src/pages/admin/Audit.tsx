import { useCallback, useEffect, useRef, useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import type { PageProps } from "../types";
import { auditFields, auditQuery, auditTimes } from "./format";
import { Status, useStatus } from "../Status";
import { When } from "../When";
import { Table } from "../Table";

export interface AuditData {
  statuses: string[] | null;
}

// AuditRecord is one sandbox call as /admin/api/audit gives it.
interface AuditRecord {
  id: string;
  time: string;
  actorId?: string;
  actorKind?: string;
  via?: string;
  appId: string;
  chatId: string;
  kind: string;
  command?: string;
  op?: string;
  path?: string;
  decision: string;
  rule?: string;
  reason?: string;
  status: string;
  exitCode?: number;
  durationMs: number;
  stdoutBytes?: number;
  stderrBytes?: number;
  bytes?: number;
  truncated?: boolean;
  error?: string;
}

interface AuditPageAnswer {
  records: AuditRecord[] | null;
  nextCursor?: string;
}

// Audit is the admins' audit page: the filters become the query of
// /admin/api/audit and of the export link; "Next page" follows the
// answer's cursor, "Newest" starts again.
export function Audit({ data, t }: PageProps<AuditData>) {
  const form = useRef<HTMLFormElement>(null);
  const [records, setRecords] = useState<AuditRecord[]>([]);
  const [next, setNext] = useState("");
  const [exportQuery, setExportQuery] = useState("");
  const { said, note, fail } = useStatus();

  const load = useCallback(
    async (cursor: string) => {
      const f = form.current!.elements as unknown as Record<string, HTMLInputElement>;
      const values: Record<string, string> = {};
      for (const name of [...auditFields, ...auditTimes]) values[name] = f[name].value;
      const q = auditQuery(values);
      setExportQuery(q.toString());
      if (cursor) q.set("cursor", cursor);
      let page: AuditPageAnswer;
      try {
        page = await request<AuditPageAnswer>("GET", "/admin/api/audit?" + q);
      } catch (err) {
        fail(err);
        return;
      }
      const got = page.records ?? [];
      setRecords(got);
      note(got.length ? "" : t("auditNone"));
      setNext(page.nextCursor ?? "");
    },
    [fail, note, t],
  );
  useEffect(() => {
    load("");
  }, [load]);

  const any = <option value="">{t("auditAny")}</option>;
  return (
    <>
      <h2>{t("audit")}</h2>
      <form
        id="audit-filters"
        className="card"
        ref={form}
        onSubmit={(e) => {
          e.preventDefault();
          load("");
        }}
      >
        <div className="fields">
          <Field id="audit-user" name="user" label={t("auditUser")} />
          <Field id="audit-app" name="app" label={t("auditApp")} />
          <Field id="audit-chat" name="chat" label={t("auditChat")} />
          <div>
            <label htmlFor="audit-kind">{t("auditKind")}</label>
            <select id="audit-kind" name="kind">
              {any}
              <option value="command">{t("auditCommand")}</option>
              <option value="file">{t("auditFile")}</option>
            </select>
          </div>
          <div>
            <label htmlFor="audit-decision">{t("auditDecision")}</label>
            <select id="audit-decision" name="decision">
              {any}
              <option value="allowed">allowed</option>
              <option value="refused">refused</option>
            </select>
          </div>
          <div>
            <label htmlFor="audit-status">{t("state")}</label>
            <select id="audit-status" name="status">
              {any}
              {(data.statuses ?? []).map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </div>
          <Field id="audit-since" name="since" label={t("auditSince")} type="datetime-local" />
          <Field id="audit-until" name="until" label={t("auditUntil")} type="datetime-local" />
          <div>
            <button type="submit">{t("auditApply")}</button>{" "}
            <a id="audit-export" href={"/admin/api/audit/export" + (exportQuery ? "?" + exportQuery : "")} download>
              {t("auditExport")}
            </a>
          </div>
        </div>
      </form>
      <Status said={said} t={t} id="audit-status-line" marked={false} />
      <Table id="audit" heads={[t("auditTime"), t("auditWho"), t("auditWhere"), t("auditWhat"), t("auditDecision"), t("state"), t("auditExit"), t("auditDuration"), t("auditOutput")]}>
        {records.map((r) => (
          <Row key={r.id} r={r} t={t} />
        ))}
      </Table>
      <p>
        <button type="button" className="secondary" id="audit-first" onClick={() => load("")}>
          {t("auditFirst")}
        </button>{" "}
        <button type="button" id="audit-next" hidden={!next} onClick={() => load(next)}>
          {t("auditNext")}
        </button>
      </p>
    </>
  );
}

function Field({ id, name, label, type = "text" }: { id: string; name: string; label: string; type?: string }) {
  return (
    <div>
      <label htmlFor={id}>{label}</label>
      <input type={type} id={id} name={name} autoComplete="off" />
    </div>
  );
}

// Row is one record: who, where, what (a command, or a file operation and
// its path), the decision and its rule, how it ended.
function Row({ r, t }: { r: AuditRecord; t: Translate }) {
  const who = [r.actorId || "-", r.actorKind, r.via].filter(Boolean).join(" · ");
  const file = r.kind === "file";
  const what = file ? r.op + " " + r.path : r.command;
  const decision = r.rule ? r.decision + " (" + r.rule + ")" : r.decision;
  const output = file ? String(r.bytes || 0) : r.stdoutBytes + " / " + r.stderrBytes + (r.truncated ? " " + t("auditTruncated") : "");
  return (
    <tr data-id={r.id} data-status={r.status} data-kind={r.kind}>
      <td>
        <When iso={r.time} t={t} seconds />
      </td>
      <td data-role="who">{who}</td>
      <td data-role="where">{r.appId + " / " + r.chatId}</td>
      <td data-role="what">
        <code>{what || ""}</code>
        {r.error && <div className="hint">{r.error}</div>}
      </td>
      <td data-role="decision" title={r.reason || ""}>
        {decision}
      </td>
      <td data-role="status">
        <span className={"state " + r.status}>{r.status}</span>
      </td>
      <td data-role="exit">{file ? "" : String(r.exitCode)}</td>
      <td data-role="duration">{r.durationMs + " ms"}</td>
      <td data-role="output">{output}</td>
    </tr>
  );
}

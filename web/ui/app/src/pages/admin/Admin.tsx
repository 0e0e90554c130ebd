import { useState } from "react";
import { shown, usePolled, type Usage } from "../usage";
import type { Translate } from "../../i18n";
import { request } from "../http";
import type { PageProps } from "../types";
import { Limits, type LimitsView } from "./Limits";
import { Pool, type PoolView } from "./Pool";
import { Table } from "../Table";

// Sandbox is one sandbox record as the admin page's data gives it.
export interface Sandbox {
  sandboxId: string;
  provider: string;
  status: string;
  appId: string;
  chatId: string;
  userId: string;
  lastActive: string;
}

export interface AdminData {
  sandboxes: Sandbox[] | null;
  limits?: LimitsView;
  pool?: PoolView;
}

// Admin is the admins' first page: every sandbox with Stop and Delete,
// the caps with their use and the warm pool's figures.
export function Admin({ data, t }: PageProps<AdminData>) {
  const usage = usePolled(readUsage);
  return (
    <>
      <h2>{t("sandboxes")}</h2>
      <Table
        id="sandboxes"
        heads={["ID", t("provider"), t("status"), t("app"), t("chat"), t("owner"), t("lastActive"), t("usageCPU"), t("usageMemory"), t("usageProcesses"), t("usageDisk")]}
        actions={t("actions")}
      >
        {(data.sandboxes ?? []).map((s) => (
          <SandboxRow key={s.sandboxId} s={s} usage={usage?.[s.sandboxId]} t={t} />
        ))}
      </Table>
      {data.limits && <Limits limits={data.limits} t={t} />}
      {data.pool && <Pool pool={data.pool} t={t} />}
    </>
  );
}

// readUsage reads the running sandboxes' latest metrics; the engine
// samples them while this page (or a metrics scrape) asks.
const readUsage = async () => (await request<{ metrics: Record<string, Usage> }>("GET", "/admin/api/sandboxes/metrics")).metrics;

// SandboxRow is one sandbox, with what it uses while it runs. Stop shows the page again with the new
// state; a deletion is recorded and the workers remove the sandbox, then
// its record, so the row stays, marked, until the next reload.
function SandboxRow({ s, usage, t }: { s: Sandbox; usage?: Usage; t: Translate }) {
  const [deleting, setDeleting] = useState(false);
  const [busy, setBusy] = useState(false);
  const act = async (action: "stop" | "delete") => {
    setBusy(true);
    try {
      await request("POST", "/admin/api/sandboxes/" + encodeURIComponent(s.sandboxId) + "/" + action);
      if (action === "stop") {
        location.reload();
        return;
      }
      setDeleting(true);
    } catch (err) {
      alert((err as Error).message);
      setBusy(false);
    }
  };
  const status = deleting ? "deleting" : s.status;
  return (
    <tr data-sandbox={s.sandboxId} data-status={status}>
      <td>
        <code>{s.sandboxId}</code>
      </td>
      <td data-role="provider">{s.provider}</td>
      <td data-role="status">{t(status)}</td>
      <td data-role="app">{s.appId}</td>
      <td data-role="chat">{s.chatId}</td>
      <td data-role="owner">{s.userId}</td>
      <td data-role="last-active">{s.lastActive}</td>
      {usage && s.status === "running" ? (
        <>
          <td data-role="cpu">{shown(usage).cpu}</td>
          <td data-role="memory">{shown(usage).memory}</td>
          <td data-role="processes">{shown(usage).processes}</td>
          <td data-role="disk">{shown(usage).disk}</td>
        </>
      ) : (
        <td colSpan={4} className="hint" data-role="usage-none"></td>
      )}
      <td className="actions">
        <button type="button" className="secondary" data-admin-action="stop" data-id={s.sandboxId} disabled={deleting || busy} onClick={() => act("stop")}>
          {t("stop")}
        </button>{" "}
        <button type="button" className="secondary" data-admin-action="delete" data-id={s.sandboxId} disabled={deleting || busy} onClick={() => act("delete")}>
          {t("delete")}
        </button>
      </td>
    </tr>
  );
}

import type { Translate } from "../../i18n";
import { Table } from "../Table";

// LimitsView is the caps with their use (web/ui/limits.go).
export interface LimitsView {
  caps: { key: string; label: string; setting: string; limit: number; use: number; who?: string }[] | null;
  busiest: { user: string; sandboxes: number; runs: number }[] | null;
  runsErr?: string;
}

// Limits are the caps on running sandboxes and chat runs, each with its
// setting and its use (for a cap per user, link, app or owner: the
// highest use and who has it), and the busiest users.
export function Limits({ limits, t }: { limits: LimitsView; t: Translate }) {
  const busiest = limits.busiest ?? [];
  return (
    <>
      <h2 id="limits">{t("capsTitle")}</h2>
      <p className="hint">{t("capsHint")}</p>
      <Table id="caps" heads={[t("capsCap"), t("capsSetting"), t("capsLimit"), t("capsInUse")]}>
        {(limits.caps ?? []).map((c) => (
          <tr key={c.key} data-cap={c.key} data-limit={c.limit} data-use={c.use}>
            <td>{t(c.label)}</td>
            <td>
              <code>{c.setting}</code>
            </td>
            <td data-role="limit">{c.limit ? c.limit : t("capsNone")}</td>
            <td data-role="use">{c.who ? `${t("capsMost")} ${c.use} (${c.who})` : c.use}</td>
          </tr>
        ))}
      </Table>
      {limits.runsErr && (
        <p className="error">
          {t("capsRunsUnknown")} {limits.runsErr}
        </p>
      )}
      {busiest.length > 0 && (
        <>
          <h3>{t("capsBusiest")}</h3>
          <Table id="cap-users" heads={[t("owner"), t("capsRunningSandboxes"), t("capsRunsInProgress")]}>
            {busiest.map((u) => (
              <tr key={u.user} data-user={u.user}>
                <td>{u.user}</td>
                <td data-role="sandboxes">{u.sandboxes}</td>
                <td data-role="runs">{u.runs}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </>
  );
}

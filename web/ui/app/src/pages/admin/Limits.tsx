import type { Translate } from "../../i18n";

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
      <div className="table-scroll">
        <table id="caps">
          <thead>
            <tr>
              <th>{t("capsCap")}</th>
              <th>{t("capsSetting")}</th>
              <th>{t("capsLimit")}</th>
              <th>{t("capsInUse")}</th>
            </tr>
          </thead>
          <tbody>
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
          </tbody>
        </table>
      </div>
      {limits.runsErr && (
        <p className="error">
          {t("capsRunsUnknown")} {limits.runsErr}
        </p>
      )}
      {busiest.length > 0 && (
        <>
          <h3>{t("capsBusiest")}</h3>
          <div className="table-scroll">
            <table id="cap-users">
              <thead>
                <tr>
                  <th>{t("owner")}</th>
                  <th>{t("capsRunningSandboxes")}</th>
                  <th>{t("capsRunsInProgress")}</th>
                </tr>
              </thead>
              <tbody>
                {busiest.map((u) => (
                  <tr key={u.user} data-user={u.user}>
                    <td>{u.user}</td>
                    <td data-role="sandboxes">{u.sandboxes}</td>
                    <td data-role="runs">{u.runs}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </>
  );
}

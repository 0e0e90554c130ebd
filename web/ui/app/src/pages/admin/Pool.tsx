import type { Translate } from "../../i18n";

// PoolView is the warm pool's figures (web/ui/pool.go).
export interface PoolView {
  on: boolean;
  err?: string;
  stats: { size: number; shape: string; ready: number; creating: number; claims: number; refills: number; refillErrors: number };
  misses: { reason: string; count: number }[] | null;
  average?: string;
  last?: string;
}

// Pool is the warm pool: its size and shape, the members ready and being
// made, the claims and the misses by reason, the refills and their time.
export function Pool({ pool, t }: { pool: PoolView; t: Translate }) {
  const s = pool.stats;
  const rows: [string, string, string | number][] = [
    ["poolSize", "size", s.size],
    ["poolShape", "shape", s.shape],
    ["poolReady", "ready", s.ready],
    ["poolCreating", "creating", s.creating],
    ["poolClaims", "claims", s.claims],
    ["poolMisses", "misses", (pool.misses ?? []).map((m) => `${t("poolMiss-" + m.reason)}: ${m.count}`).join(" · ")],
    ["poolRefills", "refills", s.refills],
    ["poolRefill", "refill-time", pool.average ? `${pool.average} / ${pool.last}` : "–"],
    ["poolErrors", "refill-errors", s.refillErrors],
  ];
  return (
    <>
      <h2 id="pool">{t("poolTitle")}</h2>
      <p className="hint">{t("poolHint")}</p>
      {pool.on ? (
        <table id="pool-stats" data-size={s.size} data-ready={s.ready} data-claims={s.claims}>
          <tbody>
            {rows.map(([label, role, value]) => (
              <tr key={role}>
                <th>{t(label)}</th>
                <td data-role={role}>{value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p data-role="pool-off">{t("poolOff")}</p>
      )}
      {pool.err && (
        <p className="error">
          {t("poolUnread")} {pool.err}
        </p>
      )}
    </>
  );
}

import { useCallback } from "react";
import { shown, usePolled } from "../../pages/usage";
import { sandboxStatus } from "./api";
import type { Where } from "./api";

// UsageLine is what the chat's sandbox uses while it runs (L4): CPU,
// memory, processes and disk, read again every few seconds while the
// panel is open. Nothing is shown while it does not run.
export function UsageLine({ where, t }: { where: Where; t: (key: string) => string }) {
  const read = useCallback(() => sandboxStatus(where), [where]);
  const st = usePolled(read);
  const m = st?.status === "running" ? st.metrics : undefined;
  if (!m) return null;
  const u = shown(m);
  return (
    <p className="usage-line hint" data-role="usage" aria-label={t("usage")}>
      <span>
        {t("usageCPU")} <b data-role="usage-cpu">{u.cpu}</b>
      </span>
      <span>
        {t("usageMemory")} <b data-role="usage-memory">{u.memory}</b>
      </span>
      <span>
        {t("usageProcesses")} <b data-role="usage-processes">{u.processes}</b>
      </span>
      <span>
        {t("usageDisk")} <b data-role="usage-disk">{u.disk}</b>
      </span>
    </p>
  );
}

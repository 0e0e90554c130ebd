import { useEffect, useRef } from "react";
import { humanSize } from "../../chat/files/api";
import type { Translate } from "../../i18n";
import type { SkillDetail } from "./skillTypes";
import { When } from "../When";
import { Table } from "../Table";

// SkillView shows one skill: where agents find it, its instructions and
// its versions, the current one marked. It takes the focus when it opens.
// Without a skill it is there, hidden.
export function SkillView({ detail, t, close }: { detail: SkillDetail | null; t: Translate; close: () => void }) {
  const box = useRef<HTMLElement>(null);
  const closer = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!detail) return;
    box.current?.scrollIntoView({ block: "nearest" });
    closer.current?.focus();
  }, [detail]);
  const s = detail?.skill;
  return (
    <section id="skill-detail" className="card" aria-labelledby="skill-detail-title" data-skill={s?.name} ref={box} hidden={!detail}>
      <div className="chat-head">
        <h3 id="skill-detail-title" data-role="title">
          {s?.name}
        </h3>
        <button type="button" className="secondary" data-role="close" ref={closer} onClick={close}>
          {t("close")}
        </button>
      </div>
      <p className="hint" data-role="summary">
        {s && s.description + " · " + t("skillLocation") + ": " + s.location}
      </p>
      <h4>{t("skillInstructions")}</h4>
      <pre data-role="instructions">{detail?.instructions}</pre>
      <h4>{t("skillVersions")}</h4>
      <Table data-role="versions" heads={[t("skillVersion"), t("skillInstalledAt"), t("skillInstalledBy"), t("skillSize")]}>
        {(detail?.versions ?? []).map((v) => (
          <tr key={v.number} data-version={String(v.number)} className={v.current ? "current" : ""}>
            <td>
              {String(v.number)}
              {v.current && <strong>{" · " + t("skillCurrent")}</strong>}
            </td>
            <td>
              <When iso={v.installedAt} t={t} />
            </td>
            <td>{v.installedBy || "-"}</td>
            <td>{humanSize(v.size)}</td>
          </tr>
        ))}
      </Table>
    </section>
  );
}

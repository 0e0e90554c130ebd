// The app's versions: publish the saved draft with a note, list the
// versions, roll back to one (FastGPT's rollback: the version becomes
// the draft, to publish again).
import { useEffect, useState } from "react";
import { listVersions, publish, rollback, type Version } from "./api";
import type { Translate } from "./i18n";

export function Versions(props: {
  appId: string;
  csrf: string;
  t: Translate;
  save: () => Promise<boolean>;
  onRolledBack: () => void;
  onClose: () => void;
}) {
  const { t } = props;
  const [list, setList] = useState<Version[] | null>(null);
  const [published, setPublished] = useState("");
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const [say, setSay] = useState<{ ok: boolean; text: string } | null>(null);
  const load = () =>
    listVersions(props.appId).then(
      (r) => {
        setList(r.list ?? []);
        setPublished(r.publishedVersionId);
      },
      (err: Error) => setSay({ ok: false, text: err.message }),
    );
  useEffect(() => {
    load();
  }, [props.appId]);
  const doPublish = async () => {
    setBusy(true);
    setSay(null);
    try {
      if (!(await props.save())) return;
      const v = await publish(props.appId, note.trim(), props.csrf);
      setNote("");
      setSay({ ok: true, text: t("canvasPublished").replace("{n}", String(v.number)) });
      await load();
    } catch (err) {
      setSay({ ok: false, text: (err as Error).message });
    } finally {
      setBusy(false);
    }
  };
  const doRollback = async (v: Version) => {
    if (!confirm(t("canvasRollbackConfirm").replace("{n}", String(v.number)))) return;
    setBusy(true);
    try {
      await rollback(props.appId, v.versionId, false, props.csrf);
      setSay({ ok: true, text: t("canvasRolledBack").replace("{n}", String(v.number)) });
      props.onRolledBack();
    } catch (err) {
      setSay({ ok: false, text: (err as Error).message });
    } finally {
      setBusy(false);
    }
  };
  return (
    <aside className="panel versions" aria-label={t("canvasVersions")}>
      <div className="debug-head">
        <h2>{t("canvasVersions")}</h2>
        <button type="button" onClick={props.onClose}>
          {t("close")}
        </button>
      </div>
      <p className="hint">{t("canvasVersionsHint")}</p>
      <label htmlFor="version-note">{t("canvasVersionNote")}</label>
      <input id="version-note" type="text" value={note} maxLength={500} onChange={(e) => setNote(e.target.value)} />
      <button type="button" className="primary publish-version" onClick={doPublish} disabled={busy}>
        {t("canvasPublish")}
      </button>
      {say && (
        <p className={say.ok ? "hint say-ok" : "field-problem"} role="status">
          {say.text}
        </p>
      )}
      {list && list.length === 0 && <p className="hint">{t("canvasNoVersions")}</p>}
      <ol className="version-list">
        {(list ?? []).map((v) => (
          <li key={v.versionId} data-version={v.number}>
            <strong>
              {t("canvasVersion")} {v.number}
            </strong>
            {v.versionId === published && <span className="badge">{t("canvasPublishedBadge")}</span>}
            <div className="hint">
              {new Date(v.createdAt).toLocaleString()} · {v.author}
            </div>
            {v.note && <div>{v.note}</div>}
            <button type="button" className="rollback" onClick={() => doRollback(v)} disabled={busy}>
              {t("canvasRollback")}
            </button>
          </li>
        ))}
      </ol>
    </aside>
  );
}

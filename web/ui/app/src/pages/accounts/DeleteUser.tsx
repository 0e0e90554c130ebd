import { useEffect, useRef, useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import { fill } from "../format";
import { deletePath, deletedLabel, type AppsChoice } from "./format";
import type { UserRow } from "./Users";

// DeleteUser asks what becomes of target's apps before deleting them:
// transferred to another user (the admin by default), or deleted with
// their chats and sandboxes. A refusal is shown in the dialog, which
// stays open.
export function DeleteUser(props: {
  t: Translate;
  target: UserRow | null;
  users: UserRow[];
  self: string;
  onClose: () => void;
  onDeleted: (text: string) => void;
}) {
  const { t, target, users, self, onClose, onDeleted } = props;
  const dialog = useRef<HTMLDialogElement>(null);
  const { said, fail, clear } = useStatus();
  const [apps, setApps] = useState<AppsChoice>("transfer");
  const [to, setTo] = useState(self);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (target) {
      setApps("transfer");
      setTo(self);
      clear();
      if (!d.open) d.showModal();
    } else if (d.open) d.close();
  }, [target, self, clear]);

  const others = users.filter((u) => u.id !== target?.id);
  const remove = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    if (!target) return;
    setBusy(true);
    try {
      const done = await request<{ apps: unknown[] }>("DELETE", deletePath(target.id, apps, to));
      const toName = others.find((u) => u.id === to)?.name ?? "";
      dialog.current?.close();
      onDeleted(fill(t(deletedLabel(done.apps.length, apps)), { name: target.name, n: done.apps.length, to: toName }));
    } catch (err) {
      fail(err);
    }
    setBusy(false);
  };

  return (
    <dialog id="delete-user" ref={dialog} onClose={onClose}>
      <form method="dialog" onSubmit={remove}>
        <h3 data-role="title">{target && fill(t("deleteUserTitle"), { name: target.name })}</h3>
        <p className="hint">{t("deleteUserHint")}</p>
        <label className="check">
          <input type="radio" name="apps" value="transfer" checked={apps === "transfer"} onChange={() => setApps("transfer")} /> {t("transferAppsTo")}
        </label>
        <select name="to" aria-label={t("transferAppsTo")} value={to} onChange={(e) => setTo(e.target.value)}>
          {others.map((u) => (
            <option key={u.id} value={u.id}>
              {u.name}
            </option>
          ))}
        </select>
        <label className="check">
          <input type="radio" name="apps" value="delete" checked={apps === "delete"} onChange={() => setApps("delete")} /> {t("deleteApps")}
        </label>
        <Status said={said} t={t} />
        <p>
          <button type="submit" className="danger" disabled={busy}>
            {t("delete")}
          </button>{" "}
          <button type="button" className="secondary" data-role="cancel" onClick={() => dialog.current?.close()}>
            {t("cancel")}
          </button>
        </p>
      </form>
    </dialog>
  );
}

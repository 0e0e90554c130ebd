import { useState } from "react";
import type { Translate } from "../../i18n";
import { ApiKeys } from "../ApiKeys";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import type { PageProps } from "../types";

type Fields = Record<string, HTMLInputElement>;

// Account is the caller's own page: their password and their API keys.
export function Account({ t, user }: PageProps) {
  return (
    <>
      <h2>
        {t("account")} · {user.name}
      </h2>
      <ChangePassword t={t} name={user.name ?? ""} />
      <ApiKeys api="/api/keys" id="key" words={{ title: "apiKeys", hint: "apiKeysHint", empty: "noKeys", revokeConfirm: "revokeKeyConfirm" }} t={t} />
    </>
  );
}

function ChangePassword({ t, name }: { t: Translate; name: string }) {
  const { said, say, fail } = useStatus();
  const [busy, setBusy] = useState(false);
  const change = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = form.elements as unknown as Fields;
    if (f.newPassword.value !== f.repeatPassword.value) {
      fail(new Error(t("passwordsDiffer")));
      return;
    }
    setBusy(true);
    try {
      await request("POST", "/api/me/password", { oldPassword: f.oldPassword.value, newPassword: f.newPassword.value });
      form.reset();
      say(t("passwordChanged"));
    } catch (err) {
      fail(err);
    }
    setBusy(false);
  };
  return (
    <form id="change-password" className="card" onSubmit={change}>
      <h3>{t("changePassword")}</h3>
      <input type="text" name="name" defaultValue={name} autoComplete="username" hidden />
      <div className="fields">
        <div>
          <label htmlFor="old-password">{t("oldPassword")}</label>
          <input type="password" id="old-password" name="oldPassword" autoComplete="current-password" required />
        </div>
        <div>
          <label htmlFor="new-password">{t("newPassword")}</label>
          <input type="password" id="new-password" name="newPassword" autoComplete="new-password" required />
        </div>
        <div>
          <label htmlFor="repeat-password">{t("repeatPassword")}</label>
          <input type="password" id="repeat-password" name="repeatPassword" autoComplete="new-password" required />
        </div>
        <div>
          <button type="submit" disabled={busy}>
            {t("changePassword")}
          </button>
        </div>
      </div>
      <p className="hint">{t("passwordHint")}</p>
      <Status said={said} t={t} />
    </form>
  );
}

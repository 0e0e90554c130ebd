import { useCallback, useEffect, useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import type { PageProps } from "../types";
import { endOfDay, fill, today } from "./format";
import { SecretBox, When } from "./parts";

// Key is an API key as GET /api/keys lists it: never its secret.
interface Key {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  expiresAt?: string;
  ratePerMinute?: number;
}

type Fields = Record<string, HTMLInputElement>;

// Account is the caller's own page: their password and their API keys.
export function Account({ t, user }: PageProps) {
  return (
    <>
      <h2>
        {t("account")} · {user.name}
      </h2>
      <ChangePassword t={t} name={user.name ?? ""} />
      <Keys t={t} />
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

function Keys({ t }: { t: Translate }) {
  const { said, say, fail, clear } = useStatus();
  const [keys, setKeys] = useState<Key[] | null>(null);
  // the new key, shown once from the answer that made it
  const [made, setMade] = useState<{ name: string; key: string } | null>(null);
  const load = useCallback(async () => {
    try {
      setKeys((await request<{ keys: Key[] }>("GET", "/api/keys")).keys);
    } catch (err) {
      fail(err);
    }
  }, [fail]);
  useEffect(() => {
    load();
  }, [load]);

  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = form.elements as unknown as Fields;
    const body: { name: string; expiresAt?: string; ratePerMinute?: number } = { name: f.name.value.trim() };
    if (f.expiry.value) body.expiresAt = endOfDay(f.expiry.value);
    if (f.rate.value) body.ratePerMinute = parseInt(f.rate.value, 10);
    try {
      const k = await request<{ name: string; key: string }>("POST", "/api/keys", body);
      setMade({ name: k.name, key: k.key });
      form.reset();
      clear();
    } catch (err) {
      fail(err);
      return;
    }
    await load();
  };

  const revoke = async (k: Key) => {
    if (!confirm(fill(t("revokeKeyConfirm"), { name: k.name }))) return;
    try {
      await request("DELETE", "/api/keys/" + encodeURIComponent(k.id));
      say(fill(t("keyRevoked"), { name: k.name }));
    } catch (err) {
      fail(err);
    }
    await load();
  };

  return (
    <section id="keys" className="card">
      <h3>{t("apiKeys")}</h3>
      <p className="hint">{t("apiKeysHint")}</p>
      <form id="new-key" onSubmit={create}>
        <div className="fields">
          <div>
            <label htmlFor="new-key-name">{t("newKey")}</label>
            <input type="text" id="new-key-name" name="name" maxLength={100} autoComplete="off" required />
          </div>
          <div>
            <label htmlFor="new-key-expiry">{t("keyExpiry")}</label>
            <input type="date" id="new-key-expiry" name="expiry" min={today()} />
          </div>
          <div>
            <label htmlFor="new-key-rate">{t("keyRate")}</label>
            <input type="number" id="new-key-rate" name="rate" min={1} max={10000} step={1} />
          </div>
          <div>
            <button type="submit">{t("create")}</button>
          </div>
        </div>
      </form>
      <Status said={said} t={t} />
      <SecretBox id="new-key-secret" value={made?.key ?? ""} label={t("apiKey")} onHide={() => setMade(null)} t={t}>
        <p>
          <strong data-role="key-name">{made?.name}</strong>: {t("keyShownOnce")}
        </p>
      </SecretBox>
      <div className="table-scroll">
        <table id="key-list">
          <thead>
            <tr>
              <th>{t("name")}</th>
              <th>{t("prefix")}</th>
              <th>{t("created")}</th>
              <th>{t("lastUsed")}</th>
              <th>{t("expires")}</th>
              <th>{t("rate")}</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {(keys ?? []).map((k) => (
              <tr key={k.id} data-key={k.id} data-name={k.name}>
                <td data-role="name">{k.name}</td>
                <td data-role="prefix">
                  <code>{k.prefix + "…"}</code>
                </td>
                <td data-role="created">
                  <When iso={k.createdAt} t={t} />
                </td>
                <td data-role="last-used">
                  <When iso={k.lastUsedAt} t={t} />
                </td>
                <td data-role="expires">
                  <Expiry iso={k.expiresAt} t={t} />
                </td>
                <td data-role="rate">{k.ratePerMinute ? fill(t("perMinute"), { n: k.ratePerMinute }) : t("noLimit")}</td>
                <td>
                  <button className="secondary" data-key-action="revoke" onClick={() => revoke(k)}>
                    {t("revoke")}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="hint" data-role="empty" hidden={!keys || keys.length > 0}>
        {t("noKeys")}
      </p>
    </section>
  );
}

// Expiry is a key's expiry: never, the time, or the time marked expired.
function Expiry({ iso, t }: { iso?: string; t: Translate }) {
  if (!iso || new Date(iso) > new Date()) return <When iso={iso} t={t} />;
  return (
    <span className="expired-key">
      <When iso={iso} t={t} /> · <strong data-role="expired">{t("expired")}</strong>
    </span>
  );
}

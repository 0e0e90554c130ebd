import { useCallback, useEffect, useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import { dayAfter, expiryOf, named, perMinute, positive } from "./format";
import { When } from "./When";

interface AppKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  expiresAt?: string;
  ratePerMinute?: number;
}

// AppKeys are the app's API keys. As on the account page, a new key's
// secret is shown once, from the answer that made it, and kept nowhere.
export function AppKeys({ base, t }: { base: string; t: Translate }) {
  const [keys, setKeys] = useState<AppKey[] | null>(null);
  const [secret, setSecret] = useState<{ name: string; key: string } | null>(null);
  const { said, say, fail, clear } = useStatus();
  const load = useCallback(async () => {
    try {
      const body = await request<{ keys?: AppKey[] }>("GET", base + "/keys");
      setKeys(body.keys ?? []);
    } catch (err) {
      fail(err);
    }
  }, [base, fail]);
  useEffect(() => {
    load();
  }, [load]);

  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value;
    const body = { name: f("name").trim(), expiresAt: expiryOf(f("expires")), ratePerMinute: positive(f("ratePerMinute")) };
    try {
      const k = await request<{ name: string; key: string }>("POST", base + "/keys", body);
      setSecret({ name: k.name, key: k.key });
      form.reset();
      clear();
    } catch (err) {
      fail(err);
      return;
    }
    await load();
  };
  const revoke = async (k: AppKey) => {
    if (!confirm(named(t, "publishRevokeKeyConfirm", k.name))) return;
    try {
      await request("DELETE", base + "/keys/" + encodeURIComponent(k.id));
      say(named(t, "publishKeyRevoked", k.name));
    } catch (err) {
      fail(err);
    }
    await load();
  };

  const now = new Date();
  return (
    <section id="app-keys" className="card">
      <h3>{t("publishKeys")}</h3>
      <p className="hint">{t("publishKeysHint")}</p>
      <form id="new-app-key" onSubmit={create}>
        <div className="fields">
          <div>
            <label htmlFor="new-app-key-name">{t("newKey")}</label>
            <input type="text" id="new-app-key-name" name="name" maxLength={100} autoComplete="off" required />
          </div>
          <div>
            <label htmlFor="new-app-key-expires">{t("publishExpiresOn")}</label>
            <input type="date" id="new-app-key-expires" name="expires" min={dayAfter(now)} />
          </div>
          <div>
            <label htmlFor="new-app-key-rate">{t("publishKeyRate")}</label>
            <input type="number" id="new-app-key-rate" name="ratePerMinute" min={1} step={1} placeholder={t("publishNoLimit")} />
          </div>
          <div>
            <button type="submit">{t("create")}</button>
          </div>
        </div>
      </form>
      <Status said={said} t={t} />
      <div id="app-key-secret" className="secret" hidden={!secret}>
        <p>
          <strong data-role="key-name">{secret?.name}</strong>: {t("keyShownOnce")}
        </p>
        <div className="secret-row">
          <input type="text" readOnly spellCheck={false} aria-label={t("publishKeySecret")} value={secret?.key ?? ""} />{" "}
          <button type="button" data-role="copy" onClick={(e) => copyFrom(e.currentTarget)}>
            {t("copy")}
          </button>{" "}
          <button type="button" className="secondary" data-role="hide" onClick={() => setSecret(null)}>
            {t("hide")}
          </button>
        </div>
        <p className="hint" data-role="usage">
          {t("publishKeyUsage")}
        </p>
      </div>
      <div className="table-scroll">
        <table id="app-key-list">
          <thead>
            <tr>
              <th>{t("name")}</th>
              <th>{t("prefix")}</th>
              <th>{t("created")}</th>
              <th>{t("lastUsed")}</th>
              <th>{t("publishExpires")}</th>
              <th>{t("publishRate")}</th>
              <th>
                <span className="visually-hidden">{t("revoke")}</span>
              </th>
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
                  <Expiry iso={k.expiresAt} expired={!!k.expiresAt && new Date(k.expiresAt) <= now} t={t} />
                </td>
                <td data-role="rate">{perMinute(t, k.ratePerMinute)}</td>
                <td>
                  <button type="button" className="secondary" data-key-action="revoke" aria-label={t("revoke") + " " + k.name} onClick={() => revoke(k)}>
                    {t("revoke")}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="hint" data-role="empty" hidden={keys === null || keys.length > 0}>
        {t("publishNoKeys")}
      </p>
    </section>
  );
}

// Expiry is when a key or link stops working: never, already, or when.
export function Expiry({ iso, expired, t }: { iso?: string; expired?: boolean; t: Translate }) {
  if (!iso) return <>{t("publishNoExpiry")}</>;
  if (expired)
    return (
      <span className="error" title={iso}>
        {t("publishExpired")}
      </span>
    );
  return <When iso={iso} t={t} />;
}

// copyFrom selects the text field beside the button clicked and puts its
// value on the clipboard. The clipboard API needs a secure context;
// elsewhere the text stays selected for the user to copy.
export async function copyFrom(button: HTMLElement) {
  const input = button.parentElement?.querySelector("input");
  if (!input) return;
  input.select();
  if (navigator.clipboard) await navigator.clipboard.writeText(input.value).catch(() => undefined);
}

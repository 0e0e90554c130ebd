import { useState, type ReactNode } from "react";
import type { Translate } from "../i18n";
import { SecretBox } from "./Copy";
import { endOfDay, named, positive, rate, today } from "./format";
import { request, useLoaded } from "./http";
import { Status, useStatus } from "./Status";
import { Expiry, When } from "./When";
import { Table } from "./Table";

// ApiKey is an API key as the engine lists it: never its secret.
interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  expiresAt?: string;
  ratePerMinute?: number;
}

// KeyWords are the labels that differ between a user's own keys and an
// app's: the section's title and hint, the empty list, the revocation's
// question.
export interface KeyWords {
  title: string;
  hint: string;
  empty: string;
  revokeConfirm: string;
}

// ApiKeys is a list of API keys with a form for a new one: a user's own
// on the account page (api /api/keys, ids "key…") and an app's on its
// Publish page (api <app>/keys, ids "app-key…"). A new key's secret is
// shown once, from the answer that made it, and kept nowhere; usage says
// how to use it.
export function ApiKeys(props: { api: string; id: "key" | "app-key"; words: KeyWords; usage?: ReactNode; t: Translate }) {
  const { api, id, words, usage, t } = props;
  const { said, say, fail, clear } = useStatus();
  const [listed, load] = useLoaded<{ keys?: ApiKey[] | null }>(api, fail);
  const keys = listed && (listed.keys ?? []);
  const [made, setMade] = useState<{ name: string; key: string } | null>(null);

  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value;
    const body = { name: f("name").trim(), expiresAt: endOfDay(f("expires")), ratePerMinute: positive(f("ratePerMinute")) };
    try {
      const k = await request<{ name: string; key: string }>("POST", api, body);
      setMade({ name: k.name, key: k.key });
      form.reset();
      clear();
    } catch (err) {
      fail(err);
      return;
    }
    await load();
  };

  const revoke = async (k: ApiKey) => {
    if (!confirm(named(t, words.revokeConfirm, k.name))) return;
    try {
      await request("DELETE", api + "/" + encodeURIComponent(k.id));
      say(named(t, "keyRevoked", k.name));
    } catch (err) {
      fail(err);
    }
    await load();
  };

  return (
    <section id={id + "s"} className="card">
      <h3>{t(words.title)}</h3>
      <p className="hint">{t(words.hint)}</p>
      <form id={"new-" + id} onSubmit={create}>
        <div className="fields">
          <div>
            <label htmlFor={`new-${id}-name`}>{t("newKey")}</label>
            <input type="text" id={`new-${id}-name`} name="name" maxLength={100} autoComplete="off" required />
          </div>
          <div>
            <label htmlFor={`new-${id}-expires`}>{t("keyExpiry")}</label>
            <input type="date" id={`new-${id}-expires`} name="expires" min={today()} />
          </div>
          <div>
            <label htmlFor={`new-${id}-rate`}>{t("keyRate")}</label>
            <input type="number" id={`new-${id}-rate`} name="ratePerMinute" min={1} max={10000} step={1} placeholder={t("noLimit")} />
          </div>
          <div>
            <button type="submit">{t("create")}</button>
          </div>
        </div>
      </form>
      <Status said={said} t={t} />
      <SecretBox id={id + "-secret"} value={made?.key ?? ""} label={t("newApiKey")} onHide={() => setMade(null)} t={t} after={usage}>
        <p>
          <strong data-role="key-name">{made?.name}</strong>: {t("keyShownOnce")}
        </p>
      </SecretBox>
      <Table id={id + "-list"} heads={[t("name"), t("prefix"), t("created"), t("lastUsed"), t("expires"), t("rate")]} actions={t("revoke")}>
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
            <td data-role="rate">{rate(t, k.ratePerMinute)}</td>
            <td>
              <button type="button" className="secondary" data-key-action="revoke" aria-label={t("revoke") + " " + k.name} onClick={() => revoke(k)}>
                {t("revoke")}
              </button>
            </td>
          </tr>
        ))}
      </Table>
      <p className="hint" data-role="empty" hidden={keys === null || keys.length > 0}>
        {t(words.empty)}
      </p>
    </section>
  );
}

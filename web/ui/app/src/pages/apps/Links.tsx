import { useCallback, useEffect, useState } from "react";
import type { Translate } from "../../i18n";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import { copyFrom, Expiry } from "./AppKeys";
import { dayAfter, expiryOf, named, perMinute, positive } from "./format";

interface Link {
  id: string;
  name: string;
  url: string;
  expiresAt?: string;
  expired?: boolean;
  runs: number;
  maxRuns?: number;
  ratePerMinute?: number;
  showTools: boolean;
  files: string;
  hookUrl?: string;
}

// Links are the app's share links: anyone with one chats with the app,
// within the link's limits.
export function Links({ base, t }: { base: string; t: Translate }) {
  const [links, setLinks] = useState<Link[] | null>(null);
  const { said, say, fail } = useStatus();
  const load = useCallback(async () => {
    try {
      const body = await request<{ links?: Link[] }>("GET", base + "/links");
      setLinks(body.links ?? []);
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
    const f = (name: string) => form.elements.namedItem(name) as HTMLInputElement;
    const body = {
      name: f("name").value.trim(),
      expiresAt: expiryOf(f("expires").value),
      ratePerMinute: positive(f("ratePerMinute").value),
      maxRuns: positive(f("maxRuns").value),
      showTools: f("showTools").checked,
      files: f("files").value,
      hookUrl: f("hookUrl").value.trim() || undefined,
    };
    try {
      const l = await request<{ name: string }>("POST", base + "/links", body);
      form.reset();
      say(named(t, "publishLinkCreated", l.name));
    } catch (err) {
      fail(err);
      return;
    }
    await load();
  };
  const revoke = async (l: Link) => {
    if (!confirm(named(t, "publishRevokeLinkConfirm", l.name))) return;
    try {
      await request("DELETE", base + "/links/" + encodeURIComponent(l.id));
      say(named(t, "publishLinkRevoked", l.name));
    } catch (err) {
      fail(err);
    }
    await load();
  };
  const files = (v: string) => {
    const word = t("publishFiles" + v);
    return word.startsWith("publishFiles") ? v : word;
  };

  return (
    <section id="links" className="card">
      <h3>{t("publishLinks")}</h3>
      <p className="hint">{t("publishLinksHint")}</p>
      <form id="new-link" onSubmit={create}>
        <div className="fields">
          <div>
            <label htmlFor="new-link-name">{t("publishNewLink")}</label>
            <input type="text" id="new-link-name" name="name" maxLength={100} autoComplete="off" required />
          </div>
          <div>
            <label htmlFor="new-link-expires">{t("publishExpiresOn")}</label>
            <input type="date" id="new-link-expires" name="expires" min={dayAfter(new Date())} />
          </div>
          <div>
            <label htmlFor="new-link-rate">{t("publishVisitorRate")}</label>
            <input type="number" id="new-link-rate" name="ratePerMinute" min={1} step={1} placeholder={t("publishNoLimit")} />
          </div>
          <div>
            <label htmlFor="new-link-max-runs">{t("publishMaxRuns")}</label>
            <input type="number" id="new-link-max-runs" name="maxRuns" min={1} step={1} placeholder={t("publishNoLimit")} />
          </div>
        </div>
        <div className="fields">
          <div>
            <label htmlFor="new-link-files">{t("publishFilesPanel")}</label>
            <select id="new-link-files" name="files" defaultValue="hidden">
              <option value="hidden">{t("publishFileshidden")}</option>
              <option value="read">{t("publishFilesread")}</option>
              <option value="write">{t("publishFileswrite")}</option>
            </select>
          </div>
          <div>
            <label htmlFor="new-link-hook">{t("publishHookUrl")}</label>
            <input type="url" id="new-link-hook" name="hookUrl" placeholder="https://" autoComplete="off" aria-describedby="new-link-hook-hint" />
          </div>
          <div>
            <button type="submit">{t("create")}</button>
          </div>
        </div>
        <label className="switch" htmlFor="new-link-tools">
          <input type="checkbox" id="new-link-tools" name="showTools" defaultChecked /> {t("publishShowTools")}
        </label>
        <p className="hint" id="new-link-hook-hint">
          {t("publishHookHint")}
        </p>
      </form>
      <Status said={said} t={t} />
      <div className="table-scroll">
        <table id="link-list">
          <thead>
            <tr>
              <th>{t("name")}</th>
              <th>{t("publishLinkUrl")}</th>
              <th>{t("publishExpires")}</th>
              <th>{t("publishRuns")}</th>
              <th>{t("publishRate")}</th>
              <th>{t("publishTools")}</th>
              <th>{t("files")}</th>
              <th>{t("publishHook")}</th>
              <th>
                <span className="visually-hidden">{t("revoke")}</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {(links ?? []).map((l) => (
              <tr key={l.id} data-link={l.id} data-name={l.name} className={l.expired ? "expired" : undefined}>
                <td data-role="name">{l.name}</td>
                <td data-role="url">
                  <div className="link-url">
                    <input type="text" readOnly spellCheck={false} value={location.origin + l.url} aria-label={t("publishCopyLink") + " " + l.name} />
                    <button type="button" className="secondary" data-role="copy" onClick={(e) => copyFrom(e.currentTarget)}>
                      {t("copy")}
                    </button>
                  </div>
                </td>
                <td data-role="expires">
                  <Expiry iso={l.expiresAt} expired={l.expired} t={t} />
                </td>
                <td data-role="runs">{l.runs + " / " + (l.maxRuns && l.maxRuns > 0 ? l.maxRuns : t("publishNoLimit"))}</td>
                <td data-role="rate">{perMinute(t, l.ratePerMinute)}</td>
                <td data-role="tools">{t(l.showTools ? "publishToolsShown" : "publishToolsHidden")}</td>
                <td data-role="files">{files(l.files)}</td>
                <td data-role="hook">{l.hookUrl || t("publishNoHook")}</td>
                <td>
                  <button type="button" className="secondary" data-link-action="revoke" aria-label={t("revoke") + " " + l.name} onClick={() => revoke(l)}>
                    {t("revoke")}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="hint" data-role="empty" hidden={links === null || links.length > 0}>
        {t("publishNoLinks")}
      </p>
    </section>
  );
}

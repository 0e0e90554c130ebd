import type { Translate } from "../../i18n";
import { request, useLoaded } from "../http";
import { Status, useStatus } from "../Status";
import { CopyField } from "../Copy";
import { endOfDay, named, positive, rate, today } from "../format";
import { Expiry } from "../When";
import { Table } from "../Table";

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
  terminal?: boolean;
  hookUrl?: string;
}

// Links are the app's share links: anyone with one chats with the app,
// within the link's limits.
export function Links({ base, t }: { base: string; t: Translate }) {
  const { said, say, fail } = useStatus();
  const [listed, load] = useLoaded<{ links?: Link[] | null }>(base + "/links", fail);
  const links = listed && (listed.links ?? []);

  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = (name: string) => form.elements.namedItem(name) as HTMLInputElement;
    const body = {
      name: f("name").value.trim(),
      expiresAt: endOfDay(f("expires").value),
      ratePerMinute: positive(f("ratePerMinute").value),
      maxRuns: positive(f("maxRuns").value),
      showTools: f("showTools").checked,
      files: f("files").value,
      terminal: f("terminal").checked,
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
            <label htmlFor="new-link-expires">{t("keyExpiry")}</label>
            <input type="date" id="new-link-expires" name="expires" min={today()} />
          </div>
          <div>
            <label htmlFor="new-link-rate">{t("publishVisitorRate")}</label>
            <input type="number" id="new-link-rate" name="ratePerMinute" min={1} max={10000} step={1} placeholder={t("noLimit")} />
          </div>
          <div>
            <label htmlFor="new-link-max-runs">{t("publishMaxRuns")}</label>
            <input type="number" id="new-link-max-runs" name="maxRuns" min={1} step={1} placeholder={t("noLimit")} />
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
        <label className="switch" htmlFor="new-link-terminal">
          <input type="checkbox" id="new-link-terminal" name="terminal" aria-describedby="new-link-terminal-hint" /> {t("publishTerminal")}
        </label>
        <p className="hint" id="new-link-terminal-hint">
          {t("publishTerminalHint")}
        </p>
        <p className="hint" id="new-link-hook-hint">
          {t("publishHookHint")}
        </p>
      </form>
      <Status said={said} t={t} />
      <Table id="link-list" heads={[t("name"), t("publishLinkUrl"), t("expires"), t("publishRuns"), t("rate"), t("publishTools"), t("files"), t("publishHook")]} actions={t("revoke")}>
        {(links ?? []).map((l) => (
          <tr key={l.id} data-link={l.id} data-name={l.name} className={l.expired ? "expired" : undefined}>
            <td data-role="name">{l.name}</td>
            <td data-role="url">
              <CopyField className="link-url" value={location.origin + l.url} label={t("publishCopyLink") + " " + l.name} t={t} />
            </td>
            <td data-role="expires">
              <Expiry iso={l.expiresAt} expired={l.expired} t={t} />
            </td>
            <td data-role="runs">{l.runs + " / " + (l.maxRuns && l.maxRuns > 0 ? l.maxRuns : t("noLimit"))}</td>
            <td data-role="rate">{rate(t, l.ratePerMinute)}</td>
            <td data-role="tools">{t(l.showTools ? "publishToolsShown" : "publishToolsHidden")}</td>
            <td data-role="files">{files(l.files) + (l.terminal ? ", " + t("terminal") : "")}</td>
            <td data-role="hook">{l.hookUrl || t("publishNoHook")}</td>
            <td>
              <button type="button" className="secondary" data-link-action="revoke" aria-label={t("revoke") + " " + l.name} onClick={() => revoke(l)}>
                {t("revoke")}
              </button>
            </td>
          </tr>
        ))}
      </Table>
      <p className="hint" data-role="empty" hidden={links === null || links.length > 0}>
        {t("publishNoLinks")}
      </p>
    </section>
  );
}

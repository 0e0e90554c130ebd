import { useState } from "react";
import { humanSize } from "../../chat/files/api";
import { request, useLoaded } from "../http";
import type { PageProps } from "../types";
import { named } from "../format";
import { Status, useStatus } from "../Status";
import { SkillView } from "./SkillView";
import type { Skill, SkillDetail, SkillList } from "./skillTypes";
import { When } from "../When";
import { Table } from "../Table";

// Skills is the admins' skills page: installing a ZIP, the example
// skills, the installed skills (view, delete) and the folders that are
// not valid skills, and why.
export function Skills({ t }: PageProps) {

  const [detail, setDetail] = useState<SkillDetail | null>(null);
  const page = useStatus();
  const form = useStatus();
  const { fail } = page;

  const [list, load] = useLoaded<SkillList>("/admin/api/skills", fail);

  const installed = (s: Skill) => named(t, "skillInstalled", s.name).replace("{version}", String(s.version));

  const install = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const f = e.currentTarget;
    const file = (f.elements.namedItem("file") as HTMLInputElement).files?.[0];
    if (!file) {
      form.say(t("skillChooseZip"), false);
      return;
    }
    const body = new FormData();
    body.append("file", file);
    form.note(t("skillInstalling").replace("{name}", file.name));
    try {
      const { skill } = await request<{ skill: Skill }>("POST", "/admin/api/skills", body);
      f.reset();
      form.say(installed(skill));
    } catch (err) {
      form.fail(err);
      return;
    }
    await load();
  };

  const installExample = async (name: string) => {
    page.note(t("skillInstalling").replace("{name}", name));
    try {
      const { skill } = await request<{ skill: Skill }>("POST", "/admin/api/skills/examples/" + encodeURIComponent(name));
      page.say(installed(skill));
    } catch (err) {
      page.fail(err);
      return;
    }
    await load();
  };

  const view = async (name: string) => {
    try {
      setDetail(await request<SkillDetail>("GET", "/admin/api/skills/" + encodeURIComponent(name)));
    } catch (err) {
      page.fail(err);
    }
  };

  const remove = async (name: string) => {
    if (!confirm(named(t, "skillDeleteConfirm", name))) return;
    try {
      await request("DELETE", "/admin/api/skills/" + encodeURIComponent(name));
      page.say(named(t, "skillDeleted", name));
      setDetail((d) => (d?.skill.name === name ? null : d));
    } catch (err) {
      page.fail(err);
    }
    await load();
  };

  const skills = list?.skills ?? [];
  const examples = list?.examples ?? [];
  const invalid = list?.invalid ?? [];
  return (
    <>
      <h2>{t("skills")}</h2>
      <p className="hint">{t("skillsHint")}</p>
      <form id="install-skill" className="card" onSubmit={install}>
        <h3>{t("skillInstall")}</h3>
        <div className="fields">
          <div>
            <label htmlFor="skill-zip">{t("skillZip")}</label>
            <input type="file" id="skill-zip" name="file" accept=".zip,application/zip" aria-describedby="skill-zip-hint" required />
          </div>
          <div>
            <button type="submit">{t("skillInstallButton")}</button>
          </div>
        </div>
        <p className="hint" id="skill-zip-hint">
          {t("skillZipHint")}
        </p>
        <Status said={form.said} t={t} />
      </form>
      <section id="example-skills" className="card" hidden={!examples.length}>
        <h3>{t("skillExamples")}</h3>
        <p className="hint">{t("skillExamplesHint")}</p>
        <ul className="examples" data-role="list">
          {examples.map((x) => (
            <li key={x.name} data-example={x.name}>
              <div>
                <code>{x.name}</code>
                {x.installed && (
                  <span className="badge" data-role="installed">
                    {t("skillExampleInstalled")}
                  </span>
                )}
              </div>
              <p className="hint">{x.description}</p>
              <button type="button" className={x.installed ? "secondary" : ""} data-role="install" onClick={() => installExample(x.name)}>
                {x.installed ? t("skillExampleReinstall") : t("skillExampleInstall")}
              </button>
            </li>
          ))}
        </ul>
      </section>
      <Status said={page.said} t={t} id="skills-status" marked={false} />
      <Table id="skills" heads={[t("name"), t("skillDescription"), t("skillVersion"), t("skillFiles"), t("skillSize"), t("skillInstalledAt"), t("skillInstalledBy")]} actions={t("skillView") + " / " + t("delete")}>
        {skills.map((s) => (
          <tr key={s.name} data-skill={s.name}>
            <td data-role="name">
              <code>{s.name}</code>
            </td>
            <td data-role="description">{s.description}</td>
            <td data-role="version">{String(s.version)}</td>
            <td data-role="files">{String((s.files ?? []).length)}</td>
            <td data-role="size">{humanSize(s.size)}</td>
            <td data-role="installed-at">
              <When iso={s.installedAt} t={t} />
            </td>
            <td data-role="installed-by">{s.installedBy || "-"}</td>
            <td className="actions">
              <button type="button" className="secondary" data-skill-action="view" aria-label={t("skillView") + " " + s.name} onClick={() => view(s.name)}>
                {t("skillView")}
              </button>{" "}
              <button type="button" className="secondary" data-skill-action="delete" aria-label={t("delete") + " " + s.name} onClick={() => remove(s.name)}>
                {t("delete")}
              </button>
            </td>
          </tr>
        ))}
      </Table>
      <p className="hint" id="skills-empty" hidden={!list || skills.length > 0}>
        {t("skillNone")}
      </p>
      <SkillView detail={detail} t={t} close={() => setDetail(null)} />
      <section id="invalid-skills" className="card">
        <h3>{t("skillInvalid")}</h3>
        <p className="hint">{t("skillInvalidHint")}</p>
        <Table heads={[t("skillDir"), t("skillReason")]}>
          {invalid.map((v) => (
            <tr key={v.dir} data-dir={v.dir}>
              <td data-role="dir">
                <code>{v.dir}</code>
              </td>
              <td data-role="reason">{v.reason}</td>
            </tr>
          ))}
        </Table>
        <p className="hint" data-role="empty" hidden={!list || invalid.length > 0}>
          {t("skillNoInvalid")}
        </p>
      </section>
    </>
  );
}

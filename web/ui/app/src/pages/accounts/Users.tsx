import { useRef, useState } from "react";
import type { Translate } from "../../i18n";
import { request, useLoaded } from "../http";
import { Status, useStatus } from "../Status";
import type { PageProps } from "../types";
import { DeleteUser } from "./DeleteUser";
import { SecretBox } from "../Copy";
import { fill } from "../format";
import { When } from "../When";
import { Table } from "../Table";

// UserRow is a user as GET /admin/api/users lists them.
export interface UserRow {
  id: string;
  name: string;
  role: string;
  disabled?: boolean;
  createdAt: string;
}

// Link is a set-password link as the API answers it, once: relative.
interface Link {
  setPasswordUrl: string;
  expiresAt: string;
}

// Users is the admins' user list: new users (with a password or an
// invite link), enabling, disabling, resets and deletion; the list is
// read again from the API after every change.
export function Users({ t, user }: PageProps) {
  const list = useStatus();
  // the set-password link just made, shown once as an address to send
  const [link, setLink] = useState<{ note: string; url: string } | null>(null);
  const [deleting, setDeleting] = useState<UserRow | null>(null);
  const self = user.id ?? "";
  const { fail: listFail } = list;

  const [listed, load] = useLoaded<{ users: UserRow[] | null }>("/admin/api/users", listFail);
  const users = listed?.users ?? [];

  const showLink = (key: string, name: string, made: Link) => {
    const expires = new Date(made.expiresAt).toLocaleString();
    setLink({ note: fill(t(key), { name, expires }), url: location.origin + made.setPasswordUrl });
  };

  const setDisabled = async (u: UserRow, disabled: boolean) => {
    try {
      await request("POST", "/admin/api/users/" + encodeURIComponent(u.id) + (disabled ? "/disable" : "/enable"));
      list.say(fill(t(disabled ? "userDisabled" : "userEnabled"), { name: u.name }));
    } catch (err) {
      list.fail(err);
    }
    await load();
  };

  const resetPassword = async (u: UserRow) => {
    const password = prompt(fill(t("resetPasswordPrompt"), { name: u.name }));
    if (!password) return;
    try {
      await request("POST", "/admin/api/users/" + encodeURIComponent(u.id) + "/password", { password });
      list.say(fill(t("passwordReset"), { name: u.name }));
    } catch (err) {
      list.fail(err);
    }
  };

  const resetByLink = async (u: UserRow) => {
    try {
      const made = await request<Link>("POST", "/admin/api/users/" + encodeURIComponent(u.id) + "/password", { invite: true });
      list.clear();
      showLink("resetLink", u.name, made);
    } catch (err) {
      list.fail(err);
    }
  };

  return (
    <>
      <h2>{t("users")}</h2>
      <p>
        <a href="/admin">{t("sandboxes")}</a> · <a href="/admin/audit">{t("audit")}</a> · <a href="/admin/skills">{t("skills")}</a> ·{" "}
        <a href="/admin/mcp">{t("mcpServers")}</a> · <a href="/admin/queues/">{t("queues")}</a>
      </p>
      <NewUser t={t} onMade={load} showLink={showLink} />
      <SecretBox id="user-link" value={link?.url ?? ""} label={t("setPasswordLink")} onHide={() => setLink(null)} t={t}>
        <p data-role="note">{link?.note}</p>
      </SecretBox>
      <Status said={list.said} t={t} id="users-status" />
      <Table id="users" data-self={self} heads={[t("name"), t("role"), t("state"), t("created")]} actions={t("actions")}>
        {users.map((u) => {
          const state = u.disabled ? "disabled" : "active";
          const action = u.disabled ? "enable" : "disable";
          return (
            <tr key={u.id} data-user={u.name} data-id={u.id} data-state={state}>
              <td data-role="name">{u.name}</td>
              <td data-role="role">{t(u.role === "admin" ? "roleAdmin" : "roleUser")}</td>
              <td data-role="state">
                <span className={"state " + state}>{t(state)}</span>
              </td>
              <td data-role="created">
                <When iso={u.createdAt} t={t} />
              </td>
              <td>
                {u.id !== self && (
                  <>
                    <button className="secondary" data-user-action={action} onClick={() => setDisabled(u, !u.disabled)}>
                      {t(action)}
                    </button>{" "}
                  </>
                )}
                <button className="secondary" data-user-action="password" onClick={() => resetPassword(u)}>
                  {t("resetPassword")}
                </button>{" "}
                <button className="secondary" data-user-action="link" onClick={() => resetByLink(u)}>
                  {t("resetByLink")}
                </button>
                {u.id !== self && (
                  <>
                    {" "}
                    <button className="secondary" data-user-action="delete" onClick={() => setDeleting(u)}>
                      {t("delete")}
                    </button>
                  </>
                )}
              </td>
            </tr>
          );
        })}
      </Table>
      <DeleteUser
        t={t}
        target={deleting}
        users={users}
        self={self}
        onClose={() => setDeleting(null)}
        onDeleted={(text) => {
          list.say(text);
          load();
        }}
      />
    </>
  );
}

// NewUser makes a user with a password, or with a set-password link to
// send them instead (then the password field is off).
function NewUser(props: { t: Translate; onMade: () => Promise<void>; showLink: (key: string, name: string, made: Link) => void }) {
  const { t, onMade, showLink } = props;
  const { said, say, fail } = useStatus();
  const [invite, setInvite] = useState(false);
  const password = useRef<HTMLInputElement>(null);
  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const form = e.currentTarget;
    const f = form.elements as unknown as Record<string, HTMLInputElement>;
    const body: { name: string; role: string; invite?: boolean; password?: string } = { name: f.name.value.trim(), role: f.role.value };
    if (invite) body.invite = true;
    else body.password = f.password.value;
    try {
      const made = await request<UserRow & Link & { user: UserRow }>("POST", "/admin/api/users", body);
      const u = invite ? made.user : made;
      form.reset();
      setInvite(false);
      say(fill(t("userCreated"), { name: u.name }));
      if (invite) showLink("inviteLink", u.name, made);
    } catch (err) {
      fail(err);
      return;
    }
    await onMade();
  };
  const choose = (on: boolean) => {
    setInvite(on);
    if (on && password.current) password.current.value = "";
  };
  return (
    <form id="new-user" className="card" onSubmit={create}>
      <h3>{t("newUser")}</h3>
      <div className="fields">
        <div>
          <label htmlFor="new-user-name">{t("userName")}</label>
          <input type="text" id="new-user-name" name="name" autoComplete="off" required />
        </div>
        <div>
          <label htmlFor="new-user-password">{t("password")}</label>
          <input ref={password} type="password" id="new-user-password" name="password" autoComplete="new-password" required={!invite} disabled={invite} />
        </div>
        <div>
          <label htmlFor="new-user-role">{t("role")}</label>
          <select id="new-user-role" name="role">
            <option value="user">{t("roleUser")}</option>
            <option value="admin">{t("roleAdmin")}</option>
          </select>
        </div>
        <div>
          <button type="submit">{t("create")}</button>
        </div>
      </div>
      <label className="check">
        <input type="checkbox" id="new-user-invite" name="invite" checked={invite} onChange={(e) => choose(e.target.checked)} /> {t("inviteInstead")}
      </label>
      <Status said={said} t={t} />
    </form>
  );
}

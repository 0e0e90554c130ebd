import { useState } from "react";
import { request } from "../http";
import { Status, useStatus } from "../Status";
import type { PageProps } from "../types";
import { utcMinute } from "../format";

// PasswordLink is the set-password page's data (web/account/setup.go):
// the link's account and expiry, or the label of why it cannot be used.
interface PasswordLink {
  token?: string;
  name?: string;
  expiresAt?: string;
  problem?: string;
}

// SetPassword is the page of a one-time set-password link: the link's
// token sets the password once; then the person signs in with it.
export function SetPassword({ data, t }: PageProps<PasswordLink>) {
  const { said, say } = useStatus();
  const [signIn, setSignIn] = useState("");
  const [busy, setBusy] = useState(false);
  if (data.problem) {
    return (
      <section id="set-password-problem" className="card">
        <h2>{t("setPasswordTitle")}</h2>
        <p className="error" data-role="problem">
          {t(data.problem)}
        </p>
        <p>
          <a href="/login">{t("signIn")}</a>
        </p>
      </section>
    );
  }
  const submit = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const f = e.currentTarget.elements as unknown as Record<string, HTMLInputElement>;
    if (f.password.value !== f.repeat.value) {
      say(t("passwordsDiffer"), false);
      return;
    }
    setBusy(true);
    try {
      const done = await request<{ signIn?: string }>("POST", "/api/set-password", { token: data.token, password: f.password.value });
      // only a path of this engine's: the answer names where to sign in
      const next = done?.signIn ?? "";
      setSignIn(next.startsWith("/") && !next.startsWith("//") ? next : "/login");
      say(t("passwordSet"));
    } catch (err) {
      // no sign-in link on a refusal: the link, not a session, was refused
      say((err as Error).message, false);
    }
    setBusy(false);
  };
  return (
    <form id="set-password" className="card" onSubmit={submit}>
      <h2>{t("setPasswordTitle")}</h2>
      <p>
        {t("userName")}: <strong data-role="name">{data.name}</strong>
      </p>
      <input type="text" name="name" defaultValue={data.name} autoComplete="username" hidden />
      <div data-role="fields" hidden={!!signIn}>
        <label htmlFor="set-password-new">{t("newPassword")}</label>
        <input type="password" id="set-password-new" name="password" autoComplete="new-password" required />
        <label htmlFor="set-password-repeat">{t("repeatPassword")}</label>
        <input type="password" id="set-password-repeat" name="repeat" autoComplete="new-password" required />
        <p className="hint">
          {t("passwordRule")} {t("linkWorksOnce")}{" "}
          {data.expiresAt && <time dateTime={data.expiresAt}>{utcMinute(data.expiresAt)}</time>}.
        </p>
        <p>
          <button type="submit" disabled={busy}>
            {t("setPassword")}
          </button>
        </p>
      </div>
      <Status said={said} t={t}>
        {signIn && (
          <>
            {" "}
            <a href={signIn} data-role="sign-in">
              {t("signIn")}
            </a>
          </>
        )}
      </Status>
    </form>
  );
}

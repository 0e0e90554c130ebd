import type { ReactNode } from "react";
import type { Translate } from "../i18n";
import { request } from "./http";
import type { User } from "./types";

// Shell is what every page has around it: the brand (home is the apps, or
// the share link for its visitors), the signed-in user's places (the
// admins' too), the other language and signing out.
export function Shell({ user, t, lang, children }: { user: User; t: Translate; lang: string; children: ReactNode }) {
  const member = !!user.id && !user.linkId;
  const signOut = async (e: React.MouseEvent) => {
    e.preventDefault();
    await request("POST", "/api/logout").catch(() => undefined);
    location.href = "/login";
  };
  const other = lang === "zh" ? "en" : "zh";
  return (
    <>
      <header className="site-header">
        <a className="brand" href={user.linkId ? "/share/" + encodeURIComponent(user.linkId) : "/"}>
          Flowbox
        </a>
        <nav aria-label={t("places")}>
          {member && (
            <>
              <a href="/">{t("apps")}</a>
              <a href="/account">{t("account")}</a>
              {user.admin && (
                <>
                  <a href="/admin">{t("admin")}</a>
                  <a href="/admin/users">{t("users")}</a>
                  <a href="/admin/audit">{t("audit")}</a>
                  <a href="/admin/skills">{t("skills")}</a>
                  <a href="/admin/mcp">{t("mcpServers")}</a>
                  <a href="/admin/queues/">{t("queues")}</a>
                </>
              )}
            </>
          )}
        </nav>
        <a href={"?lang=" + other} lang={other}>
          {lang === "zh" ? "English" : "中文"}
        </a>
        {member && (
          <>
            <span className="who">{user.name}</span>
            <a href="#" id="logout" onClick={signOut}>
              {t("signOut")}
            </a>
          </>
        )}
      </header>
      <main className="site-main">{children}</main>
    </>
  );
}

import { useState, type ReactNode } from "react";
import type { Translate } from "../i18n";
import { request } from "./http";
import type { User } from "./types";

// places are the header's links: everyone's, then the admins'.
const places: { href: string; label: string; admin?: boolean }[] = [
  { href: "/", label: "apps" },
  { href: "/account", label: "account" },
  { href: "/admin", label: "admin", admin: true },
  { href: "/admin/users", label: "users", admin: true },
  { href: "/admin/audit", label: "audit", admin: true },
  { href: "/admin/skills", label: "skills", admin: true },
  { href: "/admin/mcp", label: "mcpServers", admin: true },
  { href: "/admin/queues/", label: "queues", admin: true },
];

// Shell is what every page has around it: the brand (home is the apps, or
// the share link for its visitors), the signed-in user's places (the
// admins' too), the other language and signing out. On a phone, an
// admin's many places fold into a menu named after the current one.
export function Shell({ user, t, lang, children }: { user: User; t: Translate; lang: string; children: ReactNode }) {
  const member = !!user.id && !user.linkId;
  const [open, setOpen] = useState(false);
  const mine = member ? places.filter((p) => !p.admin || user.admin) : [];
  const signOut = async (e: React.MouseEvent) => {
    e.preventDefault();
    await request("POST", "/api/logout").catch(() => undefined);
    location.href = "/login";
  };
  const other = lang === "zh" ? "en" : "zh";
  // The place the page belongs to is marked: the longest link its path
  // starts with ("/" holds the apps and their pages).
  const path = location.pathname;
  const current = places
    .map((p) => p.href)
    .filter((h) => (h === "/" ? path === "/" || path.startsWith("/apps/") : path === h.replace(/\/$/, "") || path.startsWith(h.replace(/\/?$/, "/"))))
    .sort((x, y) => y.length - x.length)[0];
  const here = mine.find((p) => p.href === current);
  const folds = mine.length > 3;
  return (
    <>
      <header className={"site-header" + (folds ? " folds" : "") + (open ? " open" : "")}>
        <a className="brand" href={user.linkId ? "/share/" + encodeURIComponent(user.linkId) : "/"}>
          Flowbox
        </a>
        {folds && (
          <button type="button" className="secondary menu-toggle" aria-expanded={open} aria-controls="places" onClick={() => setOpen(!open)}>
            {here ? t(here.label) : t("places")} <span aria-hidden="true">{open ? "▴" : "▾"}</span>
          </button>
        )}
        <nav id="places" aria-label={t("places")}>
          {mine.map((p) => (
            <a key={p.href} href={p.href} aria-current={p.href === current ? "page" : undefined}>
              {t(p.label)}
            </a>
          ))}
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

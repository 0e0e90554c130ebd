import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { translator } from "../i18n";
import { pages } from "./registry";
import { Shell } from "./Shell";
import type { User } from "./types";
import "./pages.css";

// The entry of the engine's pages other than the canvas and the chat: the
// engine names the page and hands it its data in <script
// type="application/json" id="page-data"> (which the CSP does not run),
// and the session's CSRF token in <meta name="csrf-token">.
interface Shelled {
  page: string;
  title: string;
  user: User;
  data?: unknown;
}

const lang = document.documentElement.lang || "en";
const t = translator(lang);
const shell = JSON.parse(document.getElementById("page-data")?.textContent || "{}") as Shelled;
const Page = pages[shell.page];

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Shell user={shell.user ?? {}} t={t} lang={lang}>
      {Page ? <Page data={shell.data} t={t} lang={lang} user={shell.user ?? {}} /> : <p className="error">{t("pageMissing")}</p>}
    </Shell>
  </StrictMode>,
);

import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import "@xyflow/react/dist/style.css";
import "./styles.css";
import { Builder } from "./Builder";
import { translator } from "./i18n";

// The engine serves this page at /apps/:appId/flow with the session's
// CSRF token in <meta name="csrf-token"> and the page's language in
// <html lang>.
const csrf = document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";
const lang = document.documentElement.lang || "en";
const appId = decodeURIComponent(location.pathname.split("/")[2] ?? "");
const t = translator(lang);
document.title = t("canvas") + " · Flowbox";

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <Builder appId={appId} csrf={csrf} t={t} lang={lang} />
  </StrictMode>,
);
